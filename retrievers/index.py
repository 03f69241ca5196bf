"""FAISS inner-product indexes over normalised passage embeddings, saved with a manifest (docs/design.md, "Scale path").

An index is built from a ``faiss.index_factory`` string (``"HNSW32"``, ``"IVF4096,PQ64"``,
``"OPQ64,IVF65536_HNSW32,PQ64"``...), trained on a sample of at most :data:`TRAIN_SIZE` vectors when it needs
training; its search parameters (``nprobe``, ``efSearch``) are recorded and can be changed at query time, and a saved
index loads memory-mapped (``IO_FLAG_MMAP``) when asked. With faiss-gpu installed and a GPU present, the index is
trained and filled on the GPUs and saved as a CPU index. Three names are aliases of factory strings, as they were
built before: ``flat`` (exact, ``Flat``), ``ivf`` (``IVF<4·√N>,Flat``, ``nprobe`` of the inverted lists searched per
query) and ``hnsw`` (``HNSW32,Flat``, ``efConstruction`` 64, ``efSearch`` 512).
``auto`` picks ``flat`` below :data:`EXACT_LIMIT` passages and ``ivf`` above. The trade-off: ``flat`` costs
``O(N·d)`` per query; ``ivf`` scans about ``nprobe/nlist`` of the corpus (``nprobe=32`` of ~4,000 lists at 1M
passages: ~1% of the work) and loses the neighbours that fall in unprobed lists (raise ``nprobe`` for recall);
``hnsw`` answers in roughly logarithmic time at the price of ~2× memory and a slower build, and its recall rests on
``efSearch`` (measured on 100k clustered 768-d vectors, 2 cores: efSearch 128 → 84% recall@10, 256 → 93%,
512 → 99.5% at 1.9 ms against 36 ms for ``flat``). ``benchmarks/retrieval.py`` prints recall against ``flat``,
build time and latency of each kind.

The manifest records the index kind, its factory string and search parameters, the encoder (name, weights checksum,
special tokens and, for a Hugging Face Hub model, the commit it resolved to), the dimension, the passage count and
the corpus checksum. Loading checks all of them: an index built with another encoder or for another corpus is refused
rather than silently returning wrong passages. Encoding runs in shards written as they finish, so an interrupted
build resumes where it stopped; every file is written through a rename.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
from tqdm.auto import tqdm

from multihop.data.corpus import Corpus
from multihop.data.paths import atomic_write_text, read_json

from .encoder import POOLINGS, Encoder

MANIFEST = "manifest.json"
SHARD_SIZE = 256
EXACT_LIMIT = 100_000
KINDS = ("flat", "ivf", "hnsw")  # aliases of factory strings (:func:`factory_string`)
TRAIN_SIZE = 256 * 1024  # vectors an index that needs training (IVF, PQ, OPQ) is trained on at most


class IndexMismatchError(ValueError):
    """A saved index does not match the encoder or corpus it is loaded with."""


@dataclass
class CorpusEncoding:
    """A corpus encoded once (:func:`encode_corpus`): the shard files, from which every pooling's vectors and the
    token states are read."""

    shards: list[Path]
    dimension: int
    num_layers: int

    @property
    def truncated(self) -> int:
        """Passages longer than the encoder's limit, cut when they were encoded."""
        return sum(int(np.load(path)["truncated"]) for path in self.shards)

    def vectors(self, pooling: str) -> np.ndarray:
        """The passages' embeddings pooled by ``pooling`` (``mean`` or ``cls``), in corpus order."""
        parts = [np.load(path)[f"pooled_{pooling}"] for path in self.shards]
        return np.concatenate(parts) if parts else np.zeros((0, self.dimension), dtype=np.float32)


def encode_corpus(
    corpus: Corpus,
    encoder: Encoder,
    work_dir: Path,
    shard_size: int = SHARD_SIZE,
    token_layers: tuple[int, ...] | None = None,
    token_dtype: str = "float16",
    progress: bool = True,
) -> CorpusEncoding:
    """Encode the corpus in shards saved under ``work_dir``, one forward pass a passage
    (:meth:`~.encoder.Encoder.passage_states`) giving its mean- and ``[CLS]``-pooled embeddings and, with
    ``token_layers`` (``()`` for the last layer only), the token and ``[CLS]`` states (as ``token_dtype``: float16,
    or float32 for a ``full`` cache) a :class:`~.token_cache.TokenCache` is written from. Shards already there (from
    an interrupted run of the same corpus, encoder and settings) are reused. With ``progress``, a bar on stderr counts
    the passages encoded and the time left (measured from the shards encoded by this call)."""
    prepare_shards(corpus, encoder, work_dir, shard_size, token_layers, token_dtype)
    texts = corpus.texts()
    starts = range(0, len(texts), shard_size)
    todo = [start for start in starts if not shard_path(work_dir, start // shard_size).exists()]
    left = sum(len(texts[start : start + shard_size]) for start in todo)
    with tqdm(total=len(texts), initial=len(texts) - left, desc=f"encoding passages by {Path(encoder.name).name}",
              unit="passage", disable=not progress, file=sys.stderr) as bar:
        for start in todo:
            shard = texts[start : start + shard_size]
            write_shard(shard_path(work_dir, start // shard_size), shard, encoder, token_layers, np.dtype(token_dtype))
            bar.update(len(shard))
    paths = [shard_path(work_dir, start // shard_size) for start in starts]
    return CorpusEncoding(paths, encoder.dimension, encoder.num_layers)


def prepare_shards(corpus: Corpus, encoder: Encoder, work_dir: Path, shard_size: int,
                   token_layers: tuple[int, ...] | None, token_dtype: str) -> None:
    """Make ``work_dir`` ready for this encoding: its stamp records the corpus, encoder and settings, and shards of
    another encoding found there are removed."""
    work_dir.mkdir(parents=True, exist_ok=True)
    stamp = work_dir / "build.json"
    key = {"corpus": corpus.checksum(), "encoder": encoder.checksum(), "special_tokens": list(encoder.special_tokens),
           "shard_size": shard_size, "token_layers": None if token_layers is None else list(token_layers),
           "token_dtype": token_dtype, "precision": encoder.precision}  # the batch size moves floats by rounding only
    if not stamp.exists() or json.loads(stamp.read_text()) != key:
        for old in work_dir.glob("shard-*.npz"):
            old.unlink()
        atomic_write_text(stamp, json.dumps(key))


def shard_path(work_dir: Path, number: int) -> Path:
    return work_dir / f"shard-{number:06d}.npz"


def write_shard(path: Path, texts: list[str], encoder: Encoder, token_layers: tuple[int, ...] | None,
                dtype: np.dtype) -> None:
    """Encode ``texts`` (one pass, :meth:`~.encoder.Encoder.passage_states`) into the shard file ``path``, written
    through a rename."""
    before = encoder.truncated
    states = encoder.passage_states(texts, token_layers)
    arrays = {f"pooled_{pooling}": states.pooled_by(pooling) for pooling in POOLINGS}
    arrays["truncated"] = np.array(encoder.truncated - before)
    if token_layers is not None:
        arrays.update({
            "lengths": np.array([len(t) for t in states.tokens], dtype=np.int64),
            "tokens": np.concatenate(states.tokens).astype(dtype),
            "cls": states.cls.astype(dtype),
            **{f"layer_{layer}": np.concatenate(states.layer_tokens[layer]).astype(dtype)
               for layer in token_layers},
        })
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

    def __getstate__(self) -> dict:
        """Pickled (DSPy's ``save_program=True``) as the bytes of ``faiss.serialize_index`` (a memory-mapped index is
        read whole; one on the GPUs is copied to the CPU first) and the manifest."""
        index = self.index
        if hasattr(faiss, "index_gpu_to_cpu") and "Gpu" in type(index).__name__:
            index = faiss.index_gpu_to_cpu(index)
        return {"index": faiss.serialize_index(index), "manifest": self.manifest}

    def __setstate__(self, state: dict) -> None:
        self.index, self.manifest = faiss.deserialize_index(state["index"]), state["manifest"]
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
        index = checked_factory(kind, count, dim)
        if kind == "hnsw":
            faiss.downcast_index(index).hnsw.efConstruction = 64
        _no_polysemous_training(index)
        built = _on_gpus(index)  # training and adding are the costly part: on the GPUs when faiss-gpu has them
        if not built.is_trained:
            rows = np.random.default_rng(seed).permutation(count)[:train_size] if count > train_size else slice(None)
            built.train(np.ascontiguousarray(vectors[rows]))
        built.add(vectors)
        index = faiss.index_gpu_to_cpu(built) if built is not index else index
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


def checked_factory(kind: str, count: int, dim: int) -> faiss.Index:
    """The empty index ``kind`` makes for ``count`` vectors of ``dim`` dimensions, checked before any passage is
    encoded: a string FAISS cannot parse, an IVF with more lists than ``count`` trains (FAISS asks at least 39
    training vectors a list) or a product quantiser with more centroids a sub-quantiser than there are vectors is a
    ``ValueError`` saying what fits."""
    kind = ("flat" if count < EXACT_LIMIT else "ivf") if kind == "auto" else kind
    factory, _ = factory_string(kind, count)
    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise ValueError(f"--index {kind!r} is neither one of {', '.join(KINDS)} nor a FAISS factory string "
                         f"(faiss: {str(exc).strip().splitlines()[-1][:160]}); e.g. Flat, HNSW32, IVF64,Flat or "
                         "auto") from None
    trained = min(count, TRAIN_SIZE)
    try:
        lists = faiss.extract_index_ivf(index).nlist
    except RuntimeError:  # no IVF
        lists = None
    if lists is not None and trained < 39 * lists:
        largest = trained // 39
        fits = f"at most IVF{largest} for these {count} passages" if largest else "no IVF at all (Flat or HNSW32)"
        raise ValueError(f"--index {kind}: an IVF with {lists} lists trains on at least {39 * lists} vectors and "
                         f"this corpus gives {trained}; use {fits}, or --index auto")
    quantiser = getattr(faiss.downcast_index(index if lists is None else faiss.extract_index_ivf(index)), "pq", None)
    if quantiser is not None and trained < quantiser.ksub:
        bits = max(1, trained.bit_length() - 1)
        raise ValueError(f"--index {kind}: its product quantiser learns {quantiser.ksub} centroids a sub-quantiser "
                         f"from {trained} vectors; use at most {bits} bits (PQ{quantiser.M}x{bits}), or --index auto")
    return index


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


def _on_gpus(index: faiss.Index) -> faiss.Index:
    """``index`` copied onto every GPU when faiss-gpu is installed and sees one, else ``index`` itself; a kind with no
    GPU implementation (HNSW) stays on the CPU. Not run here: no GPU was lent to the sessions that wrote it."""
    if not hasattr(faiss, "index_cpu_to_all_gpus") or faiss.get_num_gpus() == 0:
        return index
    try:
        return faiss.index_cpu_to_all_gpus(index)
    except RuntimeError:
        return index


def _no_polysemous_training(index: faiss.Index) -> None:
    """Skip the polysemous training FAISS gives a PQ by default (~15× the training time, measured on 20k 768-d
    vectors): it orders codes for Hamming-distance filtering, which an inner-product search never uses."""
    try:
        inner = faiss.downcast_index(faiss.extract_index_ivf(index))
    except RuntimeError:  # not an IVF: the PQ, if any, is the index itself
        inner = faiss.downcast_index(index)
    if hasattr(inner, "do_polysemous_training"):
        inner.do_polysemous_training = False


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

