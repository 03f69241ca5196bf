"""Self-Ask (Press et al., Findings of EMNLP 2023) with retrieval, the self-reflection prompting of ComposeRAG's
related work (§2: EfficientRAG and AUTO-RAG build on it), the decomposition row its benchmark runs in place of its
RQ-RAG and Search-o1 rows: the program (:mod:`.program`) and its gold rows from the annotated hops (MuSiQue's
decomposition, 2Wiki's evidences; :mod:`.gold`)."""

from ...papers import Paper
from ...registry import Declaration
from . import gold  # noqa: F401 - registers Self-Ask's gold stage targets
from .program import SelfAsk, follow_up_line

__all__ = ["SelfAsk", "follow_up_line"]


Declaration(
    SelfAsk,
    kind="baseline",
    paper=Paper("Measuring and Narrowing the Compositionality Gap in Language Models", "Ofir Press, Muru Zhang, "
                "Sewon Min, Ludwig Schmidt, Noah A. Smith, Mike Lewis", 2023, "Findings of EMNLP"),
    loop_budget="max_follow_ups",
    compare=False,
)
