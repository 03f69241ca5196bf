"""IRCoT's paragraph limits, as the authors' code applies them (``commaqa/inference/ircot.py``): a retrieved paragraph
of more than 600 words is dropped ("Discarding a retrieved paragraph as it's excessively long", unless
``dont_skip_long_paras``), and every paragraph a prompt shows is cut to its first 350 words (``para_to_text`` with
``max_para_num_words=350``, the reasoning step's and the reader's default, which the released configurations keep).
Words are what the authors count: the text split at single spaces, the title left out. Pure functions over
:class:`~multihop.retrievers.query.Hits`, no LM.
"""

from __future__ import annotations

import dspy

from multihop.data.corpus import Passage
from multihop.retrievers.query import Hits, pick, texts_of, titles_of

SHOWN_WORDS, LONG_WORDS = 350, 600  # the authors' max_para_num_words and their long-paragraph limit


def words(text: str) -> int:
    """The words of a paragraph's text as the authors count them: its pieces between single spaces."""
    return len(text.split(" "))


def cut(text: str, most: int | None) -> str:
    """The first ``most`` words of ``text`` (None: all of it), rejoined with single spaces and stripped as the
    authors' cut is (other whitespace, a newline included, stays inside a word)."""
    return text if most is None else " ".join(text.split(" ")[:most]).strip()


def shown_passage(passage: Passage, most: int | None) -> str:
    """A corpus passage as a prompt shows it: ``title: text`` with its text cut to ``most`` words."""
    return f"{passage.title}: {cut(passage.text, most)}" if passage.title else cut(passage.text, most)


def without_long(hits: dspy.Prediction, most: int | None) -> tuple[Hits, int]:
    """``hits`` without the paragraphs whose text has more than ``most`` words (None: none dropped), and how many were
    dropped."""
    texts = texts_of(hits)
    kept = [i for i, text in enumerate(texts) if most is None or words(text) <= most]
    scores = list(hits.get("scores") or [0.0] * len(texts))
    return pick(hits, kept, [scores[i] for i in kept]), len(texts) - len(kept)


def shown(hits: dspy.Prediction, most: int | None) -> list[str]:
    """The paragraphs of ``hits`` as a prompt shows them: each text cut to ``most`` words (None: whole), after its
    title (``title: text``, as passages are rendered) when the hits carry titles and texts."""
    if most is None:
        return list(hits.passages)
    if hits.get("texts") is None:
        return [cut(passage, most) for passage in hits.passages]
    return [f"{title}: {cut(text, most)}" if title else cut(text, most)
            for title, text in zip(titles_of(hits), texts_of(hits), strict=True)]
