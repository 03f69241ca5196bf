"""The dense retriever as a DSPy module (DESIGN.md, "The contract every program keeps"; CoopRAG §3.3).

``DenseRetriever`` holds a corpus, an :class:`~.encoder.Encoder`, a :class:`~.index.FaissIndex` and, optionally, a
:class:`~.token_cache.TokenCache` for reranking. It has no predictors, so optimizers leave it alone, and
``forward(query, k)`` returns ``dspy.Prediction(passages, ids, scores)`` — ``passages`` rendered as ``title: text``.
A list of queries returns one such prediction per query.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dspy
import numpy as np

from multihop.corpus import Corpus
from multihop.data import load_corpus
from multihop.paths import atomic_dir, home

from .encoder import Encoder
from .index import FaissIndex, encode_corpus, read_manifest
from .module import RetrieverModule
from .query import check_queries, hits_prediction
from .token_cache import TokenCache

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
        work = Path(work_dir) if work_dir else home() / "shards" / f"{Path(encoder.name).name}-{corpus.checksum()[:16]}"
        vectors, shards = encode_corpus(corpus, encoder, work, token_layers=token_layers)
        manifest = {"retriever": cls.kind, "encoder": encoder.name, "encoder_sha256": encoder.checksum(),
                    "corpus_sha256": corpus.checksum(), "truncated": encoder.truncated}
        tokens = None
        if token_layers is not None:
            tokens = TokenCache.write(work / TOKENS_DIR, shards, encoder.num_layers, tuple(token_layers))
        return cls(corpus, encoder, FaissIndex.build(vectors, manifest, kind=kind), k=k, tokens=tokens)

    @classmethod
    def build_cached(cls, corpus: Corpus, encoder: str = "mpnet", token_layers: tuple[int, ...] | None = None,
                     kind: str = "auto") -> Path:
        """The folder of ``corpus``'s index under ``MULTIHOP_HOME/indexes``, built (resumably) on first use."""
        suffix = "" if token_layers is None else "-tokens" + "".join(f"-{layer}" for layer in token_layers)
        target = home() / "indexes" / f"{Path(encoder).name}-{kind}-{corpus.checksum()[:16]}{suffix}"
        if not (target / "manifest.json").exists():
            cls.build(corpus, encoder=encoder, kind=kind, token_layers=token_layers).save(target)
        return target

    def save(self, directory: str | Path) -> None:
        """Save the index, its manifest, the corpus it covers and the token cache into ``directory`` (atomically)."""
        with atomic_dir(Path(directory)) as tmp:
            self.index.save(tmp)
            self.corpus.save(tmp / CORPUS_FILE)
            if self.tokens is not None:
                shutil.copytree(self.tokens.directory, tmp / TOKENS_DIR)

    @classmethod
    def load(cls, directory: str | Path, encoder: str | Encoder | None = None, corpus: Corpus | None = None,
             k: int = 5) -> DenseRetriever:
        """Load a saved retriever. A given ``encoder`` or ``corpus`` must match the manifest, else it is refused."""
        directory = Path(directory)
        corpus = corpus or load_corpus(directory / CORPUS_FILE)
        manifest = read_manifest(directory)
        encoder = encoder if isinstance(encoder, Encoder) else Encoder(encoder or manifest["encoder"])
        index = FaissIndex.load(
            directory,
            expect={"encoder_sha256": encoder.checksum(), "corpus_sha256": corpus.checksum(), "count": len(corpus)},
        )
        tokens = TokenCache(directory / TOKENS_DIR) if (directory / TOKENS_DIR).exists() else None
        if tokens is not None and len(tokens) != len(corpus):
            raise ValueError(f"{directory}: the token cache covers {len(tokens)} passages, the corpus {len(corpus)}")
        return cls(corpus, encoder, index, k=k, tokens=tokens)

    def forward(self, query: str | list[str], k: int | None = None):
        queries = check_queries(query)
        predictions = self.search(self.encoder.encode(queries), k or self.k)
        return predictions[0] if isinstance(query, str) else predictions

    def search(self, vectors: np.ndarray, k: int) -> list[dspy.Prediction]:
        """One prediction per query vector (already encoded with this retriever's encoder)."""
        scores, rows = self.index.search(vectors, k)
        return [hits_prediction(self.corpus, row, score) for row, score in zip(rows, scores, strict=True)]
