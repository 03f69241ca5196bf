"""ComposeRAG (Wu et al., 2025): the program (:mod:`.program`), the text plumbing between its modules
(:mod:`.composition`), the records of its loop (:mod:`.state`) and the gold rows its students train on
(:mod:`.gold`)."""

from multihop.programs.papers import reported

from ..papers import Paper
from ..registry import Declaration
from . import gold  # noqa: F401 - registers ComposeRAG's gold stage targets
from .program import ComposeRAG
from .tables import TABLES

__all__ = ["ComposeRAG"]

Declaration(
    ComposeRAG,
    kind="method",
    paper=Paper("ComposeRAG: A Modular and Composable RAG for Corpus-Grounded Multi-Hop Question Answering",
                "Ruofan Wu, Youngwon Lee, Fan Shu, Danmei Xu, Seung-won Hwang, Zhewei Yao, Yuxiong He, Feng Yan", 2025),
    # its Table 1 reproduces RQ-RAG (a fine-tuned rewriter) and Search-o1 (a reasoning model's agentic search), which
    # need models not here; Self-Ask, its related work's self-reflection prompting (§2), is the decomposition row
    paper_baselines=("SelfAsk",),
    # Table 1, the "Ours GPT-4o-mini" rows (the ComposeRAG row of its Table 2)
    papers=reported("GPT-4o-mini", "Wu et al., 2025, Table 1", "500 sampled dev questions a dataset; Cortex Search "
                    "over wiki2019", {
                        "hotpotqa": {"llm_eval": 70.2, "cover_em": 55.8},
                        "2wiki": {"llm_eval": 74.0, "cover_em": 72.8},
                        "musique": {"llm_eval": 37.6, "cover_em": 32.8},
                    }),
    loop_budget="max_reflections",
    tables=TABLES,  # its paper's results tables, row by row (.tables)
)
