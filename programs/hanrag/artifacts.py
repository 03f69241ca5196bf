"""The classifier and the oracle's labels the Adaptive-RAG rows of HANRAG's tables need (:class:`~..papers.Artifact`):
silver labels of train questions, then the classifier trained on them (``multihop adaptiverag labels``, then
``multihop adaptiverag train``), and the dev questions' silver labels the oracle route reads. ``multihop reproduce
--build`` makes neither: labels take each strategy's run over the questions, and the classifier's training mixes in
the train files' bias labels, two commands whose options a user should choose."""

from __future__ import annotations

from ..papers import Artifact

CLASSIFIER = Artifact(
    "classifier", "classifier",
    "multihop adaptiverag labels --dataset DATA --out LABELS (for each of musique, hotpotqa, 2wiki), then "
    "multihop adaptiverag train LABELS... --out DIR",
    per_dataset=False)
ORACLE_LABELS = Artifact(
    "oracle-labels", "oracle_labels",
    "multihop adaptiverag labels --dataset DATA --split dev --out DIR (each dev question's silver label: the "
    "simplest strategy that answers it exactly, else the multi-hop bias C)",
    per_dataset=True)
