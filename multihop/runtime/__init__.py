"""The runtime layer: what every program call runs on, whoever calls it — per-stage traces and counted events
(:mod:`.tracing`), typed MLflow spans for retrievals and reranks (:mod:`.spans`) and the fan-out of independent calls
inside one program call (:mod:`.parallel`) — and the console every command prints to (:mod:`.console`), a method's
own commands included. Programs and retrievers import it; it imports DSPy and nothing of the project."""
