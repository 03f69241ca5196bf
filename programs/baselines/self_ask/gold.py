"""Self-Ask's gold stage targets from the annotated hops (MuSiQue's decomposition, 2Wiki's evidences):
``follow_up`` (one decision a hop, then the answer), ``conclude`` (every hop asked and answered → the answer),
``intermediate`` (a hop's answer, from its paragraph among the distractors or closed-book) and ``own_answer`` (a hop's
answer closed-book, what the LM writes when a follow-up's retrieval returns nothing; after the hops before it, asked and
answered, as the scaffold shows them)."""

from __future__ import annotations

import dspy

from ...gold_builders import GoldContext, Pairs, annotated_hops, gold_documents, register_gold_builder
from .program import SelfAsk, follow_up_line


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
    """A hop's answer: from its paragraph among the question's distractors (``k`` in all), or closed-book (reading
    what the LM's own answer reads: :func:`_own_inputs`)."""
    if not program.retrieval:
        return _own_answers(program, example, context)
    rows = []
    for i, hop in enumerate(annotated_hops(example)):
        gold = [hop.paragraph_id] if hop.paragraph_id else []
        passages = [p.render() for p in gold_documents(example, program.k, context, gold, f"hop{i}")]
        rows.append(({"passages": passages, "follow_up": hop.query}, {"intermediate_answer": hop.answer}))
    return rows


@register_gold_builder("SelfAsk", "own_answer")
def _own_answers(program: SelfAsk, example: dspy.Example, context: GoldContext) -> Pairs:
    """A hop's answer from the LM's knowledge: its question (after the question and the hops before it, asked and
    answered, with ``own_answer_context="chain"``) → its answer."""
    hops = annotated_hops(example)
    lines = [follow_up_line(hop.query, hop.answer) for hop in hops]
    chain = program.own_answer_context == "chain"
    return [({"question": example.question, "follow_ups": lines[:i], "follow_up": hop.query} if chain else
             {"follow_up": hop.query}, {"intermediate_answer": hop.answer}) for i, hop in enumerate(hops)]
