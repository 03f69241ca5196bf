"""The retriever every program uses: a first stage and an optional reranker (CoopRAG §3.3–3.4, Fig. 1 (2)–(3)).

``Retriever(first_stage, reranker=RaLa(...), n=20, k=5)`` takes the first stage's top ``n`` (dense, BM25 or hybrid)
and reranks them to the top ``k``. With a dense first stage on the reranker's encoder, one forward pass of the
query gives both the search vector and the token states. Document states come from the first stage's token cache
when it has the layers the score needs (``cache=True``), otherwise they are recomputed for the ``n`` candidates;
both give the same scores up to float16 rounding. The prediction also lists the first stage's ``candidates``.
"""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import numpy as np

from multihop.paths import atomic_dir, atomic_write_text

from .encoder import Encoder
from .index import MANIFEST, read_manifest
from .module import RetrieverModule
from .query import check_queries, hits_prediction
from .rala import RaLa


class Retriever(RetrieverModule):
    kind = "reranked"

    def __init__(self, first_stage: dspy.Module, reranker: RaLa | None = None, n: int = 20, k: int = 5,
                 encoder: str | Encoder | None = None, cache: bool = True):
        super().__init__()
        if reranker is not None and n < k:
            raise ValueError(f"the first stage must return at least k passages (n={n} < k={k})")
        self.first_stage, self.reranker, self.n, self.k, self.cache = first_stage, reranker, n, k, cache
        self.corpus = first_stage.corpus
        own = getattr(first_stage, "encoder", None)
        if encoder is None or (own is not None and encoder in (own.name, own)):
            encoder = own or ("mpnet" if reranker is not None else None)
        self.encoder = Encoder(encoder) if isinstance(encoder, str) else encoder
        self._shares_encoder = own is not None and own is self.encoder

    def forward(self, query: str | list[str], k: int | None = None):
        queries = check_queries(query)
        k = k or self.k
        if self.reranker is None:
            return self.first_stage(query, k=k)
        states = self.encoder.states(queries)
        if self._shares_encoder and hasattr(self.first_stage, "search"):
            firsts = self.first_stage.search(states.pooled, self.n)
        else:
            firsts = self.first_stage(queries, k=self.n)
        results = [self.rerank(tokens, first, k) for tokens, first in zip(states.tokens, firsts, strict=True)]
        return results[0] if isinstance(query, str) else results

    def rerank(self, query_tokens: np.ndarray, first: dspy.Prediction, k: int) -> dspy.Prediction:
        """Rerank one first-stage prediction given the query's last-layer token states."""
        rows = [self.corpus.row(pid) for pid in first.ids]
        if not rows:
            return hits_prediction(self.corpus, [], [], candidates=[])
        tokens, cls, layer_tokens = self.document_states(rows, first.passages)
        scores = self.reranker.score(query_tokens, tokens, cls, layer_tokens)
        order = np.argsort(-scores, kind="stable")[:k]
        return hits_prediction(self.corpus, [rows[i] for i in order], scores[order], candidates=list(first.ids))

    def document_states(self, rows: list[int], texts: list[str]):
        layers = self.reranker.token_layers(self.encoder.num_layers)
        cache = getattr(self.first_stage, "tokens", None) if self._shares_encoder and self.cache else None
        if cache is not None and set(layers) <= set(cache.layers):
            return cache.get(rows, layers)
        states = self.encoder.states(texts, layers)
        return states.tokens, states.cls, states.layer_tokens

    def save(self, directory: str | Path) -> None:
        """Save the first stage under ``first_stage/`` and the reranker settings in the manifest."""
        with atomic_dir(Path(directory)) as tmp:
            self.first_stage.save(tmp / "first_stage")
            manifest = {"retriever": self.kind, "n": self.n, "k": self.k, "cache": self.cache,
                        "reranker": self.reranker.config() if self.reranker else None,
                        "encoder": self.encoder and self.encoder.name,
                        "encoder_sha256": self.encoder and self.encoder.checksum()}
            atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=2))

    @classmethod
    def load(cls, directory: str | Path, k: int | None = None) -> Retriever:
        from .storage import load_retriever

        directory = Path(directory)
        manifest = read_manifest(directory, {"retriever": cls.kind})
        encoder = Encoder(manifest["encoder"]) if manifest["encoder"] else None
        if encoder is not None:
            read_manifest(directory, {"encoder_sha256": encoder.checksum()})
        reranker = RaLa(**manifest["reranker"]) if manifest["reranker"] else None
        return cls(load_retriever(directory / "first_stage"), reranker, n=manifest["n"], k=k or manifest["k"],
                   encoder=encoder, cache=manifest["cache"])
