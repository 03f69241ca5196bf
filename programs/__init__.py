"""The programs: one package per method, each ending in its declaration (:class:`~.methods.Method`), plus the
baselines, saving/loading them, and the registries every shared place reads (programs, methods, distillation
presets). A new method is one import line here."""

from .base import PROGRAMS, MultihopProgram, takes_retriever
from .budget import Budget
from .methods import (
           METHODS,
           Method,
           budget_knobs,
           compared_by_default,
           method_of,
           program_named,
           program_under_budget,
           shared_retriever,
)

# isort: off
# the methods in their papers' order (seeds 000-004), then the baselines: the order they declare themselves in, which
# is `multihop compare`'s default order
from .cooprag import CoopRAG
from .dualrag import DualRAG
from .composerag import ComposeRAG
from .hanrag import HANRAG
from .cirag import CIRAG
from .baselines import NoRetrieval, SingleStepRAG
from .ircot import IRCoT
from .iter_retgen import IterRetGen
from .flare import FLARE
from .self_ask import SelfAsk
from .adaptive_rag import AdaptiveRAG
from .metarag import MetaRAG
from .genground import GenGround
# isort: on
from .saved import load, save
from .students import DISTILL_PRESETS, register_distill_preset

__all__ = ["AdaptiveRAG", "Budget", "CIRAG", "ComposeRAG", "CoopRAG", "DISTILL_PRESETS", "DualRAG", "FLARE", "GenGround",
           "HANRAG", "IRCoT", "IterRetGen", "METHODS", "MetaRAG", "Method", "MultihopProgram", "NoRetrieval",
           "PROGRAMS", "SelfAsk", "SingleStepRAG", "budget_knobs", "compared_by_default", "load", "method_of",
           "program_named", "program_under_budget", "register_distill_preset", "save", "shared_retriever",
           "takes_retriever"]
