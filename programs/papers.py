"""The papers the programs rebuild (:class:`Paper`, each program's declaration names its own) and their own headline
numbers, which ``multihop compare`` shows beside ours, labelled as theirs: each with the LM
it was measured with, where it was read (seed file and table) and how its setting differs from ours (their
questions, corpus and retriever). Each method declares its paper's numbers with its other facts
(``Method(papers=reported(...))`` in its package); only numbers read in the papers' text are declared.

Numbers are fractions, as our summaries keep them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """The paper a program rebuilds, as its declaration names it (``Method(paper=Paper(...))``)."""

    title: str
    authors: str  # as the paper lists them, "First Author, Second Author, ..."
    year: int
    venue: str | None = None  # where it was published; None: a preprint
    url: str | None = None

    def short(self) -> str:
        """``First author et al., venue year`` (``year`` alone for a preprint)."""
        first = self.authors.split(",")[0].strip().split()[-1]
        more = " et al." if "," in self.authors else ""
        return f"{first}{more}, {self.venue + ' ' if self.venue else ''}{self.year}"


@dataclass(frozen=True)
class PaperResult:
    """One paper's reported scores of its method on one dataset: ``metrics`` by our summary keys (em, f1, acc,
    cover_em, llm_eval, recall@2, recall@5), the paper's ``lm``, where it was read (``source``) and its ``setting``."""

    program: str  # the method's name (filled in by its declaration)
    dataset: str
    lm: str
    metrics: dict[str, float]
    source: str
    setting: str

    def label(self) -> str:
        return f"paper (theirs, {self.lm})"


def reported(lm: str, source: str, setting: str, by_dataset: dict[str, dict[str, float]]) -> tuple[PaperResult, ...]:
    """A paper's numbers for its method, one :class:`PaperResult` per dataset (musique, hotpotqa, 2wiki);
    ``by_dataset`` holds percentages as the papers print them. The method's declaration fills in its name."""
    return tuple(PaperResult("", dataset, lm, {key: value / 100 for key, value in numbers.items()}, source, setting)
                 for dataset, numbers in by_dataset.items())
