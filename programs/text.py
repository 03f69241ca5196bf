"""Text plumbing every method needs between its LM stages: numbered contexts and their ``[n]`` citations, abstentions,
LM answers and lists cleaned of what small models add. Pure functions, no LM."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_CITATION = re.compile(r"\[(\d+)\]")
_NUMBERING = re.compile(r"^\s*\d+[.)]\s+")
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\"'][.!?])\s+(?=[A-Z0-9\"'(])")  # not after an initial ("G. Stanley")
_ANSWER_IS = re.compile(r"answer is\s*:?\s*(.*)", re.IGNORECASE | re.DOTALL)
_ABSTENTIONS = ("i dont know", "i do not know", "not enough information", "cannot be determined", "no information")


def numbered(passages: Sequence[str], numbers: Sequence[int] | None = None) -> list[str]:
    """Passages as the prompts show them: ``[1] …``, ``[2] …`` — or under the given (1-based) ``numbers``, such as
    the ones an answer cited them by."""
    numbers = range(1, len(passages) + 1) if numbers is None else numbers
    return [f"[{n}] {text}" for n, text in zip(numbers, passages, strict=True)]


def citations(answer: str, count: int) -> list[int]:
    """0-based indices of the contexts an answer cites with ``[n]``, in order of first citation; numbers outside
    the context are ignored."""
    cited: list[int] = []
    for number in (int(n) for n in _CITATION.findall(answer or "")):
        if 1 <= number <= count and number - 1 not in cited:
            cited.append(number - 1)
    return cited


def citation_marks(text: str) -> int:
    """How many ``[n]`` marks ``text`` holds, valid or not."""
    return len(_CITATION.findall(text or ""))


def strip_citations(answer: str) -> str:
    return " ".join(_CITATION.sub("", answer or "").split()).replace(" .", ".").replace(" ,", ",")


def is_abstention(answer: str) -> bool:
    """An empty answer or one that says it cannot answer ("I don't know.", ComposeRAG App. D's abstention)."""
    text = re.sub(r"[^a-z ]", "", (answer or "").lower())
    return not text.strip() or any(phrase in " ".join(text.split()) for phrase in _ABSTENTIONS)


def safe_answer(text: str | None) -> str:
    """An LM answer cleaned of whitespace; an empty answer stays empty (never invented)."""
    return (text or "").strip()


def clean(items) -> list[str]:
    """An LM's list (sub-questions, queries) as non-empty strings, with any "1." numbering it wrote removed; a single
    string is a list of one, and "none" is no item."""
    items = [items] if isinstance(items, str) else list(items or [])
    cleaned = [_NUMBERING.sub("", str(item)).strip() for item in items]
    return [item for item in cleaned if item and item.lower() != "none"]


def unique(items: Iterable) -> list:
    """``items`` without repeats, in order of first occurrence."""
    return list(dict.fromkeys(items))


def split_sentences(text: str) -> list[str]:
    """``text`` split into its sentences (an initial such as "G. Stanley" ends none), stripped, none empty."""
    return [s.strip() for s in _SENTENCE_END.split(text or "") if s.strip()]


def stated_answer(sentence: str) -> str | None:
    """The answer a chain-of-thought sentence states after "answer is" ("So the answer is: Paris." → "Paris"; "" when
    it states it empty), or None when it states none (the chain goes on)."""
    match = _ANSWER_IS.search(sentence or "")
    return match.group(1).strip().rstrip(".").strip() if match else None
