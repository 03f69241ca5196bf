"""What the retrieving baselines share: an optional reranker over their first stage."""

from __future__ import annotations

import dspy

from multihop.retrievers import checked_reranker

from ..base import MultihopProgram


class RerankableBaseline(MultihopProgram, register=False):
    """What the retrieving baselines share: an optional reranker over the first stage's top ``n`` (their ``rerank``
    and ``n`` settings), the top 50 → reranker → top 10 DualRAG gives every baseline (§4.3, App. H.4). Without one
    (``rerank=None``, their default) the retriever is searched as it is, so a saved reranked retriever keeps its
    reranker; a method's ``rerank=None`` is its ablation instead, the first stage alone."""

    def __init__(self, retriever: dspy.Module | None, k: int, n: int, rerank: str | None):
        rerank = checked_reranker(rerank)
        if rerank is not None and n < k:
            raise ValueError(f"the first stage must return at least k passages to rerank (n={n} < k={k})")
        super().__init__(retriever=retriever)
        self.k, self.n, self.rerank = k, n, rerank

    def build_searcher(self, retriever: dspy.Module) -> dspy.Module:
        return retriever if self.rerank is None else super().build_searcher(retriever)
