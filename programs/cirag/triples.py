"""CIRAG's triples and their provenance (Wei et al., 2025, §3.3–3.4): pure helpers, no LM, no encoder.

A :class:`Triple` keeps where it came from — its document and the sentence of that document it states (Eqs. 3–4
project core triples onto sentences and documents). The paper leaves the triple → sentence link open; the program
assigns each triple to its document's sentence most similar to it by the encoder (:func:`assign`, given the
similarities). Triples are compared in HippoRAG's normal form (:func:`normalize_phrase`: lower case, every character
but letters, digits and spaces a space), the form the paper's case study prints ("aldri annet enn br k"). The
distiller's core triples are matched back to the candidates (:func:`match_core`): exactly in normal form, else a
candidate with the same subject and object whose relation is a reworded form of the core triple's (one's words among
the other's, or ``difflib``'s ratio of the two at or above ``cutoff``: "located in" ↔ "is located in", never "died
in" ↔ "born in", and never "1887" ↔ "1886"); the rest are dropped and counted by the caller.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

_NON_WORD = re.compile(r"[^a-z0-9 ]")


def normalize_phrase(text: str) -> str:
    """HippoRAG's ``processing_phrases``: lower case, non-alphanumerics to spaces, spaces collapsed."""
    return " ".join(_NON_WORD.sub(" ", str(text).lower()).split())


@dataclass(frozen=True)
class Triple:
    """``(subject, relation, object)`` with its provenance: the document it was extracted from and its sentence."""

    subject: str
    relation: str
    obj: str
    doc_id: str = ""
    sentence: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return normalize_phrase(self.subject), normalize_phrase(self.relation), normalize_phrase(self.obj)

    def render(self) -> str:
        """As the distiller and the triple-level answer read it (Fig. 12): ``('erik hort', 'born in',
        'montebello')``."""
        return repr(self.key)

    def words(self) -> str:
        """As the encoder reads it: ``subject relation object``."""
        return f"{self.subject} {self.relation} {self.obj}"


def well_formed(raw: object) -> list[tuple[str, str, str]]:
    """An LM's triples as ``(subject, relation, object)`` strings: items of three non-empty strings only, each once
    (in normal form), in order."""
    kept, seen = [], set()
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            continue
        parts = tuple(str(part).strip() for part in item)
        key = tuple(normalize_phrase(part) for part in parts)
        if all(key) and key not in seen:
            seen.add(key)
            kept.append(parts)
    return kept


def assign(similarity: Sequence[Sequence[float]]) -> list[int]:
    """For each triple (a row of similarities to its document's sentences), the index of its most similar sentence
    (the first on a tie); -1 for a document without sentences."""
    return [max(range(len(row)), key=lambda j: (row[j], -j)) if len(row) else -1 for row in similarity]


def top_n(scores: Sequence[float], n: int) -> list[int]:
    """The indices of the ``n`` highest scores, highest first (the earlier on a tie)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:n]


def reworded(relation: str, other: str, cutoff: float) -> bool:
    """Whether two relations in normal form say the same: one's words among the other's, or a ``difflib`` ratio at or
    above ``cutoff``."""
    words, others = set(relation.split()), set(other.split())
    return bool(words and others) and (words <= others or others <= words or
                                       difflib.SequenceMatcher(None, relation, other).ratio() >= cutoff)


def match_core(core: Sequence[Sequence[str]], candidates: Sequence[Triple], cutoff: float = 0.85
               ) -> tuple[list[Triple], int, int]:
    """The candidates the distiller's core triples name, in the core's order without repeats; how many core triples
    matched none; and how many matched fuzzily: an exact match in normal form first, else the first candidate with
    the same subject and object whose relation is :func:`reworded` from the core triple's."""
    by_key = {c.key: c for c in reversed(candidates)}  # the first candidate wins a repeated key
    matched, unmatched, fuzzy = [], 0, 0
    for item in core:
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            unmatched += 1
            continue
        key = tuple(normalize_phrase(part) for part in item)
        found = by_key.get(key)
        if found is None:  # the same subject and object, the relation reworded: a different fact never matches
            found = next((c for c in candidates if (c.key[0], c.key[2]) == (key[0], key[2])
                          and reworded(key[1], c.key[1], cutoff)), None)
            fuzzy += found is not None
        if found is None:
            unmatched += 1
        elif found not in matched:
            matched.append(found)
    return matched, unmatched, fuzzy
