"""CoopRAG's stage targets from the data's annotations (issue 18): the unrolling, chain completion and reasoning.

The gold chain comes from 2Wiki's evidence triples as they are, or from MuSiQue's decomposition, one triple per hop
(our reading; MuSiQue writes hops as questions): a hop ``"E >> relation"`` is ``[E, relation, answer]``; a question
hop that refers to an earlier answer ``#n`` is ``[answer n, the question without #n and "?", answer]``; any other
question hop is ``[the question, "answer", answer]``. Earlier answers replace ``#n`` everywhere. A chain whose last
tail is not the question's answer (2Wiki comparisons) ends with ``[the question, "answer", answer]``.

The unrolling's target masks the chain as §3.2 asks of an LM that cannot know the facts: the last tail is ``<FILL>``
and every other tail — an intermediate answer, which the 135M student cannot know — is ``<UNCERTAIN>`` wherever it
appears (our reading; the paper masks what the LM is unsure of, and a gold target cannot know that). Without the mask
(``uncertainty_mask=False``) only ``<FILL>`` is written. Sub-questions are the hops with the earlier answers
substituted, as the prompt asks for self-contained sub-questions with spelled-out names (``"E >> relation"`` becomes
"What is the relation of E?"); the hop count is their number and the reasoning structure names each step without its
answer. Completion gets the masked chain and the question's gold paragraphs among its distractors and returns the
gold chain; reasoning gets the gold chain and returns the answer. HotpotQA carries no decomposition: its questions give
no CoopRAG row.
"""

from __future__ import annotations

import dspy

from multihop.signatures.cooprag import FILL, UNCERTAIN

from ..gold import (
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


def gold_hops(example: dspy.Example) -> tuple[list[str], list[list[str]], list[str]]:
    """(sub-questions, gold chain, steps of the reasoning structure) of an annotated example; empty without
    annotations."""
    evidences = example.get("evidences") or []
    if evidences:
        chain = [list(triple) for triple in evidences]
        sub_questions = list(example.get("decomposition") or [])
        found = {tail: i for i, (_, _, tail) in reversed(list(enumerate(chain, start=1)))}  # earliest step first
        steps = [f"find the {relation} of " + (f"the answer of step {found[head]}" if found.get(head, i) < i else head)
                 for i, (head, relation, _) in enumerate(chain, start=1)]
        return sub_questions, _ending(example, chain), steps
    questions, answers = example.get("decomposition") or [], example.get("decomposition_answers") or []
    if not questions or len(answers) != len(questions) or not all(answers):
        return [], [], []
    sub_questions, chain, steps = [], [], []
    for i, (question, answer) in enumerate(zip(questions, answers, strict=True)):
        earlier = answers[:i]
        refs = [int(n) for n in PLACEHOLDER.findall(question)]
        if ">>" in question:
            entity, relation = (part.strip() for part in question.split(">>", 1))
            chain.append([substitute(entity, earlier), relation, answer])
            sub_questions.append(substitute(hop_question(question), earlier))
            steps.append(f"find the {relation} of {_named(entity)}")
            continue
        text = substitute(question, earlier).rstrip(" ?")
        if refs and 0 < refs[0] <= len(earlier):
            chain.append([earlier[refs[0] - 1], " ".join(PLACEHOLDER.sub(" ", question).replace("?", " ").split()),
                          answer])
        else:
            chain.append([text, "answer", answer])
        sub_questions.append(f"{text}?")
        steps.append(f"answer: {_named(question).rstrip(' ?')}")
    return sub_questions, _ending(example, chain), steps


def _named(text: str) -> str:
    """``#n`` written as the step it refers to, so a structure names no answer."""
    return " ".join(PLACEHOLDER.sub(lambda m: f"the answer of step {m.group(1)}", text).split())


def _ending(example: dspy.Example, chain: list[list[str]]) -> list[list[str]]:
    """The chain ending in the question's answer: a final ``[question, "answer", answer]`` when its last tail is not."""
    if chain and chain[-1][2].strip().lower() != str(example.answer).strip().lower():
        chain = [*chain, [example.question.rstrip(" ?"), "answer", example.answer]]
    return chain


def masked(chain: list[list[str]], mask: bool = True) -> list[list[str]]:
    """The unrolling's target: the last tail ``<FILL>``; with ``mask`` every other tail ``<UNCERTAIN>`` wherever it
    appears."""
    hidden = {tail for _, _, tail in chain[:-1]} if mask else set()
    rows = [[head if head not in hidden else UNCERTAIN, relation, tail if tail not in hidden else UNCERTAIN]
            for head, relation, tail in chain]
    rows[-1][2] = FILL
    return rows


def _unrolled(program: CoopRAG, example: dspy.Example) -> tuple[list[str], list[list[str]], list[list[str]], str]:
    sub_questions, chain, steps = gold_hops(example)
    if not chain:
        return [], [], [], ""
    structure = f"{len(sub_questions) or len(chain)} steps: " + "; then ".join(steps)
    return sub_questions, chain, masked(chain, program.uncertainty_mask), structure


@register_gold_builder("CoopRAG", "unroll")
def _unroll_target(program: CoopRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    sub_questions, chain, masked_chain, structure = _unrolled(program, example)
    if not chain:
        return []
    return [({"question": example.question}, {"hop_count": len(sub_questions) or len(chain),
                                              "reasoning_structure": structure, "sub_questions": sub_questions,
                                              "reasoning_chain": masked_chain})]


def _reading_inputs(program: CoopRAG, example: dspy.Example, context: GoldContext):
    sub_questions, chain, masked_chain, _ = _unrolled(program, example)
    documents = [p.render() for p in gold_documents(example, GoldContext(k=program.k, seed=context.seed))]
    return {"documents": documents, "question": example.question, "sub_questions": sub_questions}, chain, masked_chain


@register_gold_builder("CoopRAG", "complete")
def _completion_target(program: CoopRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    inputs, chain, masked_chain = _reading_inputs(program, example, context)
    return [({**inputs, "reasoning_chain": masked_chain}, {"completed_chain": chain})] if chain else []


@register_gold_builder("CoopRAG", "reason")
def _reasoning_target(program: CoopRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    inputs, chain, masked_chain = _reading_inputs(program, example, context)
    shown = chain if program.uncertainty_mask else masked_chain  # without the mask nothing completes the chain
    return [({**inputs, "reasoning_chain": shown}, {"answer": example.answer})] if chain else []


@register_gold_builder("CoopRAG", "complete_and_reason")
def _unified_target(program: CoopRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    inputs, chain, masked_chain = _reading_inputs(program, example, context)
    if not chain:
        return []
    return [({**inputs, "reasoning_chain": masked_chain}, {"completed_chain": chain, "answer": example.answer})]


register_no_gold("CoopRAG", "key_extract", "not built yet: the supporting sentences HotpotQA and 2Wiki annotate could "
                 "supervise App. H.4's key sentence")
