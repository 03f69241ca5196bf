"""CIRAG's offline triple cache (§4.3, following KiRAG): every passage's entities and triples, extracted once.

A cache folder holds ``manifest.json`` (the corpus checksum and size, the extractor LM) and JSON-lines shards
``triples-NNNNN.jsonl`` of rows ``{"id": passage id, "entities": [...], "triples": [[s, r, o], ...]}``. Building
appends each passage's row as soon as it is extracted, so an interrupted build resumes where it stopped (a torn last
line is dropped); a cache built for another corpus is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from tqdm.auto import tqdm

from multihop.corpus import Corpus, Passage
from multihop.folders import locked
from multihop.jsonl import append_row, read_rows
from multihop.paths import atomic_write_text

MANIFEST = "manifest.json"
Extractor = Callable[[Passage], tuple[list[str], list[tuple[str, str, str]]]]


class CacheMismatchError(ValueError):
    """The cache folder was built for another corpus."""


def shard_name(index: int) -> str:
    return f"triples-{index:05d}.jsonl"


def build_cache(corpus: Corpus, out: str | Path, extract: Extractor, shard_size: int = 5000, extractor: str = "",
                progress: bool = True) -> int:
    """Extract every passage of ``corpus`` not in the cache at ``out`` yet (``extract(passage) -> (entities,
    triples)``); returns how many passages it extracted."""
    out = Path(out)
    with locked(out):
        manifest = {"corpus_sha256": corpus.checksum(), "passages": len(corpus), "shard_size": shard_size}
        known = out / MANIFEST
        if known.exists():
            saved = json.loads(known.read_text(encoding="utf-8"))
            if {k: saved.get(k) for k in manifest} != manifest:
                raise CacheMismatchError(f"{out} holds triples of another corpus or sharding ({saved}); give a new "
                                         "--out or the corpus it was built from")
        else:
            atomic_write_text(known, json.dumps({**manifest, "extractor": extractor}, indent=2))
        done = set(read_all(out))
        todo = [(i, p) for i, p in enumerate(corpus) if p.id not in done]
        for i, passage in tqdm(todo, desc="extracting triples", unit="passage", disable=not progress):
            entities, triples = extract(passage)
            with open(out / shard_name(i // shard_size), "a", encoding="utf-8") as sink:
                append_row(sink, {"id": passage.id, "entities": entities, "triples": [list(t) for t in triples]})
        return len(todo)


def read_all(folder: str | Path) -> dict[str, dict]:
    """Every row of the cache in ``folder``, by passage id."""
    rows: dict[str, dict] = {}
    for shard in sorted(Path(folder).glob("triples-*.jsonl")):
        rows.update(read_rows(shard, repair=False))
    return rows


class TripleCache:
    """A built cache, read once: ``cache.get(pid)`` is ``(entities, triples)`` or None for a passage it lacks."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        if not (self.folder / MANIFEST).exists():
            raise FileNotFoundError(f"{self.folder} is no triple cache (no {MANIFEST}): build it with `multihop "
                                    "cirag extract CORPUS --out DIR`")
        self.rows = read_all(self.folder)

    def get(self, pid: str) -> tuple[list[str], list[tuple[str, str, str]]] | None:
        row = self.rows.get(pid)
        return None if row is None else (list(row["entities"]), [tuple(t) for t in row["triples"]])

    def __len__(self) -> int:
        return len(self.rows)

    def ids(self) -> Iterable[str]:
        return self.rows.keys()
