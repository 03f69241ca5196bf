"""CIRAG (Wei et al., 2025): the program (:mod:`.program`), its triples with their provenance (:mod:`.triples`), its
offline triple cache (:mod:`.cache`, ``multihop cirag extract`` in :mod:`.cli`), App. A's demos (:mod:`.demos`) and the
gold rows its students train on (:mod:`.gold`); the teacher-trajectory path is ``multihop trajectories --program CIRAG
--complete-only --min-score 0`` (§4.3's complete trajectories, :meth:`.CIRAG.trajectory_complete`), and ``multihop
distill --preset cirag`` trains the integrator on them (Eq. 8)."""

from multihop.programs.papers import reported

from ..papers import Paper
from ..registry import Declaration
from . import gold  # noqa: F401 - registers the integrator's gold targets
from .program import CIRAG
from .tables import TABLES

__all__ = ["CIRAG"]

Declaration(
    CIRAG,
    kind="method",
    paper=Paper("CIRAG: Construction-Integration Retrieval and Adaptive Generation for Multi-hop Question Answering",
                "Zili Wei, Xiaocui Yang, Yilin Wang, Zihan Wang, Weidong Bao, Shi Feng, Daling Wang, Yifei Zhang",
                2025),
    # Table 1: NativeRAG, IRCoT, FLARE (Qwen2.5-7B only), MetaRAG, DualRAG (one of the five methods); its KiRAG row is
    # not built
    paper_baselines=("SingleStepRAG", "IRCoT", "FLARE", "MetaRAG", "DualRAG"),
    # Table 1, the "Ours" row under Qwen2.5-7B(-Instruct)
    papers=reported("Qwen2.5-7B-Instruct", "Wei et al., 2025, Table 1", "1,000 sampled dev questions, IRCoT corpus; "
                    "distilled integrator", {
                        "2wiki": {"f1": 69.5, "em": 59.0},
                        "hotpotqa": {"f1": 67.1, "em": 52.5},
                        "musique": {"f1": 40.9, "em": 29.3},
                    }),
    # App. B.4 ("Training Details"): LoRA rank 64, 2 epochs, batch size 2, learning rate 2e-4. LoRA α is not given:
    # 2·r is ours. §3.5 (Eq. 8): the student learns the integrator's decisions only; `multihop distill --all-stages`
    # trains it on our extraction rows too.
    distill_preset={"r": 64, "alpha": 128, "epochs": 2, "batch_size": 2, "lr": 2e-4, "stages": ("integrate",)},
    loop_budget="max_iterations",
    cli="multihop.programs.cirag.cli",
    tables=TABLES,  # its paper's results tables, row by row (.tables)
)
