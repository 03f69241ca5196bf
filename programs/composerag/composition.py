"""Text plumbing between ComposeRAG's modules (Wu et al., 2025, App. A.1, D): the listwise ``[x] > [y]`` ranking and its
repair, ``#n`` placeholders, and the records the construction, final-answering and self-reflection prompts read. Pure
functions, no LM; the numbered contexts, ``[n]`` citations and abstentions every method reads are in
:mod:`multihop.programs.text`."""

from __future__ import annotations

import re
from collections.abc import Sequence

from multihop.signatures.composerag import ABSTENTION

from ..text import citation_marks, citations, is_abstention, strip_citations
from .state import Hop

_PLACEHOLDER = re.compile(r"#(\d+)")


def identifiers(count: int) -> str:
    return ", ".join(f"[{i}]" for i in range(1, count + 1))


def parse_ranking(text: str, count: int) -> tuple[list[int], bool]:
    """0-based passage order from a listwise ranking ``[x] > [y] > …`` over ``count`` passages, and whether it needed
    repair: repeated identifiers keep their first place, unknown ones are dropped, and the ones it skipped follow in
    retriever order."""
    ranked = citations(text, count)
    repaired = citation_marks(text) != len(ranked) or len(ranked) < min(count, 10)
    return ranked + [i for i in range(count) if i not in ranked], repaired


def capped(sub_questions: list[str], cap: int) -> tuple[list[str], bool]:
    """At most ``cap`` sub-questions, the last always kept (a decomposition's last step is the one that answers the
    question, such as a final comparison), and whether any was cut."""
    if len(sub_questions) <= cap:
        return sub_questions, False
    return [*sub_questions[: cap - 1], sub_questions[-1]], True


def placeholders(question: str) -> list[int]:
    return [int(n) for n in _PLACEHOLDER.findall(question or "")]


def substitute(question: str, answers: Sequence[str | None]) -> str:
    """Replace each ``#n`` that has an answer with it (the answers already stripped of citations); a reference to no
    answer, or to None (an abstention: "I don't know" is never inserted), is left as it is."""
    def answer(match: re.Match) -> str:
        n = int(match.group(1))
        return answers[n - 1] if 1 <= n <= len(answers) and answers[n - 1] is not None else match.group(0)

    return _PLACEHOLDER.sub(answer, question)


def qa_pairs(hops: Sequence[Hop]) -> str:
    """The "Question #n / Reasoning #n / Answer #n" list of the construction prompt (App. D)."""
    return "\n".join(f"Question #{i}: {hop.question}\nReasoning #{i}: {hop.reasoning}\n"
                     f"Answer #{i}: {strip_citations(hop.answer)}" for i, hop in enumerate(hops, 1)) or "none"


def background(question: str, hops: Sequence[Hop]) -> str:
    """Answer generation's background (App. A.1): the original question and the earlier hops with their answers."""
    earlier = "\n".join(f"{hop.question} {strip_citations(hop.answer)}" for hop in hops)
    return f"Original question: {question}" + (f"\nPrevious sub-questions and answers:\n{earlier}" if earlier else "")


def solving_record(sub_questions: Sequence[str], hops: Sequence[Hop]) -> str:
    """Self-reflection's record H (Alg. 1): the decomposition, then each hop's rewritten question, reasoning, answer."""
    lines = ["Original decomposition:", *(f"{i}. {s}" for i, s in enumerate(sub_questions, 1))]
    for i, hop in enumerate(hops, 1):
        lines += [f"Rewritten sub-question #{i}: {hop.question}", f"Reasoning #{i}: {hop.reasoning}",
                  f"Answer #{i}: {strip_citations(hop.answer)}"]
    return "\n".join(lines)


def previous_decompositions(rounds: Sequence[tuple[Sequence[str], str]]) -> str:
    """The improve-decomposition input (App. D): every incorrect decomposition with its improvement instructions."""
    blocks = []
    for n, (sub_questions, analysis) in enumerate(rounds, 1):
        blocks += [f"Incorrect decomposition {n}:", *(f"{i}. {s}" for i, s in enumerate(sub_questions, 1)),
                   f"New decomposition instructions {n}:", analysis]
    return "\n".join(blocks)


def decomposed_information(hops: Sequence[Hop]) -> str:
    """Final answering's input (App. D): each answered sub-question with its reasoning."""
    return "\n".join(f"Sub-question {i}: {hop.question}\nReasoning: {hop.reasoning}\n"
                     f"Answer: {strip_citations(hop.answer)}" for i, hop in enumerate(hops, 1))


def final_answer(answer: str) -> str:
    """The answer a user gets: citations removed; an abstention is the canonical "I don't know."."""
    return ABSTENTION if is_abstention(answer) else strip_citations(answer)
