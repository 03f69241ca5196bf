"""ComposeRAG's loop state: a solved (sub-)question (:class:`Hop`), a verifier's verdict (:class:`Verdict`) and one
question being solved (:class:`Solving`), which holds what the pipeline's steps share — the decompositions tried, the
reflection analyses, the hops of the current round and every verdict — so no step threads them through its
parameters. The prediction shows hops and verdicts as plain dicts (:meth:`Hop.record`, :func:`dataclasses.asdict`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Verdict:
    """AV's judgement of an ``answer`` to ``question`` at ``stage`` ("simple", "hop n" or "final")."""

    stage: str
    question: str
    answer: str
    valid: bool
    reason: str


@dataclass
class Hop:
    """One (sub-)question answered: the question as answered (placeholders resolved), the passages read and their ids,
    the reasoning and the cited answer with what it cited (and under which numbers), the queries retrieved with (none
    when the question was its own context), the verdict (None without AV) and, on the multi-hop path, the sub-question
    as decomposed."""

    question: str
    passages: list[str]
    passage_ids: list[str]
    reasoning: str
    answer: str
    abstained: bool
    cited: list[str]
    cited_ids: list[str]
    cited_numbers: list[int] = field(default_factory=list)  # the [n] each cited passage had in the answer's context
    queries: list[str] = field(default_factory=list)
    retrieved: bool = True
    verified: bool | None = None
    sub_question: str | None = None

    def record(self) -> dict:
        """The hop as the prediction's ``history`` shows it; the simple path's hop has no ``sub_question``."""
        record = asdict(self)
        if self.sub_question is None:
            del record["sub_question"]
        return record


@dataclass
class Solving:
    """One question being solved. ``hops`` are the current round's; ``decompositions[i]`` was solved in round ``i``
    and ``analyses[i]`` is the reflection on it (so the last decomposition has none when the answer was grounded)."""

    question: str
    path: str = "multihop"
    decompositions: list[list[str]] = field(default_factory=list)
    analyses: list[str] = field(default_factory=list)
    hops: list[Hop] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def sub_questions(self) -> list[str]:
        """The decomposition being solved (the last one)."""
        return self.decompositions[-1] if self.decompositions else []

    def rounds(self) -> list[tuple[list[str], str]]:
        """Every reflected-on decomposition with its analysis, in order."""
        return list(zip(self.decompositions, self.analyses, strict=False))

    def add_verdict(self, verdict: Verdict) -> bool:
        """Keep ``verdict``; returns whether it passed."""
        self.verdicts.append(verdict)
        return verdict.valid
