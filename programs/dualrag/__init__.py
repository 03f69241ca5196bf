"""DualRAG (Cheng et al., 2025): the program (:mod:`.program`), its outline, entity linking and document merging
(:mod:`.outline`), its gold stage targets (:mod:`.gold`) and the DualRAG-FT post-processing of teacher rows
(:mod:`.sft`, ``multihop dualrag sft`` in :mod:`.cli`)."""

from multihop.programs.papers import reported

from ..papers import Paper
from ..registry import Declaration
from . import gold  # noqa: F401 - registers DualRAG's gold stage targets
from .program import DualRAG
from .tables import TABLES

__all__ = ["DualRAG"]

Declaration(
    DualRAG,
    kind="method",
    paper=Paper("DualRAG: A Dual-Process Approach to Integrate Reasoning and Retrieval for Multi-Hop Question "
                "Answering", "Rong Cheng, Jinyi Liu, Yan Zheng, Fei Ni, Jiazhen Du, Hangyu Mao, Fuzheng Zhang, "
                "Bo Wang, Jianye Hao", 2025),
    # Table 2: Direct, NativeRAG, IRCoT, MetaRAG, GenGround; App. H.5, Table 16 (GPT-4o-mini only): FLARE
    paper_baselines=("NoRetrieval", "SingleStepRAG", "IRCoT", "MetaRAG", "GenGround", "FLARE"),
    # Table 2, the DualRAG row under Qwen2.5-72B-Instruct (per dataset: LLM judge, EM, Acc, F1; its Acc/F1 are Table
    # 3's DualRAG row)
    papers=reported("Qwen2.5-72B-Instruct", "Cheng et al., 2025, Table 2", "1,000 sampled questions; HotpotQA on its "
                    "Wikipedia corpus; bge-small + bge-reranker (top-50 to 10)", {
                        "hotpotqa": {"llm_eval": 79.7, "em": 49.7, "acc": 70.0, "f1": 65.7},
                        "2wiki": {"llm_eval": 84.8, "em": 65.6, "acc": 85.0, "f1": 77.3},
                        "musique": {"llm_eval": 70.1, "em": 40.8, "acc": 66.3, "f1": 56.3},
                    }),
    # App. B: a cosine learning-rate schedule (the rate itself was lost from the text); full-parameter training with
    # DeepSpeed on 16 A100s is out of reach here, so the student is a LoRA adapter with DistillConfig's other defaults.
    distill_preset={"scheduler": "cosine"},
    loop_budget="max_iterations",
    cli="multihop.programs.dualrag.cli",
    tables=TABLES,  # its paper's results tables, row by row (.tables)
)
