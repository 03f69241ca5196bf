"""FAISS inner-product indexes over normalised passage embeddings, saved with a manifest (DESIGN.md, "Scale path").

Three kinds: ``flat`` (exact, ``IndexFlatIP``), ``ivf`` (``IndexIVFFlat``: ``4·√N`` inverted lists, ``nprobe``
of them searched per query) and ``hnsw`` (``IndexHNSWFlat``, 32 links, ``efConstruction`` 64, ``efSearch`` 512).
``auto`` picks ``flat`` below :data:`EXACT_LIMIT` passages and ``ivf`` above. The trade-off: ``flat`` costs
``O(N·d)`` per query; ``ivf`` scans about ``nprobe/nlist`` of the corpus (``nprobe=32`` of ~4,000 lists at 1M
passages: ~1% of the work) and loses the neighbours that fall in unprobed lists (raise ``nprobe`` for recall);
``hnsw`` answers in roughly logarithmic time at the price of ~2× memory and a slower build, and its recall rests on
``efSearch`` (measured on 100k clustered 768-d vectors, 2 cores: efSearch 128 → 84% recall@10, 256 → 93%,
512 → 99.5% at 1.9 ms against 36 ms for ``flat``). ``benchmarks/retrieval.py`` prints recall against ``flat``,
build time and latency of each kind.

The manifest records the index kind, the encoder (name, weights checksum and special tokens), the dimension, the
passage count and the corpus checksum. Loading checks all of them: an index built with another encoder or for
another corpus is refused rather than silently returning wrong passages. Encoding runs in shards written as they
finish, so an interrupted build resumes where it stopped; every file is written through a rename.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import faiss
import numpy as np
from tqdm.auto import tqdm

from multihop.corpus import Corpus
from multihop.paths import atomic_write_text, read_json

from .encoder import Encoder

MANIFEST = "manifest.json"
SHARD_SIZE = 256
EXACT_LIMIT = 100_000
KINDS = ("flat", "ivf", "hnsw")


class IndexMismatchError(ValueError):
    """A saved index does not match the encoder or corpus it is loaded with."""


def encode_corpus(
    corpus: Corpus,
    encoder: Encoder,
    work_dir: Path,
    shard_size: int = SHARD_SIZE,
    token_layers: tuple[int, ...] | None = None,
) -> tuple[np.ndarray, list[Path]]:
    """Encode the corpus in shards saved under ``work_dir``; shards already there (from an interrupted run of the same
    corpus, encoder and settings) are reused. With ``token_layers`` (``()`` for the last layer only), each shard also
    keeps the float16 token and ``[CLS]`` states for a :class:`~.token_cache.TokenCache`, from the same forward pass.
    Returns the pooled embeddings and the shard files."""
    work_dir.mkdir(parents=True, exist_ok=True)
    stamp = work_dir / "build.json"
    key = {"corpus": corpus.checksum(), "encoder": encoder.checksum(), "special_tokens": list(encoder.special_tokens),
           "pooling": encoder.pooling, "shard_size": shard_size,
           "token_layers": None if token_layers is None else list(token_layers)}
    if not stamp.exists() or json.loads(stamp.read_text()) != key:
        for old in work_dir.glob("shard-*.npz"):
            old.unlink()
        atomic_write_text(stamp, json.dumps(key))
    texts = corpus.texts()
    vectors, paths = [], []
    starts = range(0, len(texts), shard_size)
    for start in tqdm(starts, desc=f"encoding {len(texts)} passages", unit="shard", total=len(starts)):
        path = work_dir / f"shard-{start // shard_size:06d}.npz"
        if not path.exists():
            _write_shard(path, texts[start : start + shard_size], encoder, token_layers)
        vectors.append(np.load(path)["pooled"])
        paths.append(path)
    pooled = np.concatenate(vectors) if vectors else np.zeros((0, encoder.dimension), dtype=np.float32)
    return pooled, paths


def _write_shard(path: Path, texts: list[str], encoder: Encoder, token_layers: tuple[int, ...] | None) -> None:
    if token_layers is None:
        arrays = {"pooled": encoder.encode(texts)}
    else:
        states = encoder.states(texts, token_layers)
        arrays = {
            "pooled": states.pooled,
            "lengths": np.array([len(t) for t in states.tokens], dtype=np.int64),
            "tokens": np.concatenate(states.tokens).astype(np.float16),
            "cls": states.cls.astype(np.float16),
            **{f"layer_{layer}": np.concatenate(states.layer_tokens[layer]).astype(np.float16)
               for layer in token_layers},
        }
    tmp = path.with_name(f".{path.name}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


class FaissIndex:
    """Inner-product search over normalised vectors with one of :data:`KINDS`."""

    def __init__(self, index: faiss.Index, manifest: dict):
        self.index = index
        self.manifest = manifest
        self._apply_search_params()

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @classmethod
    def build(cls, vectors: np.ndarray, manifest: dict, kind: str = "auto", nprobe: int = 32) -> FaissIndex:
        count, dim = vectors.shape
        kind = ("flat" if count < EXACT_LIMIT else "ivf") if kind == "auto" else kind
        params: dict = {}
        if kind == "flat":
            index = faiss.IndexFlatIP(dim)
        elif kind == "ivf":
            nlist = max(1, min(int(4 * math.sqrt(count)), count // 39))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
            index.train(vectors)
            params = {"nlist": nlist, "nprobe": min(nprobe, nlist)}
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 64
            params = {"ef_search": 512}
        else:
            raise ValueError(f"unknown index kind {kind!r}; choose one of {', '.join(KINDS)} or auto")
        index.add(vectors)
        return cls(index, {**manifest, "kind": kind, "dimension": int(dim), "count": int(count), **params})

    def _apply_search_params(self) -> None:
        if self.kind == "ivf":
            faiss.extract_index_ivf(self.index).nprobe = self.manifest["nprobe"]
        elif self.kind == "hnsw":
            self.index.hnsw.efSearch = self.manifest["ef_search"]

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.index.ntotal)
        return self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)

    def save(self, directory: str | Path) -> None:
        """Write ``index.faiss`` and the manifest into ``directory`` (other files there are kept), through renames."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / ".index.faiss.tmp"
        faiss.write_index(self.index, str(tmp))
        os.replace(tmp, directory / "index.faiss")
        atomic_write_text(directory / MANIFEST, json.dumps(self.manifest, indent=2))

    @classmethod
    def load(cls, directory: str | Path, expect: dict | None = None) -> FaissIndex:
        """Load an index, refusing it when any key of ``expect`` differs from its manifest."""
        directory = Path(directory)
        manifest = read_manifest(directory, expect)
        index = faiss.read_index(str(directory / "index.faiss"))
        if index.ntotal != manifest["count"]:
            raise IndexMismatchError(
                f"{directory}: index holds {index.ntotal} vectors, manifest says {manifest['count']}"
            )
        return cls(index, manifest)


def read_manifest(directory: Path, expect: dict | None = None) -> dict:
    """A retriever folder's manifest, refused when any key of ``expect`` differs from it."""
    if not (directory / MANIFEST).exists():
        raise FileNotFoundError(f"{directory} holds no retriever ({MANIFEST} missing)")
    manifest = read_json(directory / MANIFEST)
    for key, value in (expect or {}).items():
        if manifest.get(key) != value:
            raise IndexMismatchError(
                f"{directory}: the index was built with {key}={manifest.get(key)!r}, not {value!r}; rebuild it"
            )
    return manifest

