"""Adaptive-RAG (Jeong et al., NAACL 2024), HANRAG's main rival (Sun et al., 2025, Tables 1-2): the program
(:mod:`.program`), its complexity labels (:mod:`.complexity`), the silver-labelling job (:mod:`.labels`) and the
sample of train questions it labels (:mod:`.sampling`), the classifier that replaces the paper's T5-Large
(:mod:`.classifier`) and ``multihop adaptiverag labels|train`` (:mod:`.cli`)."""

from ...papers import Paper
from ...registry import Declaration
from . import gold  # noqa: F401 - records that its strategies' stages take their own programs' gold rows
from .classifier import ComplexityClassifier, TrainingSettings, train_classifier
from .complexity import LABELS, silver_label
from .labels import bias_rows, label_questions, read_labels, with_bias_labels, with_gold_complexity
from .program import AdaptiveRAG
from .sampling import held_out_sample, sampled_questions

__all__ = ["LABELS", "AdaptiveRAG", "ComplexityClassifier", "TrainingSettings", "bias_rows", "held_out_sample",
           "label_questions", "read_labels", "sampled_questions", "silver_label", "train_classifier",
           "with_bias_labels", "with_gold_complexity"]

Declaration(
    AdaptiveRAG,
    kind="baseline",
    paper=Paper("Adaptive-RAG: Learning to Adapt Retrieval-Augmented Large Language Models through Question "
                "Complexity", "Soyeong Jeong, Jinheon Baek, Sukmin Cho, Sung Ju Hwang, Jong C. Park", 2024, "NAACL"),
    compare=False,  # one of the five papers (HANRAG) reports it
    loop_budget="max_steps",
    cli="multihop.programs.baselines.adaptive_rag.cli",
    first_stage="bm25",  # §4.2: BM25 for every strategy, after Trivedi et al. and Mallen et al.
    paper_settings={
        # the authors' released runs (classifier/postprocess/predict_complexity_on_classification_results.py):
        # ircot_qa with bm25_retrieval_count 6, oner_qa with 15
        "k": 6,
        "single_step_k": 15,
        # the IRCoT exit controller's max_num_sentences (commaqa/inference/ircot.py: 10), which the authors'
        # base_configs/ircot_qa_*.jsonnet do not change
        "max_steps": 10,
    },
)
