"""Text plumbing between ComposeRAG's modules (seed 002, App. A.1, D): numbered contexts and ``[n]`` citations, the
listwise ``[x] > [y]`` ranking and its repair, ``#n`` placeholders, abstentions, and the records the construction,
final-answering and self-reflection prompts read. Pure functions, no LM."""

from __future__ import annotations

import re
from collections.abc import Sequence

from multihop.signatures.composerag import ABSTENTION

_CITATION = re.compile(r"\[(\d+)\]")
_PLACEHOLDER = re.compile(r"#(\d+)")
_ABSTENTIONS = ("i dont know", "i do not know", "not enough information", "cannot be determined", "no information")


def numbered(passages: Sequence[str]) -> list[str]:
    """Passages as the prompts show them: ``[1] …``, ``[2] …``."""
    return [f"[{i}] {text}" for i, text in enumerate(passages, 1)]


def identifiers(count: int) -> str:
    return ", ".join(f"[{i}]" for i in range(1, count + 1))


def parse_ranking(text: str, count: int) -> tuple[list[int], bool]:
    """0-based passage order from a listwise ranking ``[x] > [y] > …`` over ``count`` passages, and whether it needed
    repair: repeated identifiers keep their first place, unknown ones are dropped, and the ones it skipped follow in
    retriever order."""
    ranked = citations(text, count)
    repaired = len(_CITATION.findall(text or "")) != len(ranked) or len(ranked) < min(count, 10)
    return ranked + [i for i in range(count) if i not in ranked], repaired


def citations(answer: str, count: int) -> list[int]:
    """0-based indices of the contexts an answer cites with ``[n]``, in order of first citation; numbers outside
    the context are ignored."""
    cited: list[int] = []
    for number in (int(n) for n in _CITATION.findall(answer or "")):
        if 1 <= number <= count and number - 1 not in cited:
            cited.append(number - 1)
    return cited


def strip_citations(answer: str) -> str:
    return " ".join(_CITATION.sub("", answer or "").split()).replace(" .", ".").replace(" ,", ",")


def is_abstention(answer: str) -> bool:
    """An empty answer or one that says it cannot answer ("I don't know.", App. D's abstention)."""
    text = re.sub(r"[^a-z ]", "", (answer or "").lower())
    return not text.strip() or any(phrase in " ".join(text.split()) for phrase in _ABSTENTIONS)


def placeholders(question: str) -> list[int]:
    return [int(n) for n in _PLACEHOLDER.findall(question or "")]


def substitute(question: str, answers: Sequence[str]) -> str:
    """Replace each ``#n`` that has an answer with it (the answers already stripped of citations)."""
    return _PLACEHOLDER.sub(lambda m: answers[int(m.group(1)) - 1] if 1 <= int(m.group(1)) <= len(answers)
                            else m.group(0), question)


def qa_pairs(hops: Sequence[dict]) -> str:
    """The "Question #n / Reasoning #n / Answer #n" list of the construction prompt (App. D)."""
    return "\n".join(f"Question #{i}: {hop['question']}\nReasoning #{i}: {hop['reasoning']}\n"
                     f"Answer #{i}: {strip_citations(hop['answer'])}" for i, hop in enumerate(hops, 1)) or "none"


def background(question: str, hops: Sequence[dict]) -> str:
    """Answer generation's background (App. A.1): the original question and the earlier hops with their answers."""
    earlier = "\n".join(f"{hop['question']} {strip_citations(hop['answer'])}" for hop in hops)
    return f"Original question: {question}" + (f"\nPrevious sub-questions and answers:\n{earlier}" if earlier else "")


def solving_record(sub_questions: Sequence[str], hops: Sequence[dict]) -> str:
    """Self-reflection's record H (Alg. 1): the decomposition, then each hop's rewritten question, reasoning, answer."""
    lines = ["Original decomposition:", *(f"{i}. {s}" for i, s in enumerate(sub_questions, 1))]
    for i, hop in enumerate(hops, 1):
        lines += [f"Rewritten sub-question #{i}: {hop['question']}", f"Reasoning #{i}: {hop['reasoning']}",
                  f"Answer #{i}: {strip_citations(hop['answer'])}"]
    return "\n".join(lines)


def previous_decompositions(rounds: Sequence[tuple[Sequence[str], str]]) -> str:
    """The improve-decomposition input (App. D): every incorrect decomposition with its improvement instructions."""
    blocks = []
    for n, (sub_questions, analysis) in enumerate(rounds, 1):
        blocks += [f"Incorrect decomposition {n}:", *(f"{i}. {s}" for i, s in enumerate(sub_questions, 1)),
                   f"New decomposition instructions {n}:", analysis]
    return "\n".join(blocks)


def decomposed_information(hops: Sequence[dict]) -> str:
    """Final answering's input (App. D): each answered sub-question with its reasoning."""
    return "\n".join(f"Sub-question {i}: {hop['question']}\nReasoning: {hop['reasoning']}\n"
                     f"Answer: {strip_citations(hop['answer'])}" for i, hop in enumerate(hops, 1))


def final_answer(answer: str) -> str:
    """The answer a user gets: citations removed; an abstention is the canonical "I don't know."."""
    return ABSTENTION if is_abstention(answer) else strip_citations(answer)
