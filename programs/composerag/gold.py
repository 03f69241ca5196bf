"""ComposeRAG's stage targets from the data's annotations: decomposition, construction, answer generation
with citations, verification and final answering, from MuSiQue's decompositions (each hop's question with ``#n``
placeholders, its answer and its supporting paragraph).

One gold solving record per question drives every builder, so each stage sees what the program would have passed it had
the earlier stages been right: the decomposition is MuSiQue's, its ``"E >> relation"`` hops written as questions
(:func:`~multihop.programs.gold_builders.hop_question`); hop ``n`` is answered from its supporting paragraph among the
question's unsupporting ones (``k`` of the program's, drawn per hop), its reasoning quotes the paragraph's sentence that
states the answer, and its answer cites the paragraph by its number; construction rewrites each later hop from the
earlier ones (:func:`~.composition.qa_pairs`); final answering reads :func:`~.composition.decomposed_information`. The
simple pipeline's row answers the whole question from all the gold paragraphs and cites the last hop's. Verification is
true on the gold (cited) answer and false on a mismatched one: another hop's answer, with the cited passage unchanged.
The reasoning texts are templates (ours): the annotations hold no reasoning.

No annotation supervises the retrieval decision (every annotated hop was answered from a paragraph, so every row would
say "retrieve"), query rewriting (no failed query is annotated), passage reranking (one supporting paragraph per hop,
no order of the rest) or self-reflection (no failed decomposition is annotated): they are left to teacher
trajectories. HotpotQA and 2Wiki carry no per-hop answers and supports: their questions give no ComposeRAG row.
"""

from __future__ import annotations

from dataclasses import dataclass

import dspy

from multihop.data.corpus import Passage

from ..gold_builders import (
    GoldContext,
    Pairs,
    evidence_sentence,
    gold_documents,
    hop_question,
    register_gold_builder,
    register_no_gold,
    substitute,
)
from ..text import numbered, unique
from .composition import background, decomposed_information, qa_pairs
from .program import ComposeRAG
from .state import Hop


@dataclass(frozen=True)
class GoldSolving:
    """A question solved as the annotations say: its decomposition (``#n`` kept), one answered hop per step and the
    sentence of each hop's cited paragraph that states its answer."""

    sub_questions: list[str]
    hops: list[Hop]
    quotes: list[str]


def gold_solving(example: dspy.Example, k: int, context: GoldContext) -> GoldSolving | None:
    """The gold solving record of a MuSiQue example, or None when it lacks a hop's answer or supporting paragraph."""
    steps = example.get("decomposition") or []
    answers = example.get("decomposition_answers") or []
    supports = example.get("decomposition_support") or []
    paragraphs = {p.get("id"): p for p in example.get("paragraphs") or []}
    if not steps or len(answers) != len(steps) or len(supports) != len(steps) or not all(answers) \
            or not all(support in paragraphs for support in supports):
        return None
    sub_questions = [hop_question(step) for step in steps]
    hops, quotes = [], []
    for i, (sub_question, answer, support) in enumerate(zip(sub_questions, answers, supports, strict=True)):
        passages = gold_documents(example, k, context, gold_ids=[support], salt=f"hop {i}")
        number = [p.id for p in passages].index(support) + 1
        hops.append(_hop(substitute(sub_question, answers[:i]), passages, [(number, answer)], answer))
        quotes.append(evidence_sentence(passages[number - 1].text, answer))
    return GoldSolving(sub_questions, hops, quotes)


def _hop(question: str, passages: list[Passage], stated: list[tuple[int, str]], answer: str) -> Hop:
    """A hop answered from passages: each ``(number, fact)`` of ``stated`` (1-based) quoted in the reasoning by the
    sentence that states the fact; the answer cites the passage of the last fact."""
    numbers = list(dict.fromkeys(n for n, _ in stated))
    cited = [passages[n - 1] for n in numbers]
    quotes = " ".join(f'[{n}] says: "{evidence_sentence(passages[n - 1].text, fact)}"' for n, fact in stated)
    return Hop(question=question, passages=[p.render() for p in passages], passage_ids=[p.id for p in passages],
               reasoning=f"{quotes} So the answer is {answer}.", answer=f"{answer} [{stated[-1][0]}]",
               abstained=False, cited=[p.render() for p in cited], cited_ids=[p.id for p in cited],
               cited_numbers=numbers)


def _mismatched(hops: list[Hop], i: int) -> str | None:
    """The answer of another hop that neither contains hop ``i``'s answer nor is contained in it (so it is wrong for
    hop ``i``), or None."""
    own = _bare(hops[i]).lower()
    return next((_bare(hop) for hop in hops if own not in _bare(hop).lower() and _bare(hop).lower() not in own), None)


def _bare(hop: Hop) -> str:
    return hop.answer.rsplit(" [", 1)[0]


@register_gold_builder("ComposeRAG", "decompose")
def _decomposition_target(program: ComposeRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    solving = gold_solving(example, program.k, context)
    if solving is None:
        return []
    n = len(solving.sub_questions)
    reasoning = (f"The question cannot be answered from one fact: it needs {n} facts found in sequence, each later "
                 "sub-question using an earlier answer (#n) until the last one answers the question.")
    return [({"question": example.question}, {"reasoning": reasoning, "sub_questions": solving.sub_questions})]


@register_gold_builder("ComposeRAG", "construct")
def _construction_target(program: ComposeRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    """One row per hop after the first (the program constructs once earlier hops are answered)."""
    solving = gold_solving(example, program.k, context)
    if solving is None:
        return []
    return [({"original_question": example.question, "question_answer_pairs": qa_pairs(solving.hops[:i]),
              "new_question": solving.sub_questions[i]}, {"rewritten_question": solving.hops[i].question})
            for i in range(1, len(solving.hops))]


@register_gold_builder("ComposeRAG", "answer")
def _answer_target(program: ComposeRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    """Every hop with its background, and, when the simple pipeline runs first, the whole question from all the gold
    paragraphs (no background)."""
    solving = gold_solving(example, program.k, context)
    if solving is None:
        return []
    rows = [({"question": hop.question, "context": numbered(hop.passages),
              "background": background(example.question, solving.hops[:i])},
             {"reasoning": hop.reasoning, "answer": hop.answer}) for i, hop in enumerate(solving.hops)
            ] if program.decomposition else []
    if program.simple_qa or not program.decomposition:  # the question answered whole, with no background
        supports = list(example.decomposition_support)
        passages = gold_documents(example, program.k, context, gold_ids=supports)
        ids = [p.id for p in passages]
        stated = [(ids.index(support) + 1, answer)
                  for support, answer in zip(supports, example.decomposition_answers, strict=True)]
        whole = _hop(example.question, passages, stated, example.answer)
        rows.append(({"question": example.question, "context": numbered(whole.passages), "background": "none"},
                     {"reasoning": whole.reasoning, "answer": whole.answer}))
    return rows


@register_gold_builder("ComposeRAG", "verify")
def _verification_target(program: ComposeRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    """Per hop: true on its cited answer, false on another hop's answer against the same cited passage."""
    solving = gold_solving(example, program.k, context)
    if solving is None:
        return []
    rows = []
    for i, (hop, quote) in enumerate(zip(solving.hops, solving.quotes, strict=True)):
        source, number = numbered(hop.cited, hop.cited_numbers), hop.cited_numbers[-1]
        rows.append(({"question": hop.question, "answer": hop.answer, "source": source},
                     {"reason": f'The answer is specific and [{number}] states it: "{quote}"', "valid": True}))
        wrong = _mismatched(solving.hops, i)
        if wrong is not None:
            rows.append(({"question": hop.question, "answer": f"{wrong} [{number}]", "source": source},
                         {"reason": f"[{number}] does not support {wrong}: it gives {_bare(hop)}.", "valid": False}))
    return rows


@register_gold_builder("ComposeRAG", "finalize")
def _final_answer_target(program: ComposeRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    solving = gold_solving(example, program.k, context)
    if solving is None:
        return []
    steps = "; ".join(f"sub-question {i} gives {_bare(hop)}" for i, hop in enumerate(solving.hops, 1))
    return [({"question": example.question, "decomposed_information": decomposed_information(solving.hops)},
             {"reasoning": f"{steps}. The last one answers the question: {example.answer}.",
              "answer": example.answer})]


@register_gold_builder("ComposeRAG", "verify_final")
def _final_verification_target(program: ComposeRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    """True on the gold answer against the passages the hops cited; false on an intermediate hop's answer."""
    solving = gold_solving(example, program.k, context)
    if solving is None:
        return []
    passages = unique(p for hop in solving.hops for p in hop.cited)
    inputs = {"question": example.question, "passages": passages}
    rows = [({**inputs, "answer": example.answer},
             {"reason": f"The passages support each step, and the last gives {example.answer}.", "valid": True})]
    wrong = next((_bare(hop) for hop in solving.hops[:-1] if _bare(hop).lower() != example.answer.lower()), None)
    if wrong is not None:
        rows.append(({**inputs, "answer": wrong},
                     {"reason": f"{wrong} answers an intermediate step, not the question: the passages lead on to "
                      f"{example.answer}.", "valid": False}))
    return rows


for _stage, _why in {
    "decide": "every annotated hop was answered from a paragraph: each row would say retrieve",
    "rewrite": "no failed query is annotated",
    "rank_passages": "a hop has one annotated supporting paragraph, not an order of the rest",
    "improve_analysis": "no failed decomposition is annotated",
    "improve_decomposition": "no failed decomposition is annotated",
}.items():
    register_no_gold("ComposeRAG", _stage, _why)
