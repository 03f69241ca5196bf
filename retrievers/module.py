"""The base class of the retrievers and the registry of their kinds.

A retriever is a ``dspy.Module`` (docs/design.md, "The contract every program keeps") whose ``forward(query, k)``
returns one :class:`~.query.Hits` for a query string and a list of them, in order, for a list of queries. The base class
implements ``forward`` once over the batched :meth:`RetrieverModule.search` that each kind defines, so every kind checks
its queries and answers both shapes alike. A class that sets ``kind`` is registered under it when it is defined;
:func:`load_retriever` rebuilds a saved folder through the class its manifest's ``retriever`` entry names, with no list
of classes to keep in step (a retriever that nests others, hybrid or reranked, loads them the same way).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import dspy

from multihop.data.folders import verify_inventory
from multihop.runtime.spans import RETRIEVER, traced

from .index import read_manifest
from .query import Hits, check_queries

RETRIEVER_KINDS: dict[str, type[RetrieverModule]] = {}


class RetrieverModule(dspy.Module):
    """A retriever is a read-only resource (an encoder, an index, a corpus) with no predictors to optimize. DSPy's
    optimizers deep-copy the program for every candidate they try; a copy of a program therefore shares its retriever
    rather than duplicating the encoder's weights and the index in memory once per candidate.

    A subclass sets ``kind`` (the ``retriever`` entry of the manifest its ``save`` writes), sets ``k`` (the default
    number of passages) and defines ``search``, ``save`` and the classmethod ``load(directory)``."""

    kind: ClassVar[str]
    k: int

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if kind is None:
            return
        known = RETRIEVER_KINDS.get(kind)
        if known is not None and _qualified(known) != _qualified(cls):
            raise ValueError(f"retriever kind {kind!r} is taken by {_qualified(known)}")
        RETRIEVER_KINDS[kind] = cls

    def forward(self, query: str | list[str], k: int | None = None) -> Hits | list[Hits]:
        """The top ``k`` (default ``self.k``) passages of a query, or one list of them per query of a list."""
        queries, k = check_queries(query), k or self.k

        def answer() -> Hits | list[Hits]:
            hits = self.search(queries, k)
            return hits[0] if isinstance(query, str) else hits

        return traced(f"{type(self).__name__}.search", RETRIEVER, {"query": query, "k": k}, answer)

    def search(self, queries: list[str], k: int) -> list[Hits]:
        """The top ``k`` passages of each of ``queries`` (checked non-empty strings), best first."""
        raise NotImplementedError

    def save(self, directory: str | Path) -> None:
        raise NotImplementedError

    @classmethod
    def load(cls, directory: str | Path) -> RetrieverModule:
        raise NotImplementedError

    @classmethod
    def describe(cls, directory: Path) -> dict:
        """What a folder this kind saved holds, read from its manifest (:func:`describe_index`): no encoder unless a
        kind that has one says so."""
        manifest = read_manifest(directory)
        return {"first_stage": cls.kind, "reranker": None, "passages": manifest.get("count"),
                "corpus_sha256": manifest.get("corpus_sha256"), "encoder": None, "encoder_sha256": None,
                "encoder_fine_tuned": None, "pooling": None, "special_tokens": [], "token_states": "none"}

    def __deepcopy__(self, memo: dict) -> RetrieverModule:
        return self


def load_retriever(directory: str | Path) -> RetrieverModule:
    """The retriever saved in ``directory``, of the kind its manifest names, after checking its files against the
    list saved with them (:func:`multihop.data.folders.verify_inventory`)."""
    directory = Path(directory)
    verify_inventory(directory)
    kind = read_manifest(directory).get("retriever")
    if kind not in RETRIEVER_KINDS:
        raise ValueError(f"{directory}: unknown retriever kind {kind!r}; known: {', '.join(RETRIEVER_KINDS)}")
    return RETRIEVER_KINDS[kind].load(directory)


def describe_index(directory: str | Path) -> dict:
    """What the retriever saved in ``directory`` is, from its manifests alone (nothing is loaded): ``first_stage``
    (dense, bm25, hybrid or another kind), ``reranker`` (its registry name, or None), ``passages`` and
    ``corpus_sha256``, and of its dense index, if any: ``encoder`` (a name or a folder), ``encoder_sha256`` (its
    weights' checksum), ``encoder_fine_tuned`` (a folder ``multihop cooprag train`` wrote), ``pooling`` (mean or
    cls), ``special_tokens`` (the query markers kept whole) and ``token_states`` (the form they are kept in, or
    none)."""
    directory = Path(directory)
    kind = read_manifest(directory).get("retriever")
    if kind not in RETRIEVER_KINDS:
        raise ValueError(f"{directory}: unknown retriever kind {kind!r}; known: {', '.join(RETRIEVER_KINDS)}")
    return RETRIEVER_KINDS[kind].describe(directory)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
