"""The baselines the five papers compare against, each rebuilt from its own paper and released code: the papers'
"Direct" and "NativeRAG" (:mod:`.single_step`), IRCoT, Iter-RetGen, FLARE, Self-Ask, Adaptive-RAG, MetaRAG and
GenGround. Each declares itself ``Declaration(..., kind="baseline")``; ``PROGRAMS.reported_by(name)``
(:meth:`~multihop.programs.registry.ProgramRegistry.reported_by`) tells which of the five papers report it."""

# isort: off
# the order they declare themselves in, which is `multihop compare`'s and `multihop programs`' order
from .single_step import NoRetrieval, SingleStepRAG
from .ircot import IRCoT
from .iter_retgen import IterRetGen
from .flare import FLARE
from .self_ask import SelfAsk
from .adaptive_rag import AdaptiveRAG
from .metarag import MetaRAG
from .genground import GenGround
# isort: on
from .rerankable import RerankableBaseline

__all__ = ["AdaptiveRAG", "FLARE", "GenGround", "IRCoT", "IterRetGen", "MetaRAG", "NoRetrieval", "RerankableBaseline",
           "SelfAsk", "SingleStepRAG"]
