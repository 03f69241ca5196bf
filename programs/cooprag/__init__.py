"""CoopRAG (Ko et al., 2025): the program (:mod:`.program`), its reasoning chains and unrolled query (:mod:`.chain`),
its training loop — unrolling the train questions (``multihop cooprag unroll`` in :mod:`.cli`), then fine-tuning the
encoder on them under the paper's or the released recipe (:mod:`.training`, ``multihop cooprag train``) —, and the
gold rows its students train on (:mod:`.gold`)."""

from multihop.programs.papers import reported

from ..papers import Paper
from ..registry import Declaration
from . import gold  # noqa: F401 - registers CoopRAG's gold stage targets
from .program import CoopRAG
from .tables import TABLES

__all__ = ["CoopRAG"]

Declaration(
    CoopRAG,
    kind="method",
    paper=Paper("Cooperative Retrieval-Augmented Generation for Question Answering: Mutual Information Exchange and "
                "Ranking by Contrasting Layers", "Youmin Ko, Sungjong Seo, Hyunjoon Kim", 2025),
    # Tables 12-13 (multi-step retrieval and QA): IRCoT; its single-step rows are retrievers (Table 10)
    paper_baselines=("IRCoT",),
    # Table 3 (single-step QA, EM/F1) and Table 2 (single-step retrieval, R@2/R@5), the CoopRAG (GPT-4o-mini) rows
    papers=reported("GPT-4o-mini", "Ko et al., 2025, Tables 2-3", "HippoRAG's 1,000-question test sets and their "
                    "corpora (Table 1); fine-tuned MPNet + RaLa", {
                        "hotpotqa": {"em": 65.6, "f1": 78.9, "recall@2": 88.8, "recall@5": 96.8},
                        "musique": {"em": 52.3, "f1": 67.1, "recall@2": 59.6, "recall@5": 75.7},
                        "2wiki": {"em": 71.7, "f1": 79.2, "recall@2": 80.4, "recall@5": 96.6},
                    }),
    cli="multihop.programs.cooprag.cli",
    tables=TABLES,  # its paper's results tables, row by row (.tables)
)
