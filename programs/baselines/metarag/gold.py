"""MetaRAG's gold stage targets from the datasets' annotations (ours: the paper trains nothing; its expert is a QA
model fine-tuned on HotpotQA, and its NLI model is trained elsewhere).

- ``answer`` (the cognition): the supporting paragraphs among the question's distractors (``k`` in all) → the gold
  answer, its reasoning the hops' evidence sentences (the supporting sentences without annotated hops);
- ``expert`` (the monitor's expert): the same documents → the gold answer, the rows a fine-tuned expert learns from;
- ``external`` (is the knowledge sufficient): the documents with every supporting paragraph → sufficient, and with
  one of them left out (drawn with the question's seed) → insufficient;
- ``query`` (insufficient knowledge): each hop after the first, with the paragraphs of the hops before it only → the
  hop's question (what is still missing), the answer input being the last answer those paragraphs give (ours: the
  answer a reader stops at);
- ``support`` (does the reasoning entail the answer): the hops' evidence sentences as the premise and the gold
  answer as the hypothesis → entailed, and the same without the last hop's sentence (the one that reaches the answer)
  → not entailed.

With ``parsing="authors"`` the ``external`` and ``query`` rows are the free-text replies the authors' prompts ask for:
"yes" or "no", and "The rewrite query is <the hop's question>".
"""

from __future__ import annotations

import dspy

from ...gold_builders import GoldContext, Pairs, annotated_hops, gold_documents, register_gold_builder, register_no_gold
from .parsing import REWRITE_PHRASE
from .program import MetaRAG


def rendered(example: dspy.Example, k: int, context: GoldContext, gold_ids: list[str] | None = None,
             salt: str = "") -> list[str]:
    return [p.render() for p in gold_documents(example, k, context, gold_ids, salt)]


@register_gold_builder("MetaRAG", "answer")
def _answer_target(program: MetaRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    if not example.get("answer") or not example.get("gold_passage_ids"):
        return []
    hops = annotated_hops(example)
    reasoning = " ".join(hop.knowledge for hop in hops) or " ".join(example.get("supporting_sentences") or [])
    return [({"documents": rendered(example, program.k, context), "question": example.question, "suggestions": []},
             {"reasoning": reasoning, "answer": example.answer})]


@register_gold_builder("MetaRAG", "expert")
def _expert_target(program: MetaRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    if not example.get("answer") or not example.get("gold_passage_ids"):
        return []
    return [({"documents": rendered(example, program.k, context), "question": example.question},
             {"answer": example.answer})]


@register_gold_builder("MetaRAG", "external")
def _sufficiency_targets(program: MetaRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    gold = list(example.get("gold_passage_ids") or [])
    if len(gold) < 2:
        return []
    missing = context.rng(example).choice(gold)
    partial = rendered(example, program.k, context, [pid for pid in gold if pid != missing], "insufficient")
    typed = program.parsing == "typed"
    return [({"documents": rendered(example, program.k, context), "question": example.question},
             {"sufficient": True} if typed else {"reply": "yes"}),
            ({"documents": partial, "question": example.question}, {"sufficient": False} if typed else {"reply": "no"})]


@register_gold_builder("MetaRAG", "query")
def _query_targets(program: MetaRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    hops = annotated_hops(example)
    rows = []
    for j in range(1, len(hops)):
        known = [hop.paragraph_id for hop in hops[:j] if hop.paragraph_id]
        rows.append(({"question": example.question, "documents": rendered(example, program.k, context, known,
                                                                          f"hop {j}"),
                      "answer": hops[j - 1].answer},
                     {"query": hops[j].query} if program.parsing == "typed" else
                     {"reply": f"{REWRITE_PHRASE} {hops[j].query}"}))
    return rows


@register_gold_builder("MetaRAG", "support")
def _support_targets(program: MetaRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    knowledge = [hop.knowledge for hop in annotated_hops(example) if hop.knowledge]
    if not example.get("answer") or len(knowledge) < 2:
        return []
    return [({"premise": " ".join(knowledge), "hypothesis": example.answer}, {"entailed": True}),
            ({"premise": " ".join(knowledge[:-1]), "hypothesis": example.answer}, {"entailed": False})]


register_no_gold("MetaRAG", "internal", "whether the LLM's own knowledge answers a question is a fact about the LLM, "
                 "which no annotation records")
register_no_gold("MetaRAG", "critic", "no annotation labels the errors of an answer: they are the LLM's own")
