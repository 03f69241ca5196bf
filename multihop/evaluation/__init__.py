"""The evaluation layer: running any program over a question set (resumable, threaded, sharded or on Ray), its
metrics, per-stage traces and the parallel fan-out programs use inside a call. It knows no program by name: it imports
the data and LM layers only."""
