"""Passages and corpora with stable, content-derived ids (docs/design.md, "Shared stack: Data").

A passage id is a hash of its title and text, so the same paragraph gets the same id in every file that holds it:
a question's gold ids match the passages of a HippoRAG corpus file and of an IRCoT corpus built from any question set.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from multihop.data.paths import atomic_write_text

logger = logging.getLogger(__name__)


class DataFormatError(ValueError):
    """A malformed record; the message names the file, the line (or record) and the field."""


def passage_id(title: str, text: str) -> str:
    """The stable id of a passage: the first 16 hex digits of sha1(title + newline + text)."""
    return hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]


def join_sentences(sentences: Iterable[str]) -> str:
    """Join a paragraph's sentences as HippoRAG's corpus files do: HotpotQA's sentences carry their leading space,
    2Wiki's do not, so a space is added only where neither side has one."""
    text = ""
    for sentence in sentences:
        if text and not text[-1].isspace() and sentence and not sentence[0].isspace():
            text += " "
        text += sentence
    return text.strip()


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str

    @classmethod
    def make(cls, title: str, text: str, id: str | None = None) -> Passage:
        return cls(id=id or passage_id(title, text), title=title, text=text)

    def to_dict(self) -> dict:
        return asdict(self)

    def render(self) -> str:
        """The passage as retrievers encode it and programs show it to an LM: ``title: text``."""
        return f"{self.title}: {self.text}" if self.title else self.text


class Corpus:
    """An ordered, id-unique collection of passages.

    Empty passages are skipped and counted (``skipped_empty``). A repeated id with the same title and text is merged
    and counted (``merged_duplicates``); a repeated id with different content is refused, never silently shadowed.
    """

    def __init__(self, passages: Iterable[Passage] = (), source: str = "<memory>"):
        self.source = source
        self._passages: list[Passage] = []
        self._by_id: dict[str, Passage] = {}
        self._rows: dict[str, int] = {}
        self.skipped_empty = 0
        self.merged_duplicates = 0
        for passage in passages:
            self.add(passage)

    def add(self, passage: Passage) -> bool:
        """Add one passage; returns False when it was skipped (empty) or merged (duplicate)."""
        if not passage.text.strip():
            self.skipped_empty += 1
            return False
        existing = self._by_id.get(passage.id)
        if existing is not None:
            if (existing.title, existing.text) != (passage.title, passage.text):
                raise DataFormatError(
                    f"{self.source}: passage id {passage.id!r} is used for two different passages "
                    f"({existing.title!r} and {passage.title!r}); ids must be unique"
                )
            self.merged_duplicates += 1
            return False
        self._rows[passage.id] = len(self._passages)
        self._passages.append(passage)
        self._by_id[passage.id] = passage
        return True

    def __len__(self) -> int:
        return len(self._passages)

    def __iter__(self) -> Iterator[Passage]:
        return iter(self._passages)

    def __getitem__(self, key: int | str) -> Passage:
        return self._passages[key] if isinstance(key, int) else self._by_id[key]

    def row(self, pid: str) -> int:
        """The position of passage ``pid`` (the row of its vector in an index)."""
        return self._rows[pid]

    def __contains__(self, pid: object) -> bool:
        return pid in self._by_id

    @property
    def ids(self) -> list[str]:
        return [p.id for p in self._passages]

    def checksum(self) -> str:
        """sha256 over the ordered ids: two corpora with the same passages in the same order have the same checksum."""
        return hashlib.sha256("\n".join(self.ids).encode()).hexdigest()

    def texts(self) -> list[str]:
        return [p.render() for p in self._passages]

    def save(self, path: str | Path) -> None:
        """Write the corpus as JSON lines ``{id, title, text}`` (atomically)."""
        lines = "".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in self._passages)
        atomic_write_text(Path(path), lines)

    def __repr__(self) -> str:
        return f"Corpus({len(self)} passages from {self.source}, {self.skipped_empty} empty skipped)"
