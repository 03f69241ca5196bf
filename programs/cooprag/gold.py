"""CoopRAG's stage targets from the data's annotations: the unrolling, chain completion and reasoning.

The gold chain comes from 2Wiki's evidence triples as they are, or from MuSiQue's decomposition, one triple per hop
(our reading; MuSiQue writes hops as questions): a hop ``"E >> relation"`` is ``[E, relation, answer]``; a question
hop about one earlier answer ``#n`` is ``[answer n, the question without #n and "?", answer]``; any other question
hop is ``[the question, "answer", answer]``. Earlier answers replace ``#n`` everywhere. A chain whose last tail is
none of the question's answers (2Wiki comparisons) ends with ``[the question, "answer", answer]``.

The unrolling's target masks the chain as §3.2 asks of an LM that cannot know the facts: the last tail is ``<FILL>`` and
every intermediate answer — which the 135M student cannot know — is ``<UNCERTAIN>`` wherever it appears, inside a head
too ("<UNCERTAIN> at the 1920 Summer Olympics"; our reading: the paper masks what the LM is unsure of, and a gold target
cannot know that). Without the mask (``uncertainty_mask=False``) only ``<FILL>`` is written. Sub-questions are the hops
with the earlier answers substituted, as the prompt's self-contained sub-questions with spelled-out
names suggest (``"E >> relation"`` becomes "What is the relation of E?"); 2Wiki's are its own, or, in files without them
(the dev file), "What is the relation of E?" of each evidence triple, whose head already names the earlier answer. The
hop count is the number of triples and the reasoning structure names each step without its answer. Completion gets the
masked chain and the question's gold paragraphs among its distractors and returns the gold chain; reasoning gets the
completed chain (the unrolled one without completion, none without unrolling) and returns the answer. HotpotQA carries
no decomposition: its questions give CoopRAG rows only for reasoning without unrolling.
"""

from __future__ import annotations

from dataclasses import dataclass

import dspy

from multihop.signatures.cooprag import FILL, UNCERTAIN

from ..gold_builders import (
    PLACEHOLDER,
    GoldContext,
    Pairs,
    gold_documents,
    hop_question,
    register_gold_builder,
    register_no_gold,
    substitute,
)
from .program import CoopRAG


@dataclass(frozen=True)
class GoldHops:
    """A question's gold unrolling: sub-questions, the chain, the chain as the unrolling writes it (``hidden``: every
    intermediate answer ``<UNCERTAIN>`` wherever it appears, heads included, and the last tail ``<FILL>``) and one
    step of the reasoning structure per triple, naming no answer."""

    sub_questions: list[str]
    chain: list[list[str]]
    hidden: list[list[str]]
    steps: list[str]


def gold_hops(example: dspy.Example) -> GoldHops | None:
    """The gold unrolling of an annotated example (2Wiki evidences, else MuSiQue hops), or None without
    annotations."""
    evidences = example.get("evidences") or []
    if evidences:
        chain = [list(triple) for triple in evidences]
        found = {tail: i for i, (_, _, tail) in reversed(list(enumerate(chain, start=1)))}  # earliest step first
        earlier = [found.get(head, i) < i for i, (head, _, _) in enumerate(chain, start=1)]
        hidden = [[UNCERTAIN if bridge else head, relation, UNCERTAIN]
                  for bridge, (head, relation, _) in zip(earlier, chain, strict=True)]
        steps = [f"find the {relation} of " + (f"the answer of step {found[head]}" if bridge else head)
                 for bridge, (head, relation, _) in zip(earlier, chain, strict=True)]
        own = list(example.get("decomposition") or [])
        sub_questions = own if len(own) == len(chain) else [f"What is the {relation} of {head}?"
                                                            for head, relation, _ in chain]
        return _ending(example, GoldHops(sub_questions, chain, hidden, steps))
    questions, answers = example.get("decomposition") or [], example.get("decomposition_answers") or []
    if not questions or len(answers) != len(questions) or not all(answers):
        return None
    hops = GoldHops([], [], [], [])
    for i, (question, answer) in enumerate(zip(questions, answers, strict=True)):
        earlier, unknown = answers[:i], [UNCERTAIN] * i
        refs = set(PLACEHOLDER.findall(question))
        if ">>" in question:
            entity, relation = (part.strip() for part in question.split(">>", 1))
            triple = [[substitute(entity, earlier), relation], [substitute(entity, unknown), relation]]
            hops.steps.append(f"find the {relation} of {_named(entity)}")
        elif len(refs) == 1 and 0 < int(next(iter(refs))) <= i:  # a question about one earlier answer
            n = int(next(iter(refs)))
            relation = " ".join(PLACEHOLDER.sub(" ", question).replace("?", " ").split())
            triple = [[earlier[n - 1], relation], [UNCERTAIN, relation]]
            hops.steps.append(f"answer: {_named(question).rstrip(' ?')}")
        else:  # a question of its own, or about several earlier answers
            triple = [[substitute(question, earlier).rstrip(" ?"), "answer"],
                      [substitute(question, unknown).rstrip(" ?"), "answer"]]
            hops.steps.append(f"answer: {_named(question).rstrip(' ?')}")
        hops.chain.append([*triple[0], answer])
        hops.hidden.append([*triple[1], UNCERTAIN])
        hops.sub_questions.append(substitute(hop_question(question), earlier))
    return _ending(example, hops)


def _named(text: str) -> str:
    """``#n`` written as the step it refers to, so a structure names no answer."""
    return " ".join(PLACEHOLDER.sub(lambda m: f"the answer of step {m.group(1)}", text).split())


def _ending(example: dspy.Example, hops: GoldHops) -> GoldHops:
    """The unrolling ending in the question's answer: a final ``[question, "answer", answer]`` step when the last tail
    is none of its answers (a 2Wiki comparison); the last tail is then ``<FILL>``."""
    chain, hidden, steps = hops.chain, hops.hidden, hops.steps
    answers = {str(a).strip().lower() for a in example.get("answers") or [example.answer]}
    if chain[-1][2].strip().lower() not in answers:
        question = example.question.rstrip(" ?")
        chain, hidden = [*chain, [question, "answer", example.answer]], [*hidden, [question, "answer", UNCERTAIN]]
        steps = [*steps, "answer the question from them"]
    hidden = [*hidden[:-1], [*hidden[-1][:2], FILL]]
    return GoldHops(hops.sub_questions, chain, hidden, steps)


def unrolling_target(program: CoopRAG, hops: GoldHops) -> list[list[str]]:
    """The chain the unrolling writes: ``hidden`` with the mask; without it (§4.6) the gold chain, last tail
    ``<FILL>``."""
    return hops.hidden if program.uncertainty_mask else [*hops.chain[:-1], [*hops.chain[-1][:2], FILL]]


@register_gold_builder("CoopRAG", "unroll")
def _unroll_target(program: CoopRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    hops = gold_hops(example)
    if hops is None:
        return []
    structure = f"{len(hops.chain)} steps: " + "; then ".join(hops.steps)
    return [({"question": example.question}, {"hop_count": len(hops.chain), "reasoning_structure": structure,
                                              "sub_questions": hops.sub_questions,
                                              "reasoning_chain": unrolling_target(program, hops)})]


def _reading_inputs(program: CoopRAG, example: dspy.Example, context: GoldContext) -> tuple[dict, GoldHops | None]:
    """What the reading stages get besides the chain (the documents, the question, the unrolled sub-questions; none
    without unrolling), and the gold unrolling."""
    hops = gold_hops(example)
    documents = [p.render() for p in gold_documents(example, program.k, context)]
    sub_questions = hops.sub_questions if hops is not None and program.unrolling else []
    return {"documents": documents, "question": example.question, "sub_questions": sub_questions}, hops


@register_gold_builder("CoopRAG", "complete")
def _completion_target(program: CoopRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    inputs, hops = _reading_inputs(program, example, context)
    if hops is None:
        return []
    return [({**inputs, "reasoning_chain": unrolling_target(program, hops)}, {"completed_chain": hops.chain})]


@register_gold_builder("CoopRAG", "reason")
def _reasoning_target(program: CoopRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    """The completed chain → the answer; without the mask nothing completes the unrolled chain, and without
    unrolling there is no chain (the question and documents alone: HotpotQA questions give rows too)."""
    inputs, hops = _reading_inputs(program, example, context)
    if not program.unrolling:
        return [({**inputs, "reasoning_chain": []}, {"answer": example.answer})] if example.get("answer") else []
    if hops is None:
        return []
    chain = hops.chain if hasattr(program, "complete") else unrolling_target(program, hops)
    return [({**inputs, "reasoning_chain": chain}, {"answer": example.answer})]


@register_gold_builder("CoopRAG", "complete_and_reason")
def _unified_target(program: CoopRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    inputs, hops = _reading_inputs(program, example, context)
    if hops is None:
        return []
    return [({**inputs, "reasoning_chain": unrolling_target(program, hops)},
             {"completed_chain": hops.chain, "answer": example.answer})]


register_no_gold("CoopRAG", "key_extract", "not built yet: the supporting sentences HotpotQA and 2Wiki annotate could "
                 "supervise App. H.4's key sentence")
