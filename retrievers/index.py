"""FAISS inner-product indexes over normalised passage embeddings, saved with a manifest (DESIGN.md, "Scale path").

An index is built from a ``faiss.index_factory`` string (``"HNSW32"``, ``"IVF4096,PQ64"``,
``"OPQ64,IVF65536_HNSW32,PQ64"``...), trained on a sample of at most :data:`TRAIN_SIZE` vectors when it needs
training; its search parameters (``nprobe``, ``efSearch``) are recorded and can be changed at query time, and a saved
index loads memory-mapped (``IO_FLAG_MMAP``) when asked. Three names are aliases of factory strings, as they were
built before: ``flat`` (exact, ``Flat``), ``ivf`` (``IVF<4·√N>,Flat``, ``nprobe`` of the inverted lists searched per
query) and ``hnsw`` (``HNSW32,Flat``, ``efConstruction`` 64, ``efSearch`` 512).
``auto`` picks ``flat`` below :data:`EXACT_LIMIT` passages and ``ivf`` above. The trade-off: ``flat`` costs
``O(N·d)`` per query; ``ivf`` scans about ``nprobe/nlist`` of the corpus (``nprobe=32`` of ~4,000 lists at 1M
passages: ~1% of the work) and loses the neighbours that fall in unprobed lists (raise ``nprobe`` for recall);
``hnsw`` answers in roughly logarithmic time at the price of ~2× memory and a slower build, and its recall rests on
``efSearch`` (measured on 100k clustered 768-d vectors, 2 cores: efSearch 128 → 84% recall@10, 256 → 93%,
512 → 99.5% at 1.9 ms against 36 ms for ``flat``). ``benchmarks/retrieval.py`` prints recall against ``flat``,
build time and latency of each kind.

The manifest records the index kind, its factory string and search parameters, the encoder (name, weights checksum
and special tokens), the dimension, the passage count and the corpus checksum. Loading checks all of them: an index
built with another encoder or for another corpus is refused rather than silently returning wrong passages. Encoding
runs in shards written as they finish, so an interrupted build resumes where it stopped; every file is written
through a rename.
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
KINDS = ("flat", "ivf", "hnsw")  # aliases of factory strings (:func:`factory_string`)
TRAIN_SIZE = 256 * 1024  # vectors an index that needs training (IVF, PQ, OPQ) is trained on at most


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
    """Inner-product search over normalised vectors, built from one of :data:`KINDS` or any ``faiss.index_factory``
    string (``"HNSW32"``, ``"IVF4096,PQ64"``, ``"OPQ64,IVF65536_HNSW32,PQ64"``...). The search parameters
    (``nprobe``, ``efSearch``, any name ``faiss.ParameterSpace`` sets) are the manifest's ``search``, changed at query
    time with :meth:`set_search`."""

    def __init__(self, index: faiss.Index, manifest: dict):
        self.index = index
        self.manifest = manifest
        self._apply_search_params()

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @classmethod
    def build(cls, vectors: np.ndarray, manifest: dict, kind: str = "auto", nprobe: int = 32,
              train_size: int = TRAIN_SIZE, seed: int = 0) -> FaissIndex:
        """Index ``vectors`` as ``kind``: ``auto`` (``flat`` below :data:`EXACT_LIMIT` vectors, ``ivf`` above), an
        alias of :data:`KINDS`, or a factory string; an index that needs training is trained on at most
        ``train_size`` vectors drawn with ``seed``. The manifest records the kind, the factory string and the
        search parameters."""
        count, dim = vectors.shape
        kind = ("flat" if count < EXACT_LIMIT else "ivf") if kind == "auto" else kind
        factory, search = factory_string(kind, count, nprobe)
        try:
            index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as exc:
            raise ValueError(f"--index {kind!r} is neither one of {', '.join(KINDS)} nor a FAISS factory string "
                             f"(faiss: {str(exc).strip().splitlines()[-1][:160]})") from None
        if kind == "hnsw":
            faiss.downcast_index(index).hnsw.efConstruction = 64
        if not index.is_trained:
            rows = np.random.default_rng(seed).permutation(count)[:train_size] if count > train_size else slice(None)
            index.train(np.ascontiguousarray(vectors[rows]))
        index.add(vectors)
        search = {name: value for name, value in search.items() if _set_parameter(index, name, value)}
        return cls(index, {**manifest, "kind": kind, "factory": factory, "search": search, "dimension": int(dim),
                           "count": int(count)})

    def set_search(self, **params) -> None:
        """Change search parameters (``nprobe=64``, ``efSearch=256``) for the queries to come."""
        unknown = [name for name, value in params.items() if not _set_parameter(self.index, name, value)]
        if unknown:
            raise ValueError(f"a {self.manifest.get('factory', self.kind)} index has no search parameter "
                             f"{', '.join(unknown)}")
        self.manifest = {**self.manifest, "search": {**self.search_params(), **params}}
        self._apply_search_params()

    def search_params(self) -> dict:
        """The search parameters in force (an index saved before factory strings: its ``nprobe``/``ef_search``)."""
        if "search" in self.manifest:
            return dict(self.manifest["search"])
        legacy = {"nprobe": self.manifest.get("nprobe"), "efSearch": self.manifest.get("ef_search")}
        return {name: value for name, value in legacy.items() if value is not None}

    def _apply_search_params(self) -> None:
        for name, value in self.search_params().items():
            _set_parameter(self.index, name, value)

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
    def load(cls, directory: str | Path, expect: dict | None = None, mmap: bool = False) -> FaissIndex:
        """Load an index, refusing it when any key of ``expect`` differs from its manifest; ``mmap`` maps its file
        instead of reading it (``IO_FLAG_MMAP``: an index larger than the memory, its pages read as searched)."""
        directory = Path(directory)
        manifest = read_manifest(directory, expect)
        index = faiss.read_index(str(directory / "index.faiss"), faiss.IO_FLAG_MMAP if mmap else 0)
        if index.ntotal != manifest["count"]:
            raise IndexMismatchError(
                f"{directory}: index holds {index.ntotal} vectors, manifest says {manifest['count']}"
            )
        return cls(index, manifest)


def factory_string(kind: str, count: int, nprobe: int = 32) -> tuple[str, dict]:
    """The ``faiss.index_factory`` string of an index kind and its default search parameters: the aliases of
    :data:`KINDS` as they were built before factory strings (``ivf``: ``4·√N`` lists, at least 39 vectors a list;
    ``hnsw``: 32 links, ``efSearch`` 512), any other string as it is (``nprobe`` for an IVF, ``efSearch`` 512 for
    an HNSW)."""
    if kind == "flat":
        return "Flat", {}
    if kind == "ivf":
        nlist = max(1, min(int(4 * math.sqrt(count)), count // 39))
        return f"IVF{nlist},Flat", {"nprobe": min(nprobe, nlist)}
    if kind == "hnsw":
        return "HNSW32,Flat", {"efSearch": 512}
    return kind, {"nprobe": nprobe, "efSearch": 512}


def _set_parameter(index: faiss.Index, name: str, value) -> bool:
    """Set the search parameter ``name`` of ``index`` (through ``faiss.ParameterSpace``, which finds it inside
    wrappers: an IVF's ``nprobe``, an HNSW's ``efSearch``); False when the index has no such parameter."""
    try:
        faiss.ParameterSpace().set_index_parameter(index, name, value)
    except RuntimeError:
        return False
    return True


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

