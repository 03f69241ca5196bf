"""CIRAG's offline triple cache (§4.3, following KiRAG): every passage's entities and triples, extracted once.

A cache folder holds ``manifest.json`` (the corpus checksum and size, the sharding, the extractor: its LM) and
JSON-lines shards ``triples-NNNNN.jsonl`` of rows ``{"id": passage id, "entities": [...], "triples": [[s, r, o], ...],
"failed": bool}``. Building appends each passage's row as soon as it is extracted, so an interrupted build resumes
where it stopped (a torn last line is dropped); a passage whose extraction failed (an unparsable reply) is kept as a
failed row with what parsed, and a rebuild extracts it again; a cache built for another corpus, sharding or extractor
is refused, so one cache never mixes two LMs' triples. With ``threads`` > 1 (a served LM) the passages are extracted
``threads`` at once, in chunks of ``threads * 4`` whose rows are appended in the passages' order once the chunk is
done: the shards read as a serial build's, and an interrupt loses at most the chunk in flight, which a rerun redoes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from multihop.data.corpus import Corpus, Passage
from multihop.data.folders import locked
from multihop.data.jsonl import append_row, read_rows
from multihop.data.paths import atomic_write_text
from multihop.runtime.parallel import fan_out_chunks

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Extraction:
    """One passage's named entities and triples, and whether its extraction failed (what parsed is kept)."""

    entities: list[str] = field(default_factory=list)
    triples: list[tuple[str, str, str]] = field(default_factory=list)
    failed: bool = False


Extractor = Callable[[Passage], Extraction]


class CacheMismatchError(ValueError):
    """The cache folder was built for another corpus, sharding or extractor."""


def shard_name(index: int) -> str:
    return f"triples-{index:05d}.jsonl"


def build_cache(corpus: Corpus, out: str | Path, extract: Extractor, shard_size: int = 5000, extractor: str = "",
                progress: bool = True, threads: int = 1) -> tuple[int, int]:
    """Extract every passage of ``corpus`` the cache at ``out`` lacks or failed on (``extract(passage) ->
    Extraction``), ``threads`` passages at once; ``extractor`` names the extracting LM. Returns how many passages it
    extracted and how many of those failed."""
    out = Path(out)
    with locked(out):
        manifest = {"corpus_sha256": corpus.checksum(), "passages": len(corpus), "shard_size": shard_size,
                    "extractor": extractor}
        known = out / MANIFEST
        if known.exists():
            saved = json.loads(known.read_text(encoding="utf-8"))
            if {k: saved.get(k) for k in manifest} != manifest:
                raise CacheMismatchError(f"{out} holds triples of another corpus, sharding or extractor ({saved}); "
                                         "give a new --out, or the corpus and LM it was built with")
        else:
            atomic_write_text(known, json.dumps(manifest, indent=2))
        done = {pid for pid, row in read_all(out, repair=True).items() if not row.get("failed")}
        todo = [(i, p) for i, p in enumerate(corpus) if p.id not in done]
        return _extract(out, todo, extract, shard_size, threads, progress)


def _extract(out: Path, todo: list[tuple[int, Passage]], extract: Extractor, shard_size: int, threads: int,
             progress: bool) -> tuple[int, int]:
    """Extract the passages of ``todo`` (corpus position, passage) ``threads`` at once, appending their rows to
    their shards in ``todo``'s order a chunk at a time; returns how many were extracted and how many failed."""
    failed = 0
    with tqdm(total=len(todo), desc="extracting triples", unit="passage", disable=not progress) as bar:
        for chunk in fan_out_chunks(lambda item: extract(item[1]), todo, threads):
            for (i, passage), found in chunk:
                failed += found.failed
                with open(out / shard_name(i // shard_size), "a", encoding="utf-8") as sink:
                    append_row(sink, {"id": passage.id, "entities": found.entities,
                                      "triples": [list(t) for t in found.triples], "failed": found.failed})
            bar.update(len(chunk))
    return len(todo), failed


def read_all(folder: str | Path, repair: bool = False) -> dict[str, dict]:
    """Every row of the cache in ``folder``, by passage id (a passage's latest row); ``repair`` (a build holding the
    folder's lock) rewrites a torn last line away before appending."""
    rows: dict[str, dict] = {}
    for shard in sorted(Path(folder).glob("triples-*.jsonl")):
        rows.update(read_rows(shard, repair=repair))
    return rows


class TripleCache:
    """A built cache, read once: ``cache.get(pid)`` is the passage's :class:`Extraction`, or None when it lacks
    the passage."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        if not (self.folder / MANIFEST).exists():
            raise FileNotFoundError(f"{self.folder} is no triple cache (no {MANIFEST}): build it with `multihop "
                                    "cirag extract CORPUS --out DIR`")
        self.rows = read_all(self.folder)

    def get(self, pid: str) -> Extraction | None:
        row = self.rows.get(pid)
        return None if row is None else Extraction(list(row["entities"]), [tuple(t) for t in row["triples"]],
                                                   bool(row.get("failed")))

    def __len__(self) -> int:
        return len(self.rows)

    def ids(self) -> Iterable[str]:
        return self.rows.keys()
