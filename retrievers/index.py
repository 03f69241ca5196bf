"""A FAISS inner-product index over normalised passage embeddings, saved with a manifest (DESIGN.md, "Scale path").

The manifest records the index kind, the encoder (name and weights checksum), the dimension, the passage count and
the corpus checksum. Loading checks all of them: an index built with another encoder or for another corpus is
refused rather than silently returning wrong passages. Encoding runs in shards written as they finish, so an
interrupted build resumes where it stopped; every file is written through a rename.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import faiss
import numpy as np
from tqdm.auto import tqdm

from multihop.corpus import Corpus
from multihop.paths import atomic_write_text

from .encoder import Encoder

MANIFEST = "manifest.json"
SHARD_SIZE = 256


class IndexMismatchError(ValueError):
    """A saved index does not match the encoder or corpus it is loaded with."""


def encode_corpus(corpus: Corpus, encoder: Encoder, work_dir: Path, shard_size: int = SHARD_SIZE) -> np.ndarray:
    """Encode the corpus in shards saved under ``work_dir``; shards already there (from an interrupted run of the same
    corpus and encoder) are reused."""
    work_dir.mkdir(parents=True, exist_ok=True)
    stamp = work_dir / "build.json"
    key = {"corpus": corpus.checksum(), "encoder": encoder.checksum(), "shard_size": shard_size}
    if not stamp.exists() or json.loads(stamp.read_text()) != key:
        for old in work_dir.glob("shard-*.npy"):
            old.unlink()
        atomic_write_text(stamp, json.dumps(key))
    texts = corpus.texts()
    shards = []
    starts = range(0, len(texts), shard_size)
    for start in tqdm(starts, desc=f"encoding {len(texts)} passages", unit="shard", total=len(starts)):
        path = work_dir / f"shard-{start // shard_size:06d}.npy"
        if path.exists():
            shards.append(np.load(path))
            continue
        vectors = encoder.encode(texts[start : start + shard_size])
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        os.replace(tmp, path)
        shards.append(vectors)
    return np.concatenate(shards) if shards else np.zeros((0, encoder.dimension), dtype=np.float32)


class FaissIndex:
    """Exact inner-product search (``IndexFlatIP``) over normalised vectors."""

    kind = "flat-ip"

    def __init__(self, index: faiss.Index, manifest: dict):
        self.index = index
        self.manifest = manifest

    @classmethod
    def build(cls, vectors: np.ndarray, manifest: dict) -> FaissIndex:
        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(vectors)
        return cls(index, {**manifest, "kind": cls.kind, "dimension": int(vectors.shape[1]), "count": len(vectors)})

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.index.ntotal)
        return self.index.search(queries, k)

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        tmp = directory.with_name(f".{directory.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        faiss.write_index(self.index, str(tmp / "index.faiss"))
        (tmp / MANIFEST).write_text(json.dumps(self.manifest, indent=2))
        shutil.rmtree(directory, ignore_errors=True)
        os.replace(tmp, directory)

    @classmethod
    def load(cls, directory: str | Path, expect: dict | None = None) -> FaissIndex:
        """Load an index, refusing it when any key of ``expect`` differs from its manifest."""
        directory = Path(directory)
        if not (directory / MANIFEST).exists():
            raise FileNotFoundError(f"{directory} holds no index ({MANIFEST} missing)")
        manifest = json.loads((directory / MANIFEST).read_text())
        for key, value in (expect or {}).items():
            if manifest.get(key) != value:
                raise IndexMismatchError(
                    f"{directory}: the index was built with {key}={manifest.get(key)!r}, not {value!r}; rebuild it"
                )
        index = faiss.read_index(str(directory / "index.faiss"))
        if index.ntotal != manifest["count"]:
            raise IndexMismatchError(
                f"{directory}: index holds {index.ntotal} vectors, manifest says {manifest['count']}"
            )
        return cls(index, manifest)
