"""The evaluation layer: running any program over a question set (resumable, threaded, sharded or on Ray), its
metrics and intervals, and MLflow runs. It knows no program by name: it imports the data, LM and runtime layers only."""
