"""The runtime layer: what every program call runs on, whoever calls it — per-stage traces and counted events
(:mod:`.tracing`), typed MLflow spans for retrievals and reranks (:mod:`.spans`) and the fan-out of independent calls
inside one program call (:mod:`.parallel`). Programs and retrievers import it; it imports DSPy and nothing of the
project."""
