"""The programs: one package per method, each ending in its declaration (:class:`~.registry.Declaration`), plus the
baselines (under :mod:`.baselines`), saving/loading them, and the registry every shared place reads
(:data:`~.registry.PROGRAMS`: which class, which declaration) and the distillation presets. A new method is one import
line here."""

from .base import MultihopProgram, takes_retriever
from .papers import Paper
from .registry import PROGRAMS, Declaration

# isort: off
# the methods in their papers' order (seeds 000-004), then the baselines: the order they declare themselves in, which
# is `multihop compare`'s default order
from .cooprag import CoopRAG
from .dualrag import DualRAG
from .composerag import ComposeRAG
from .hanrag import HANRAG
from .cirag import CIRAG
from .baselines import AdaptiveRAG, FLARE, GenGround, IRCoT, IterRetGen, MetaRAG, NoRetrieval, SelfAsk, SingleStepRAG
# isort: on
from .distill_presets import DISTILL_PRESETS, register_distill_preset
from .saved import load, save

__all__ = ["AdaptiveRAG", "CIRAG", "ComposeRAG", "CoopRAG", "DISTILL_PRESETS", "Declaration", "DualRAG", "FLARE",
           "GenGround", "HANRAG", "IRCoT", "IterRetGen", "MetaRAG", "MultihopProgram", "NoRetrieval", "PROGRAMS",
           "Paper", "SelfAsk", "SingleStepRAG", "load", "register_distill_preset", "save", "takes_retriever"]
