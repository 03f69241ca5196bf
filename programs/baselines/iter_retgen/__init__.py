"""Iter-RetGen (Shao et al., Findings of EMNLP 2023), an iterative RAG that DualRAG's and CIRAG's related work cites:
the program (:mod:`.program`); its gold rows are registered here."""

import dspy

from ...gold import GoldContext, Pairs, gold_documents, register_gold_builder
from ...papers import Paper
from ...registry import Method
from .program import IterRetGen, next_query

__all__ = ["IterRetGen", "next_query"]


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


Method(
    IterRetGen,
    kind="baseline",
    paper=Paper("Enhancing Retrieval-Augmented Large Language Models with Iterative Retrieval-Generation Synergy",
                "Zhihong Shao, Yeyun Gong, Yelong Shen, Minlie Huang, Nan Duan, Weizhu Chen", 2023, "Findings of EMNLP"),
    loop_budget="iterations",
    compare=False,  # DualRAG and CIRAG cite it (related work), but no table of theirs reports it
    # the paper evaluates T = 1..7 rounds; its own k and T are our picks (the defaults), so nothing to declare

)
