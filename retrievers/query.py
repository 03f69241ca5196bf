"""What every retriever shares: query checking and the ``Prediction(passages, ids, scores)`` it returns."""

from __future__ import annotations

import dspy

from multihop.corpus import Corpus


def check_queries(query: str | list[str]) -> list[str]:
    """The queries as a list; an empty query (or list) is a clear error, not a silent empty result."""
    queries = [query] if isinstance(query, str) else list(query)
    if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
        raise ValueError("every query must be a non-empty string")
    return queries


def hits_prediction(corpus: Corpus, rows, scores, **extra) -> dspy.Prediction:
    """The passages at ``rows`` (negative rows, FAISS's "no hit", are dropped), best first as given."""
    pairs = [(corpus[int(row)], float(score)) for row, score in zip(rows, scores, strict=True) if row >= 0]
    return dspy.Prediction(
        passages=[p.render() for p, _ in pairs],
        ids=[p.id for p, _ in pairs],
        scores=[s for _, s in pairs],
        **extra,
    )
