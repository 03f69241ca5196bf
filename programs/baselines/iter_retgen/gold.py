"""Iter-RetGen's gold stage targets: ``generate`` (a round's generation), the supporting paragraphs among ``k`` →
the gold answer, its reasoning the supporting sentences the data annotates."""

from __future__ import annotations

import dspy

from ...gold_builders import GoldContext, Pairs, gold_documents, register_gold_builder
from .program import IterRetGen


@register_gold_builder("IterRetGen", "generate")
def _generation_target(program: IterRetGen, example: dspy.Example, context: GoldContext) -> Pairs:
    """A round's generation: the supporting paragraphs among ``k`` → the gold answer, its reasoning the supporting
    sentences the data annotates (empty when it annotates none)."""
    if not example.get("answer") or not example.get("gold_passage_ids"):
        return []
    documents = [p.render() for p in gold_documents(example, program.k, context)]
    reasoning = " ".join(example.get("supporting_sentences") or [])
    return [({"passages": documents, "question": example.question},
             {"reasoning": reasoning, "answer": example.answer})]
