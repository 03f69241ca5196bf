"""What every retriever shares: query checking and the :class:`Hits` prediction it returns."""

from __future__ import annotations

import dspy
from dspy.dsp.utils import dotdict

from multihop.data.corpus import Corpus


class Hits(dspy.Prediction):
    """``Prediction(passages, ids, scores, titles, texts)``, best first: ``passages`` rendered as ``title: text`` (what
    prompts show), and each passage's ``titles`` and ``texts`` as fields, so no caller parses a rendered passage back.
    Iterating it yields one ``dotdict(long_text, id, score)`` per passage, the shape DSPy's own ``dspy.Retrieve`` reads
    from the retriever set with ``dspy.configure(rm=...)``, so a multihop retriever serves DSPy programs as well as
    ours."""

    def __iter__(self):
        return iter([dotdict(long_text=passage, id=pid, score=score)
                     for passage, pid, score in zip(self.passages, self.ids, self.scores, strict=True)])


def titles_of(hits: dspy.Prediction) -> list[str]:
    """The titles of ``hits``' passages; "" each for a retriever that gives none (a DSPy one: its passages are
    untitled texts)."""
    return list(hits.get("titles") or [""] * len(hits.passages))


def texts_of(hits: dspy.Prediction) -> list[str]:
    """The texts of ``hits``' passages without their titles; the passages themselves for a retriever that gives
    none."""
    return list(hits.get("texts") or hits.passages)


def pick(hits: dspy.Prediction, order, scores: list[float], **extra) -> Hits:
    """The passages of ``hits`` at the positions ``order`` (best first) with ``scores``: their texts and ids, and
    their titles and texts when ``hits`` carries them."""
    fields = {"passages": hits.passages, "ids": hits.ids, "titles": hits.get("titles"), "texts": hits.get("texts")}
    picked = {name: [values[i] for i in order] for name, values in fields.items() if values is not None}
    return Hits(**picked, scores=list(scores), **extra)


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
        titles=[p.title for p, _ in pairs],
        texts=[p.text for p, _ in pairs],
        **extra,
    )


def merge_hits(hits: list[dspy.Prediction], k: int) -> Hits:
    """The first ``k`` distinct passages of several hits, in order (each keeps the score of the hits it came from
    first), with their titles and texts when every one of the hits carries them."""
    fields = ["passages", "ids", "scores"]
    fields += [name for name in ("titles", "texts") if all(hit.get(name) is not None for hit in hits)]
    merged: dict[str, dict] = {}
    for hit in hits:
        for i, pid in enumerate(hit.ids):
            merged.setdefault(pid, {name: hit[name][i] for name in fields})
    kept = list(merged.values())[:k]
    return Hits(**{name: [row[name] for row in kept] for name in fields})
