"""GenGround's gold stage targets from the annotated hops (MuSiQue's decomposition, 2Wiki's evidences):

- ``deduce``: each hop, with the hops before it answered (their evidence sentences as the evidence cited) → the hop's
  question, and once every hop is answered → finished, the gold answer;
- ``answer``: as the "w/o grounding" reader, each hop's question with its paragraph among the question's distractors
  (``k`` in all) → the hop's answer (without deduction, the question with its supporting paragraphs → the gold
  answer). The immediate answer of the full method comes from the LLM's own knowledge: it has no evidence to learn
  from, and training it on the train answers would only memorise them, so it gets no rows.

- ``cite`` (the authors' batch grounding, ``batch_revision="filtered"``, the default): each hop's question with a
  batch of ``batch_size`` documents holding its paragraph among the question's distractors → its evidence sentence
  cited; and with a batch of distractors only → "Empty".

``ground`` has none: the candidate answer it revises is the LLM's own immediate answer, which no annotation holds; the
paper distils the grounding from a teacher's revisions (§4), which ``multihop trajectories`` collects.
"""

from __future__ import annotations

import dspy

from multihop.signatures.genground import EMPTY

from ...gold_builders import GoldContext, Pairs, annotated_hops, gold_documents, register_gold_builder, register_no_gold
from .program import GenGround, Round, render_round


@register_gold_builder("GenGround", "deduce")
def _deduction_targets(program: GenGround, example: dspy.Example, context: GoldContext) -> Pairs:
    hops = annotated_hops(example)
    if not hops or not example.get("answer"):
        return []
    done = [render_round(i, Round(hop.query, hop.answer, hop.answer, hop.knowledge)) for i, hop in enumerate(hops, 1)]
    rows = [({"question": example.question, "steps": done[:i]},
             {"finished": False, "sub_question": hop.query, "final_answer": ""}) for i, hop in enumerate(hops)]
    return rows + [({"question": example.question, "steps": done},
                    {"finished": True, "sub_question": "", "final_answer": example.answer})]


@register_gold_builder("GenGround", "answer")
def _reader_targets(program: GenGround, example: dspy.Example, context: GoldContext) -> Pairs:
    if program.grounding or not example.get("answer"):
        return []
    if not program.deduction:
        if not example.get("gold_passage_ids"):
            return []
        documents = [p.render() for p in gold_documents(example, program.k, context)]
        return [({"sub_question": example.question, "documents": documents}, {"answer": example.answer})]
    rows = []
    for i, hop in enumerate(annotated_hops(example)):
        gold = [hop.paragraph_id] if hop.paragraph_id else []
        documents = [p.render() for p in gold_documents(example, program.k, context, gold, f"hop {i}")]
        rows.append(({"sub_question": hop.query, "documents": documents}, {"answer": hop.answer}))
    return rows


@register_gold_builder("GenGround", "cite")
def _citation_targets(program: GenGround, example: dspy.Example, context: GoldContext) -> Pairs:
    rows = []
    for i, hop in enumerate(annotated_hops(example)):
        if not hop.paragraph_id:
            continue
        cited = [p.render() for p in gold_documents(example, program.batch_size, context, [hop.paragraph_id],
                                                    f"hop {i}")]
        rows.append(({"sub_question": hop.query, "documents": cited},
                     {"evidence": hop.knowledge}))
        noise = [p.render() for p in gold_documents(example, program.batch_size, context, [], f"hop {i} empty")]
        if noise:
            rows.append(({"sub_question": hop.query, "documents": noise}, {"evidence": EMPTY}))
    return rows


register_no_gold("GenGround", "ground", "its candidate answer is the LLM's own immediate answer, which no annotation "
                 "holds; the paper distils grounding from a teacher's revisions (§4)")
