"""Dense + BM25 fused by reciprocal-rank fusion (Cormack et al., 2009) — the hybrid baseline.

Each retriever returns its top ``depth`` passages; a passage scores ``Σ 1 / (rrf_k + rank)`` (rank from 1) over
the lists it appears in, ``rrf_k = 60`` as in the RRF paper. Both retrievers must cover the same corpus. The hybrid
shows the dense retriever's ``encoder`` and token cache (``tokens``) as its own, so a reranker over it shares them.
"""

from __future__ import annotations

import json
from pathlib import Path

from multihop.data.folders import write_inventory
from multihop.data.paths import atomic_dir, atomic_write_text

from .index import MANIFEST, IndexMismatchError, read_manifest
from .module import RetrieverModule, describe_index, load_retriever
from .query import Hits, hits_prediction


class HybridRetriever(RetrieverModule):
    kind = "hybrid"

    def __init__(self, dense: RetrieverModule, sparse: RetrieverModule, k: int = 5, depth: int = 50,
                 rrf_k: int = 60):
        super().__init__()
        if dense.corpus.checksum() != sparse.corpus.checksum():
            raise IndexMismatchError("the dense and sparse retrievers of a hybrid must cover the same corpus")
        self.dense, self.sparse, self.k, self.depth, self.rrf_k = dense, sparse, k, depth, rrf_k
        self.corpus = dense.corpus
        self.encoder, self.tokens = getattr(dense, "encoder", None), getattr(dense, "tokens", None)

    def search(self, queries: list[str], k: int) -> list[Hits]:
        depth = max(self.depth, k)
        return [self.fuse([d, s], k) for d, s in zip(self.dense.search(queries, depth),
                                                     self.sparse.search(queries, depth), strict=True)]

    def fuse(self, rankings: list[Hits], k: int) -> Hits:
        scores: dict[str, float] = {}
        for ranking in rankings:
            for rank, pid in enumerate(ranking.ids, start=1):
                scores[pid] = scores.get(pid, 0.0) + 1.0 / (self.rrf_k + rank)
        best = sorted(scores, key=lambda pid: (-scores[pid], self.corpus.row(pid)))[:k]
        return hits_prediction(self.corpus, [self.corpus.row(pid) for pid in best], [scores[pid] for pid in best])

    def save(self, directory: str | Path) -> None:
        with atomic_dir(Path(directory)) as tmp:
            self.dense.save(tmp / "dense")
            self.sparse.save(tmp / "sparse")
            manifest = {"retriever": self.kind, "depth": self.depth, "rrf_k": self.rrf_k,
                        "corpus_sha256": self.corpus.checksum(), "count": len(self.corpus)}
            atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=2))
            write_inventory(tmp)

    @classmethod
    def describe(cls, directory: Path) -> dict:
        """Its dense part's description, as a hybrid first stage."""
        return {**describe_index(directory / "dense"), "first_stage": cls.kind}

    @classmethod
    def load(cls, directory: str | Path, k: int = 5) -> HybridRetriever:
        directory = Path(directory)
        manifest = read_manifest(directory, {"retriever": cls.kind})
        return cls(load_retriever(directory / "dense"), load_retriever(directory / "sparse"), k=k,
                   depth=manifest["depth"], rrf_k=manifest["rrf_k"])
