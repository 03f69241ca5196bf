"""Build any retriever from a corpus, and load any saved retriever folder by the ``retriever`` kind in its manifest."""

from __future__ import annotations

from pathlib import Path

import dspy

from multihop.corpus import Corpus

from .dense import DenseRetriever
from .encoder import Encoder
from .hybrid import HybridRetriever
from .index import read_manifest
from .rala import RaLa
from .retriever import Retriever
from .sparse import BM25Retriever

KINDS = {cls.kind: cls for cls in (DenseRetriever, BM25Retriever, HybridRetriever, Retriever)}


def load_retriever(directory: str | Path) -> dspy.Module:
    directory = Path(directory)
    kind = read_manifest(directory).get("retriever", DenseRetriever.kind)
    if kind not in KINDS:
        raise ValueError(f"{directory}: unknown retriever kind {kind!r}")
    return KINDS[kind].load(directory)


RERANKERS = {"none": None, "maxsim": {"scoring": "eq4", "omega": False}, "rala-eq4": {"scoring": "eq4"},
             "rala-eq3": {"scoring": "eq3"}}


def build_retriever(
    corpus: Corpus,
    first_stage: str = "dense",
    encoder: str = "mpnet",
    index: str = "auto",
    rerank: str = "none",
    n: int = 20,
    k: int = 5,
    buckets: int = 4,
    seed: int = 0,
    token_cache: bool = True,
) -> dspy.Module:
    """Build any retriever from a corpus: ``first_stage`` dense | bm25 | hybrid, ``rerank`` one of
    :data:`RERANKERS`. A dense index keeps the token states the reranker needs when ``token_cache`` is set."""
    if rerank not in RERANKERS:
        raise ValueError(f"unknown reranker {rerank!r}; choose one of {', '.join(RERANKERS)}")
    reranker = RaLa(**RERANKERS[rerank], buckets=buckets, seed=seed) if RERANKERS[rerank] else None
    shared = Encoder(encoder)  # one loaded model for the index, the token cache and the reranker
    token_layers = None
    if reranker is not None and token_cache:
        token_layers = reranker.token_layers(shared.num_layers)

    def dense() -> DenseRetriever:
        return DenseRetriever.build(corpus, encoder=shared, k=k, kind=index, token_layers=token_layers)

    if first_stage == "dense":
        stage = dense()
    elif first_stage == "bm25":
        stage = BM25Retriever(corpus, k=k)
    elif first_stage == "hybrid":
        stage = HybridRetriever(dense(), BM25Retriever(corpus, k=k), k=k)
    else:
        raise ValueError(f"unknown first stage {first_stage!r}; choose dense, bm25 or hybrid")
    return Retriever(stage, reranker, n=n, k=k, encoder=shared) if reranker else stage
