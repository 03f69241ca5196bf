"""IRCoT (Trivedi et al., ACL 2023), the baseline four of the five papers report (CoopRAG, DualRAG, HANRAG, CIRAG):
the program (:mod:`.program`) and its gold rows (:mod:`.gold`)."""

from ...papers import Paper
from ...registry import Declaration
from . import gold  # noqa: F401 - registers IRCoT's gold stage targets
from .program import IRCoT

__all__ = ["IRCoT"]

Declaration(
    IRCoT,
    kind="baseline",
    paper=Paper("Interleaving Retrieval with Chain-of-Thought Reasoning for Knowledge-Intensive Multi-Step Questions",
                "Harsh Trivedi, Niranjan Balasubramanian, Tushar Khot, Ashish Sabharwal", 2023, "ACL"),
    loop_budget="max_steps",
    # §3.1: up to 8 reasoning steps, at most 15 paragraphs; K is tuned over {2, 4, 6, 8} per dataset (our 4 kept)
    paper_settings={"max_steps": 8, "max_paragraphs": 15},
)
