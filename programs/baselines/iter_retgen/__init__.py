"""Iter-RetGen (Shao et al., Findings of EMNLP 2023), an iterative RAG that DualRAG's and CIRAG's related work cites:
the program (:mod:`.program`) and its gold rows (:mod:`.gold`)."""

from ...papers import Paper
from ...registry import Declaration
from . import gold  # noqa: F401 - registers Iter-RetGen's gold stage targets
from .program import IterRetGen, next_query

__all__ = ["IterRetGen", "next_query"]


Declaration(
    IterRetGen,
    kind="baseline",
    paper=Paper("Enhancing Retrieval-Augmented Large Language Models with Iterative Retrieval-Generation Synergy",
                "Zhihong Shao, Yeyun Gong, Yelong Shen, Minlie Huang, Nan Duan, Weizhu Chen", 2023,
                "Findings of EMNLP"),
    loop_budget="iterations",
    compare=False,  # DualRAG and CIRAG cite it (related work), but no table of theirs reports it
    # the paper evaluates T = 1..7 rounds; its own k and T are our picks (the defaults), so nothing to declare

)
