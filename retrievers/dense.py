"""The dense retriever as a DSPy module (DESIGN.md, "The contract every program keeps"; CoopRAG §3.3).

``DenseRetriever`` holds a corpus, an :class:`~.encoder.Encoder`, a :class:`~.index.FaissIndex` and, optionally, a
:class:`~.token_cache.TokenCache` for reranking. It has no predictors, so optimizers leave it alone, and
``forward(query, k)`` returns ``Hits(passages, ids, scores)`` — ``passages`` rendered as ``title: text``; a list of
queries returns one per query. :meth:`DenseRetriever.search_vectors` searches with query vectors already encoded,
so a reranker on the same encoder can take the search vector and its token states from one forward pass.

The manifest records the encoder's special tokens and pooling: a saved index loads its query encoder with the ones it
was built with, and refuses an encoder handed in with other ones (an index from before pooling was recorded pooled by
mean).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

import numpy as np

from multihop.corpus import Corpus
from multihop.data import load_corpus
from multihop.folders import locked, verify_inventory, write_inventory
from multihop.paths import atomic_dir, home

from .encoder import Encoder
from .index import FaissIndex, IndexMismatchError, encode_corpus, read_manifest
from .module import RetrieverModule
from .query import Hits, hits_prediction
from .token_cache import TokenCache

logger = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
TOKENS_DIR = "tokens"


class DenseRetriever(RetrieverModule):
    kind = "dense"

    def __init__(self, corpus: Corpus, encoder: Encoder, index: FaissIndex, k: int = 5,
                 tokens: TokenCache | None = None):
        super().__init__()
        self.corpus, self.encoder, self.index, self.k, self.tokens = corpus, encoder, index, k, tokens

    @classmethod
    def build(
        cls,
        corpus: Corpus,
        encoder: str | Encoder = "mpnet",
        k: int = 5,
        work_dir: str | Path | None = None,
        kind: str = "auto",
        token_layers: tuple[int, ...] | None = None,
    ) -> DenseRetriever:
        """Encode ``corpus`` (in resumable shards under ``work_dir``, default ``MULTIHOP_HOME/shards/...``) and index
        it. With ``token_layers`` (``()``: last layer only) the token states for RaLa are kept too, from the same
        forward pass."""
        if len(corpus) == 0:
            raise ValueError("cannot build an index over an empty corpus")
        encoder = encoder if isinstance(encoder, Encoder) else Encoder(encoder)
        name = Path(encoder.name).name + ("" if encoder.pooling == "mean" else f"-{encoder.pooling}")
        work = Path(work_dir) if work_dir else home() / "shards" / f"{name}-{corpus.checksum()[:16]}"
        vectors, shards = encode_corpus(corpus, encoder, work, token_layers=token_layers)
        manifest = {"retriever": cls.kind, "encoder": encoder.name, "encoder_sha256": encoder.checksum(),
                    "special_tokens": list(encoder.special_tokens), "pooling": encoder.pooling,
                    "corpus_sha256": corpus.checksum(),
                    "truncated": encoder.truncated}
        tokens = None
        if token_layers is not None:
            tokens = TokenCache.write(work / TOKENS_DIR, shards, encoder.num_layers, tuple(token_layers))
        return cls(corpus, encoder, FaissIndex.build(vectors, manifest, kind=kind), k=k, tokens=tokens)

    @classmethod
    def build_cached(cls, corpus: Corpus, encoder: str = "mpnet", token_layers: tuple[int, ...] | None = None,
                     kind: str = "auto", special_tokens: tuple[str, ...] = (), pooling: str = "mean") -> Path:
        """The folder of ``corpus``'s index under ``MULTIHOP_HOME/indexes``, built (resumably) on first use. The
        build encodes into shards of its own (``MULTIHOP_HOME/shards/<index name>``), which an interrupted build
        resumes from and a finished one removes: the index folder holds the only copy of the vectors and token
        states."""
        suffix = "" if pooling == "mean" else f"-{pooling}"
        suffix += "" if token_layers is None else "-tokens" + "".join(f"-{layer}" for layer in token_layers)
        if special_tokens:
            suffix += "-special-" + hashlib.sha256("\n".join(special_tokens).encode()).hexdigest()[:8]
        target = home() / "indexes" / f"{Path(encoder).name}-{kind}-{corpus.checksum()[:16]}{suffix}"
        with locked(target, file=True, wait=True):  # two runs needing the same index: one builds, the other waits
            if not (target / "manifest.json").exists():
                built = Encoder(encoder, special_tokens=special_tokens, pooling=pooling)
                work = home() / "shards" / target.name
                cls.build(corpus, encoder=built, work_dir=work, kind=kind, token_layers=token_layers).save(target)
                shutil.rmtree(work, ignore_errors=True)
        return target

    def save(self, directory: str | Path) -> None:
        """Save the index, its manifest, the corpus it covers and the token cache into ``directory`` (atomically)."""
        with atomic_dir(Path(directory)) as tmp:
            self.index.save(tmp)
            self.corpus.save(tmp / CORPUS_FILE)
            if self.tokens is not None:
                shutil.copytree(self.tokens.directory, tmp / TOKENS_DIR)
            write_inventory(tmp)

    @classmethod
    def load(cls, directory: str | Path, encoder: str | Encoder | None = None, corpus: Corpus | None = None,
             k: int = 5, mmap: bool = False) -> DenseRetriever:
        """Load a saved retriever. A given ``encoder`` or ``corpus`` must match the manifest, else it is refused; an
        encoder given by name gets the special tokens the index was built with. ``mmap`` maps the FAISS index instead
        of reading it (an index larger than the memory)."""
        directory = Path(directory)
        verify_inventory(directory)
        corpus = corpus or load_corpus(directory / CORPUS_FILE)
        manifest = read_manifest(directory)
        if "special_tokens" not in manifest:
            logger.warning("%s was built before indexes recorded their encoder's special tokens (every encoder then "
                           "added the unrolling markers); it loads with none: rebuild it with `--markers "
                           "PROGRAM` if the queries carry markers", directory)
        special_tokens, pooling = manifest.get("special_tokens", []), manifest.get("pooling", "mean")
        if not isinstance(encoder, Encoder):
            encoder = Encoder(encoder or manifest["encoder"], special_tokens=special_tokens, pooling=pooling)
        if list(encoder.special_tokens) != special_tokens:
            raise IndexMismatchError(f"{directory}: the index was built with special tokens {special_tokens}, the "
                                     f"encoder has {list(encoder.special_tokens)}")
        if encoder.pooling != pooling:
            raise IndexMismatchError(f"{directory}: the index was built with {pooling} pooling, the encoder pools by "
                                     f"{encoder.pooling}")
        index = FaissIndex.load(
            directory,
            expect={"encoder_sha256": encoder.checksum(), "corpus_sha256": corpus.checksum(), "count": len(corpus)},
            mmap=mmap,
        )
        tokens = TokenCache(directory / TOKENS_DIR) if (directory / TOKENS_DIR).exists() else None
        if tokens is not None and len(tokens) != len(corpus):
            raise ValueError(f"{directory}: the token cache covers {len(tokens)} passages, the corpus {len(corpus)}")
        return cls(corpus, encoder, index, k=k, tokens=tokens)

    def search(self, queries: list[str], k: int) -> list[Hits]:
        return self.search_vectors(self.encoder.encode(queries), k)

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[Hits]:
        """One prediction per query vector (already encoded with this retriever's encoder)."""
        scores, rows = self.index.search(vectors, k)
        return [hits_prediction(self.corpus, row, score) for row, score in zip(rows, scores, strict=True)]
