"""The programs: one package per method, plus the baselines, saving/loading them, and the methods' distillation
presets (each method package registers its own)."""

from .base import PROGRAMS, MultihopProgram, takes_retriever
from .baselines import NoRetrieval, SingleStepRAG
from .cirag import CIRAG
from .composerag import ComposeRAG
from .cooprag import CoopRAG
from .dualrag import DualRAG
from .hanrag import HANRAG
from .saved import load, save
from .students import DISTILL_PRESETS, register_distill_preset

__all__ = ["CIRAG", "DISTILL_PRESETS", "PROGRAMS", "HANRAG", "ComposeRAG", "CoopRAG", "DualRAG", "MultihopProgram",
           "NoRetrieval", "SingleStepRAG", "load", "register_distill_preset", "save", "takes_retriever"]
