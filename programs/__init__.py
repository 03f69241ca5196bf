"""The programs: one package per method, each ending in its declaration (:class:`~.methods.Method`), plus the
baselines, saving/loading them, and the registries every shared place reads (programs, methods, distillation
presets). A new method is one import line here."""

from .base import PROGRAMS, MultihopProgram, takes_retriever
from .baselines import NoRetrieval, SingleStepRAG
from .cirag import CIRAG
from .composerag import ComposeRAG
from .cooprag import CoopRAG
from .dualrag import DualRAG
from .hanrag import HANRAG
from .methods import METHODS, Method, compared_by_default, method_of
from .saved import load, save
from .students import DISTILL_PRESETS, register_distill_preset

__all__ = ["CIRAG", "DISTILL_PRESETS", "HANRAG", "METHODS", "PROGRAMS", "ComposeRAG", "CoopRAG", "DualRAG", "Method",
           "MultihopProgram", "NoRetrieval", "SingleStepRAG", "compared_by_default", "load", "method_of",
           "register_distill_preset", "save", "takes_retriever"]
