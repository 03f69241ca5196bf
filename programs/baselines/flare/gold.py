"""FLARE's gold stage targets from the annotated hops (MuSiQue's decomposition, 2Wiki's evidences; HotpotQA has none).

``generate``: one row a hop — the documents (the hop's supporting paragraph among the question's distractors, ``k`` in
all: what a retrieval for that sentence should give), the question, the sentences of the earlier hops (each hop's
evidence sentence, the paragraph's sentence that states its answer) → the hop's evidence sentence — and a last row,
on the last hop's documents, → "So the answer is <answer>.". ``answer`` (the reader): the last hop's documents and the
evidence sentences → the gold answer."""

from __future__ import annotations

import dspy

from multihop.signatures.flare import ANSWER_PHRASE

from ...gold_builders import GoldContext, GoldHop, Pairs, annotated_hops, gold_documents, register_gold_builder
from .program import FLARE


def hop_documents(program: FLARE, example: dspy.Example, context: GoldContext, hops: list[GoldHop], i: int
                  ) -> list[str]:
    """The documents of hop ``i``: its supporting paragraph among the question's distractors, ``k`` in all."""
    ids = [hops[i].paragraph_id] if hops[i].paragraph_id else []
    return [p.render() for p in gold_documents(example, program.k, context, gold_ids=ids, salt=str(i))]


@register_gold_builder("FLARE", "generate")
def sentences(program: FLARE, example: dspy.Example, context: GoldContext) -> Pairs:
    hops = annotated_hops(example)
    if not hops or not example.get("answer"):
        return []
    chain = [hop.knowledge for hop in hops] + [f"{ANSWER_PHRASE} {example.answer}."]
    return [({"passages": hop_documents(program, example, context, hops, min(i, len(hops) - 1)),
              "question": example.question, "answer_so_far": " ".join(chain[:i])}, {"sentence": sentence})
            for i, sentence in enumerate(chain)]


@register_gold_builder("FLARE", "answer")
def reader_target(program: FLARE, example: dspy.Example, context: GoldContext) -> Pairs:
    hops = annotated_hops(example)
    if not hops or not example.get("answer"):
        return []
    return [({"passages": hop_documents(program, example, context, hops, len(hops) - 1), "question": example.question,
              "reasoning": " ".join(hop.knowledge for hop in hops)}, {"answer": example.answer})]
