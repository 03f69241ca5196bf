"""MetaRAG (Zhou et al., WWW 2024, "Metacognitive Retrieval-Augmented Large Language Models"), a baseline DualRAG and
CIRAG report: the program (:mod:`.program`), the authors' reading of free-text replies (:mod:`.parsing`) and its
gold rows (:mod:`.gold`)."""

from ...papers import Paper
from ...registry import Declaration
from . import gold  # noqa: F401 - registers MetaRAG's gold stage targets
from .program import MetaRAG, condition

__all__ = ["MetaRAG", "condition"]

Declaration(
    MetaRAG,
    kind="baseline",
    paper=Paper("Metacognitive Retrieval-Augmented Large Language Models", "Yujia Zhou, Zheng Liu, Jiajie Jin, "
                "Jian-Yun Nie, Zhicheng Dou", 2024, "WWW"),
    compare=True,  # DualRAG (Table 2) and CIRAG (Table 1) report it
    loop_budget="max_iterations",
    # the authors' code (main.py's defaults, metarag.py's MetaRAG): ref_num 5, max_iter 3; the paper's §5.3 (as this
    # library reads it) also gives 5 documents but up to 5 iterations. The threshold (code 0.3, §5.3 0.4, both
    # for an embedding cosine) is no budget's: it is the default, 0.3, on our token F1
    paper_settings={"k": 5, "max_iterations": 3},
)
