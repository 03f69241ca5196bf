"""The programs: one ``dspy.Module`` per method, plus the baselines."""

from .base import MultihopProgram
from .baselines import NoRetrieval, SingleStepRAG
from .cooprag import CoopRAG

PROGRAMS = {"NoRetrieval": NoRetrieval, "SingleStepRAG": SingleStepRAG, "CoopRAG": CoopRAG}

__all__ = ["PROGRAMS", "CoopRAG", "MultihopProgram", "NoRetrieval", "SingleStepRAG"]
