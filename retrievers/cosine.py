"""The bi-encoder reranker: candidates ranked by the cosine of their pooled embedding to the query's (registered as
``cosine``). It ranks any texts — passages, sentences, triples — so a method that reranks its own units by an
encoder (CIRAG's triples, §3.3) does it through the same protocol and traced step as every other rerank."""

from __future__ import annotations

from collections.abc import Sequence

import dspy
import numpy as np

from .encoder import Encoder, shared_encoder
from .query import Hits, pick


class Cosine:
    """``rerank(query, candidates, k)``: the top ``k`` candidate texts by cosine to the query, best first (the earlier
    on a tie), with the ids of every candidate.

    Args:
        encoder: an :class:`~.encoder.Encoder`, its :meth:`~.encoder.Encoder.config` (from a manifest), or the name
            of one (loaded once per process on first use).
        special_tokens: markers the program writes into its queries (CoopRAG's placeholders): an encoder named here
            is built keeping them, so a query never splits them into word pieces; a given encoder must keep them.
    """

    name = "cosine"

    def __init__(self, encoder: str | Encoder | dict = "mpnet", special_tokens: Sequence[str] = ()):
        self.special_tokens = tuple(special_tokens)
        if isinstance(encoder, dict):
            encoder = Encoder(**encoder)
        elif isinstance(encoder, str) and self.special_tokens:
            encoder = Encoder(encoder, special_tokens=self.special_tokens)
        if isinstance(encoder, Encoder) and not set(self.special_tokens) <= set(encoder.special_tokens):
            raise ValueError(f"the encoder {encoder.name} lacks the special tokens {list(self.special_tokens)}")
        self._encoder = encoder

    @property
    def encoder(self) -> Encoder:
        return shared_encoder(self._encoder) if isinstance(self._encoder, str) else self._encoder

    def rerank(self, query: str, candidates: dspy.Prediction, k: int) -> Hits:
        if not candidates.ids:
            return Hits(passages=[], ids=[], scores=[], candidates=[])
        scores = (self.encoder.encode(list(candidates.passages)) @ self.encoder.encode([query]).T)[:, 0]
        order = np.argsort(-scores, kind="stable")[:k]
        return pick(candidates, order, [float(scores[i]) for i in order], candidates=list(candidates.ids))

    def config(self) -> dict:
        encoder = self._encoder if isinstance(self._encoder, str) else self._encoder.config()
        return {"reranker": self.name, "encoder": encoder, "special_tokens": list(self.special_tokens)}
