"""The programs: one ``dspy.Module`` per method, plus the baselines."""

from .base import MultihopProgram
from .baselines import NoRetrieval, SingleStepRAG

PROGRAMS = {"NoRetrieval": NoRetrieval, "SingleStepRAG": SingleStepRAG}

__all__ = ["PROGRAMS", "MultihopProgram", "NoRetrieval", "SingleStepRAG"]
