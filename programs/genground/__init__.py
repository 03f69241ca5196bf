"""GenGround (Shi et al., ACL 2024, "Generate-then-Ground in Retrieval-Augmented Generation for Multi-hop Question
Answering"), a baseline DualRAG reports: the program (:mod:`.program`) and its gold rows (:mod:`.gold`)."""

from ..methods import Method
from . import gold  # noqa: F401 - registers GenGround's gold stage targets
from .program import GenGround, cited_index, render_round

__all__ = ["GenGround", "cited_index", "render_round"]

Method(
    GenGround,
    compare=False,  # of our five papers only DualRAG reports it
    loop_budget="max_iterations",
    # §5.4: the top 10 documents a sub-question (batches of 3, the default); the authors' code: at most 7 deductions
    paper_settings={"k": 10, "max_iterations": 7},
)
