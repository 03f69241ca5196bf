"""Adaptive-RAG's complexity labels and the rules that give a question one (Jeong et al., NAACL 2024, §3.2).

A question's label names the simplest strategy that suits it: ``A`` (no retrieval), ``B`` (single-step retrieval),
``C`` (multi-step retrieval). A silver label is the simplest strategy whose answer to the question was correct — the
paper's correctness test, the authors' ``evaluate.py``: the normalised prediction equals a normalised gold answer
(:func:`multihop.evaluation.metrics.exact_match`). A question no strategy answers takes its dataset's inductive bias, B
for a single-hop dataset and C for a multi-hop one — our reading of §3.2, which labels with that bias the questions
the strategies leave unlabelled. The authors' code differs: ``label_complexity``
(``classifier/preprocess/preprocess_utils.py``) drops such a question, and its inductive-bias ("binary") rows are
another set of questions, the first 400 of each dataset's train file, joined to the silver ones
(:func:`~.labels.with_bias_labels`). Pure functions, no LM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dspy

from multihop.evaluation.metrics import exact_match

LABELS = ("A", "B", "C")  # the simplest first
NO_RETRIEVAL, SINGLE_STEP, MULTI_STEP = LABELS
# the inductive bias of the paper's six datasets (§4.1): single-hop → B, multi-hop → C; the data here is multi-hop
DATASET_BIAS = {"squad": SINGLE_STEP, "nq": SINGLE_STEP, "trivia": SINGLE_STEP,
                "musique": MULTI_STEP, "hotpotqa": MULTI_STEP, "2wiki": MULTI_STEP}
BY_OUTCOME, BY_BIAS = "outcome", "bias"  # where a silver label came from


def silver_label(correct: Mapping[str, bool], bias: str) -> tuple[str, str]:
    """The silver label of one question from which strategies answered it correctly (``{label: correct}``, the
    strategies not run left out): the simplest correct one, with :data:`BY_OUTCOME`; none correct: ``bias``, with
    :data:`BY_BIAS`."""
    if bias not in LABELS:
        raise ValueError(f"unknown inductive-bias label {bias!r}; one of {', '.join(LABELS)}")
    for label in LABELS:
        if correct.get(label):
            return label, BY_OUTCOME
    return bias, BY_BIAS


def answered(prediction: str, answers: Sequence[str]) -> bool:
    """The paper's correctness test: the normalised prediction equals a normalised gold answer."""
    return bool(exact_match(prediction or "", list(answers)))


def gold_answers(example: dspy.Example) -> list[str]:
    """A question's gold answer and its aliases."""
    answers = list(example.get("answers") or [])
    return answers or ([example.answer] if example.get("answer") else [])


def bias_label(example: dspy.Example, default: str | None = None) -> str:
    """The inductive-bias label of a question's dataset (its ``dataset`` field), else ``default``; a question of
    another dataset without a default is a ``ValueError`` naming it."""
    label = DATASET_BIAS.get(str(example.get("dataset") or "")) or default
    if label is None:
        raise ValueError(f"question {example.get('id')}: no inductive bias is known for dataset "
                         f"{example.get('dataset')!r} (known: {', '.join(DATASET_BIAS)}); give the bias label of "
                         "its dataset (B: single-hop, C: multi-hop)")
    if label not in LABELS:
        raise ValueError(f"unknown inductive-bias label {label!r}; one of {', '.join(LABELS)}")
    return label
