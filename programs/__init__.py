"""The programs: one ``dspy.Module`` per method, plus the baselines, and saving/loading them."""

from .base import PROGRAMS, MultihopProgram, takes_retriever
from .baselines import NoRetrieval, SingleStepRAG
from .composerag import ComposeRAG
from .cooprag import CoopRAG
from .saved import load, save

__all__ = ["PROGRAMS", "ComposeRAG", "CoopRAG", "MultihopProgram", "NoRetrieval", "SingleStepRAG", "load", "save",
           "takes_retriever"]
