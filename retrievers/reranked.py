"""A first stage and an optional reranker as one retriever (CoopRAG §3.3–3.4, Fig. 1 (2)–(3)).

``RerankedRetriever(first_stage, reranker, n=20, k=5)`` takes the first stage's top ``n`` (dense, BM25, hybrid or any
retriever module) and reranks them to the top ``k`` with any :class:`~.rerankers.Reranker` — RaLa, MaxSim, or a
method's own. A reranker that can draw on its first stage is bound to it when the retriever is built (for the
late-interaction rerankers: the first stage's encoder and token cache, see :mod:`.late_interaction`). When a dense
first stage and a late-interaction reranker share one encoder, one forward pass of the query gives both the search
vector and the token states the reranker reads. The prediction also lists the first stage's ``candidates``; the rerank
is a step of its own in a program's trace (:class:`~.rerankers.RerankStep`).
"""

from __future__ import annotations

import json
from pathlib import Path

import dspy

from multihop.data.folders import write_inventory
from multihop.data.paths import atomic_dir, atomic_write_text

from .dense import DenseRetriever
from .index import MANIFEST, read_manifest
from .late_interaction import LateInteraction
from .module import RetrieverModule, describe_index, load_retriever
from .query import Hits
from .rerankers import Reranker, RerankStep, load_reranker


class RerankedRetriever(RetrieverModule):
    """A first stage's top ``n`` reranked to the top ``k`` (no reranker: the first stage's top ``k``); saved as the
    kind ``"reranked"``: its first stage under ``first_stage/``, the reranker's config, ``n`` and ``k`` in the
    manifest."""

    kind = "reranked"

    def __init__(self, first_stage: dspy.Module, reranker: Reranker | None = None, n: int = 20, k: int = 5):
        super().__init__()
        if reranker is not None and n < k:
            raise ValueError(f"the first stage must return at least k passages (n={n} < k={k})")
        if hasattr(reranker, "bind"):
            reranker = reranker.bind(first_stage)
        self.first_stage, self.reranker, self.n, self.k = first_stage, reranker, n, k
        self.rerank = RerankStep(reranker) if reranker is not None else None
        self.corpus = getattr(first_stage, "corpus", None)

    @property
    def encodes_once(self) -> bool:
        """Whether the query's search vector and its token states for the reranker come from one forward pass."""
        return (isinstance(self.first_stage, DenseRetriever) and isinstance(self.reranker, LateInteraction)
                and self.reranker.encoder is self.first_stage.encoder)

    def search(self, queries: list[str], k: int) -> list[Hits]:
        if self.reranker is None:
            return self.first_searches(queries, k)
        if self.encodes_once:
            states = self.first_stage.encoder.states(queries)
            firsts = self.first_stage.search_vectors(states.pooled, self.n)
            return [self.rerank(query, first, k, query_tokens=tokens)
                    for query, first, tokens in zip(queries, firsts, states.tokens, strict=True)]
        firsts = self.first_searches(queries, self.n)
        return [self.rerank(query, first, k) for query, first in zip(queries, firsts, strict=True)]

    def first_searches(self, queries: list[str], k: int) -> list[dspy.Prediction]:
        """The first stage's top ``k`` of each query: batched for a multihop retriever, one call per query for any
        other retriever module (a DSPy one returning ``passages`` and ``ids``)."""
        if isinstance(self.first_stage, RetrieverModule):
            return self.first_stage.search(queries, k)
        return [self.first_stage(query, k=k) for query in queries]

    def save(self, directory: str | Path) -> None:
        """Save the first stage under ``first_stage/`` and the reranker's config in the manifest."""
        with atomic_dir(Path(directory)) as tmp:
            self.first_stage.save(tmp / "first_stage")
            manifest = {"retriever": self.kind, "n": self.n, "k": self.k,
                        "reranker": self.reranker.config() if self.reranker else None}
            atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=2))
            write_inventory(tmp)

    @classmethod
    def describe(cls, directory: Path) -> dict:
        """Its first stage's description, with the reranker's registry name."""
        reranker = read_manifest(directory)["reranker"]
        return {**describe_index(directory / "first_stage"), "reranker": reranker["reranker"] if reranker else None}

    @classmethod
    def load(cls, directory: str | Path, k: int | None = None) -> RerankedRetriever:
        directory = Path(directory)
        manifest = read_manifest(directory, {"retriever": cls.kind})
        reranker = load_reranker(manifest["reranker"]) if manifest["reranker"] else None
        return cls(load_retriever(directory / "first_stage"), reranker, n=manifest["n"], k=k or manifest["k"])
