"""The programs: one ``dspy.Module`` per method, plus the baselines."""

from .base import MultihopProgram
from .baselines import NoRetrieval, SingleStepRAG
from .composerag import ComposeRAG
from .cooprag import CoopRAG

PROGRAMS = {"NoRetrieval": NoRetrieval, "SingleStepRAG": SingleStepRAG, "CoopRAG": CoopRAG, "ComposeRAG": ComposeRAG}

__all__ = ["PROGRAMS", "ComposeRAG", "CoopRAG", "MultihopProgram", "NoRetrieval", "SingleStepRAG"]
