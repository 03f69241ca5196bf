"""DualRAG's pure parts (no LM): the knowledge outline of pKA (Eq. 10), entity linking (Eq. 5), the merging of an
entity's retrieved documents (Eq. 7) and their grouping by title ("w/o EI").

The outline maps each entity to its knowledge fragments, in the order they arrived; an empty fragment never enters it,
so an entity with nothing is never in it. It is shown to the LM by entity (the paper's outline) or, for Table 14's
"w/o KO*" and Table 3's "w/o KO", as one flat list of its fragments, each once.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field

import dspy

from multihop.retrievers.query import Hits

from ..text import clean, is_abstention, unique

CONCLUSION = re.compile(r"so the answer is", re.IGNORECASE)  # the end of an IRCoT chain ("w/o R")
_NOTHING = {"", "none", "n/a", "na", "nothing", "empty", "null", "no information", "no relevant information",
            "no useful information", "not mentioned", "unknown"}
_ARTICLE = re.compile(r"^(the|a|an)\s+")
SHORT_REPLY = 8  # words: a longer summary is not read as an abstention, whatever phrase it contains


@dataclass
class Outline:
    """The progressive knowledge outline K: entity → fragments (Eq. 10)."""

    fragments: dict[str, list[str]] = field(default_factory=dict)

    def add(self, entity: str, fragment: str) -> bool:
        """Append ``fragment`` to ``entity``'s knowledge; an empty fragment or one the entity has already is not added
        (returns whether it was)."""
        fragment = " ".join((fragment or "").split())
        if is_empty_fragment(fragment) or fragment in self.fragments.get(entity, []):
            return False
        self.fragments.setdefault(entity, []).append(fragment)
        return True

    def render(self, structured: bool = True) -> str:
        """The outline as the prompts show it: one block per entity (``Entity:`` then ``- fragment`` lines), or one
        flat ``- fragment`` list with each fragment once; empty before the first retrieval."""
        if not structured:
            return "\n".join(f"- {fragment}" for fragment in unique(f for fs in self.fragments.values() for f in fs))
        return "\n\n".join(f"{entity}:\n" + "\n".join(f"- {fragment}" for fragment in fragments)
                           for entity, fragments in self.fragments.items())


def is_empty_fragment(text: str) -> bool:
    """A summary that holds no knowledge: empty, "none" and its like, or a short abstention as the whole reply ("No
    information about X."). A fragment that states a fact and then says what is missing is kept."""
    words = " ".join((text or "").lower().strip(string.punctuation + string.whitespace).split())
    return words in _NOTHING or (len(words.split()) <= SHORT_REPLY and is_abstention(words))


def entity_key(name: str) -> str:
    """The form two names of one entity share: lower case, no punctuation, no leading article."""
    words = " ".join(re.sub(rf"[{re.escape(string.punctuation)}]", " ", name.lower()).split())
    return _ARTICLE.sub("", words)


def entity_pairs(entities) -> list[tuple[str, list]]:
    """The Entity Identifier's entities as ``(name, queries)`` pairs, from its typed output (a list of
    ``EntityQueries``), the same as JSON dicts (``{"entity", "queries"}``, rows on disk) or a mapping of names to
    queries; anything else gives no pair."""
    if isinstance(entities, dict):
        return [(str(name), queries) for name, queries in entities.items()]
    pairs = []
    for item in entities if isinstance(entities, list) else []:
        item = item.model_dump() if hasattr(item, "model_dump") else item
        if isinstance(item, dict) and item.get("entity") is not None:
            pairs.append((str(item["entity"]), item.get("queries") or []))
    return pairs


def link_entities(entities, known: list[str], max_entities: int, max_queries: int
                  ) -> tuple[dict[str, list[str]], int, bool]:
    """The Entity Identifier's output (any form :func:`entity_pairs` reads) made usable: each name linked to a known
    entity's exact name when they share :func:`entity_key` (the paper's entity linking, checked here as well as
    asked of the LM), names that link to one entity merged, each entity's queries cleaned, deduplicated and cut to
    ``max_queries`` (none: the entity's name is its query), at most ``max_entities`` entities. Returns the entities,
    how many names were linked to a known one, and whether entities were cut."""
    earlier = {entity_key(name): name for name in known}
    known_by_key = dict(earlier)
    linked: dict[str, list[str]] = {}
    relinked = 0
    for name, queries in entity_pairs(entities):
        name = " ".join(name.split())
        key = entity_key(name)
        if not key:
            continue
        target = known_by_key.get(key, name)
        relinked += int(key in earlier and target != name)
        known_by_key.setdefault(key, target)
        linked.setdefault(target, []).extend(clean(queries))
    kept = dict(list(linked.items())[:max_entities])
    return ({name: unique(queries)[:max_queries] or [name] for name, queries in kept.items()}, relinked,
            len(linked) > max_entities)


def merge_by_score(hits: list[dspy.Prediction]) -> Hits:
    """The documents of several queries' hits (Eq. 7's grouping under one entity): each id once with its best score,
    best first (ties keep the order found), with their titles and texts when every hit carries them. A retriever that
    gives no scores is ranked by position (0, -1, -2, …)."""
    rows: dict[str, tuple[int, int, float]] = {}  # id → (hit, position, best score)
    for h, hit in enumerate(hits):
        scores = hit.get("scores") or [-float(rank) for rank in range(len(hit.ids))]
        for i, (pid, score) in enumerate(zip(hit.ids, scores, strict=True)):
            if pid not in rows or score > rows[pid][2]:
                rows[pid] = (h, i, float(score))
    ordered = sorted(rows.values(), key=lambda row: -row[2])
    fields = ["passages", "ids"] + [name for name in ("titles", "texts")
                                    if all(hit.get(name) is not None for hit in hits)]
    return Hits(**{name: [hits[h][name][i] for h, i, _ in ordered] for name in fields},
                scores=[score for _, _, score in ordered])


def by_title(ids: list[str], passages: list[str], titles: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Documents grouped by their title, titles in order of first appearance ("w/o EI": the title is the entity)."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for pid, passage, title in zip(ids, passages, titles, strict=True):
        group = groups.setdefault(title, ([], []))
        group[0].append(pid)
        group[1].append(passage)
    return groups


def concluded(thought: str) -> bool:
    """Whether an IRCoT-style sentence ends the chain ("So the answer is …")."""
    return bool(CONCLUSION.search(thought or ""))
