"""GenGround (Shi et al., ACL 2024, "Generate-then-Ground in Retrieval-Augmented Generation for Multi-hop Question
Answering"), a baseline DualRAG reports: the program (:mod:`.program`) and its gold rows (:mod:`.gold`)."""

from ...papers import Paper
from ...registry import Declaration
from . import gold  # noqa: F401 - registers GenGround's gold stage targets
from .program import GenGround, cited_index, render_round

__all__ = ["GenGround", "cited_index", "render_round"]

Declaration(
    GenGround,
    kind="baseline",
    paper=Paper("Generate-then-Ground in Retrieval-Augmented Generation for Multi-hop Question Answering",
                "Zhengliang Shi, Shuo Zhang, Weiwei Sun, Shen Gao, Pengjie Ren, Zhumin Chen, Zhaochun Ren", 2024,
                "ACL"),
    compare=False,  # of our five papers only DualRAG reports it
    loop_budget="max_iterations",
    # k: the paper's §5.4 (top 10 documents a sub-question, batches of 3; as this library reads it), where the
    # authors' code (run.py's --n_docs, src/genground.py) defaults to 9; max_iterations: the authors' code's
    # range(1, 8), at most 7 deductions (the paper states no cap)
    paper_settings={"k": 10, "max_iterations": 7},
)
