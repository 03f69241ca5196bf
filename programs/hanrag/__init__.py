"""HANRAG (Sun et al., 2025): the program (:mod:`.program`), its routes and Steps (:mod:`.routes`), the App. G examples
as demos (:mod:`.demos`) and the Revelator's training data from the annotations (:mod:`.gold`, ``multihop hanrag
revelator-data`` in :mod:`.cli`)."""

from multihop.programs.papers import reported

from ..papers import Paper
from ..registry import Declaration
from . import gold  # noqa: F401 - registers the Revelator's gold stage targets
from .program import HANRAG, REVELATOR_STAGES
from .routes import gold_route, with_gold_routes
from .tables import TABLES

__all__ = ["HANRAG", "REVELATOR_STAGES", "gold_route", "with_gold_routes"]

Declaration(
    HANRAG,
    kind="method",
    paper=Paper("HANRAG: Heuristic Accurate Noise-resistant Retrieval-Augmented Generation for Multi-hop Question "
                "Answering", "Duolin Sun, Dan Yang, Yue Shen, Yihan Jiao, Zhehao Tan, Jie Feng, Lianzhen Zhong, "
                "Jian Wang, Peng Wei, Jinjie Gu", 2025),
    # Tables 1-2: no retrieval, the single-step approach (BM25 top 5), IRCoT, Adaptive-RAG (its Adaptive Retrieval and
    # Self-RAG rows are not built: Self-RAG is a fine-tuned model)
    paper_baselines=("NoRetrieval", "SingleStepRAG", "IRCoT", "AdaptiveRAG"),
    # Table 2 (multi-hop), the HANRAG row
    papers=reported("Llama-3.1-8B-Instruct", "Sun et al., 2025, Table 2", "Adaptive-RAG's splits; BM25; a fine-tuned "
                    "Revelator", {
                        "musique": {"em": 29.8, "f1": 36.6, "acc": 43.2},
                        "hotpotqa": {"em": 49.2, "f1": 58.9, "acc": 61.3},
                        "2wiki": {"em": 47.2, "f1": 58.9, "acc": 60.8},
                    }),
    # App. D ("Implementation details"): LoRA, one epoch, initial learning rate 1e-4, cosine scheduler, 10% of the
    # training samples for warm-up. Rank, α and batch size are not given: DistillConfig's defaults.
    distill_preset={"epochs": 1, "lr": 1e-4, "scheduler": "cosine", "warmup": 0.1},
    loop_budget="max_steps",
    cli="multihop.programs.hanrag.cli",
    first_stage="bm25",  # the paper's retriever (§5.1)
    tables=TABLES,  # its paper's results tables, row by row (.tables)
)
