"""What every retriever shares: query checking and the :class:`Hits` prediction it returns."""

from __future__ import annotations

import dspy
from dspy.dsp.utils import dotdict

from multihop.corpus import Corpus


class Hits(dspy.Prediction):
    """``Prediction(passages, ids, scores)``, best first. Iterating it yields one ``dotdict(long_text, id, score)``
    per passage, the shape DSPy's own ``dspy.Retrieve`` reads from the retriever set with ``dspy.configure(rm=...)``,
    so a multihop retriever serves DSPy programs as well as ours."""

    def __iter__(self):
        return iter([dotdict(long_text=passage, id=pid, score=score)
                     for passage, pid, score in zip(self.passages, self.ids, self.scores, strict=True)])


def check_queries(query: str | list[str]) -> list[str]:
    """The queries as a list; an empty query (or list) is a clear error, not a silent empty result."""
    queries = [query] if isinstance(query, str) else list(query)
    if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
        raise ValueError("every query must be a non-empty string")
    return queries


def hits_prediction(corpus: Corpus, rows, scores, **extra) -> Hits:
    """The passages at ``rows`` (negative rows, FAISS's "no hit", are dropped), best first as given."""
    pairs = [(corpus[int(row)], float(score)) for row, score in zip(rows, scores, strict=True) if row >= 0]
    return Hits(
        passages=[p.render() for p, _ in pairs],
        ids=[p.id for p, _ in pairs],
        scores=[s for _, s in pairs],
        **extra,
    )
