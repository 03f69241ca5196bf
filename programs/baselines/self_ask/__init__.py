"""Self-Ask (Press et al., Findings of EMNLP 2023) with retrieval, the self-reflection prompting of ComposeRAG's
related work (§2: EfficientRAG and AUTO-RAG build on it), the decomposition row its benchmark runs in place of its
RQ-RAG and Search-o1 rows: the program (:mod:`.program`); its gold rows are registered here from the annotated hops
(MuSiQue's decomposition, 2Wiki's evidences)."""

import dspy

from ...gold import GoldContext, Pairs, annotated_hops, gold_documents, register_gold_builder
from ...papers import Paper
from ...registry import Method
from .program import SelfAsk, follow_up_line

__all__ = ["SelfAsk", "follow_up_line"]


@register_gold_builder("SelfAsk", "follow_up")
def _follow_ups(program: SelfAsk, example: dspy.Example, context: GoldContext) -> Pairs:
    """One decision a hop — the hops before it asked and answered → its question — and a last one → the answer."""
    hops = annotated_hops(example)
    if not hops or not example.get("answer"):
        return []
    lines = [follow_up_line(hop.query, hop.answer) for hop in hops]
    rows = [({"question": example.question, "follow_ups": lines[:i]},
             {"follow_up_needed": True, "follow_up": hop.query, "final_answer": ""}) for i, hop in enumerate(hops)]
    return rows + [({"question": example.question, "follow_ups": lines},
                    {"follow_up_needed": False, "follow_up": "", "final_answer": example.answer})]


@register_gold_builder("SelfAsk", "conclude")
def _conclusion(program: SelfAsk, example: dspy.Example, context: GoldContext) -> Pairs:
    """Every hop asked and answered → the answer."""
    hops = annotated_hops(example)
    if not hops or not example.get("answer"):
        return []
    lines = [follow_up_line(hop.query, hop.answer) for hop in hops]
    return [({"question": example.question, "follow_ups": lines}, {"final_answer": example.answer})]


@register_gold_builder("SelfAsk", "intermediate")
def _intermediate_answers(program: SelfAsk, example: dspy.Example, context: GoldContext) -> Pairs:
    """A hop's answer: from its paragraph among the question's distractors (``k`` in all), or closed-book."""
    rows = []
    for i, hop in enumerate(annotated_hops(example)):
        inputs = {"follow_up": hop.query}
        if program.retrieval:
            gold = [hop.paragraph_id] if hop.paragraph_id else []
            inputs = {"passages": [p.render() for p in gold_documents(example, program.k, context, gold, f"hop{i}")],
                      **inputs}
        rows.append((inputs, {"intermediate_answer": hop.answer}))
    return rows


Method(
    SelfAsk,
    kind="baseline",
    paper=Paper("Measuring and Narrowing the Compositionality Gap in Language Models", "Ofir Press, Muru Zhang, "
                "Sewon Min, Ludwig Schmidt, Noah A. Smith, Mike Lewis", 2023, "Findings of EMNLP"),
    loop_budget="max_follow_ups",
    compare=False,
)
