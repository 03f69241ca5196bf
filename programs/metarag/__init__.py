"""MetaRAG (Zhou et al., WWW 2024, "Metacognitive Retrieval-Augmented Large Language Models"), a baseline DualRAG and
CIRAG report: the program (:mod:`.program`) and its gold rows (:mod:`.gold`)."""

from ..methods import Method
from . import gold  # noqa: F401 - registers MetaRAG's gold stage targets
from .program import MetaRAG, acceptable, condition

__all__ = ["MetaRAG", "acceptable", "condition"]

Method(
    MetaRAG,
    compare=True,  # DualRAG (Table 2) and CIRAG (Table 1) report it
    loop_budget="max_iterations",
    # §5.3: the top 5 passages, at most 5 iterations (App. D's Table 5 lists its main result under 2); the monitor's
    # threshold 0.4 (§5.3) is the default, which no budget sets
    paper_settings={"k": 5, "max_iterations": 5},
)
