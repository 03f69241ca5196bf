"""The reranker protocol and the one registry of reranker names, used by ``multihop index build --rerank``, by saved
retrievers' manifests and by the programs' ``rerank=`` switches.

A reranker orders candidates a first stage found: ``rerank(query, candidates, k)`` takes a prediction with the
candidate texts (``passages``) and their ``ids`` and returns the top ``k`` as :class:`~.query.Hits` (``passages``,
``ids``, ``scores``, best first) with the ids of all the ``candidates``. It works from the candidate texts alone, so
it ranks passages, sentences or triples alike; ``config()`` is what a manifest stores to rebuild it, its registry
name under ``"reranker"``. A reranker that draws on its first stage (an encoder, a token cache) also defines
``bind(first_stage)``, returning itself set up for that first stage; :class:`~.retriever.Retriever` calls it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Protocol, runtime_checkable

import dspy

from .late_interaction import MaxSim
from .query import Hits
from .rala import RaLa


@runtime_checkable
class Reranker(Protocol):
    def rerank(self, query: str, candidates: dspy.Prediction, k: int) -> Hits: ...

    def config(self) -> dict: ...


RERANKERS: dict[str, Callable[..., Reranker]] = {
    "maxsim": MaxSim,
    "rala-eq4": partial(RaLa, "eq4"),
    "rala-eq3": partial(RaLa, "eq3"),
}


def make_reranker(name: str, **options) -> Reranker:
    """The reranker registered as ``name``, built with ``options`` (RaLa: ``buckets``, ``omega``, ``seed``; every
    one of them: ``encoder``, ``special_tokens``, ``cache``)."""
    if name not in RERANKERS:
        raise ValueError(f"unknown reranker {name!r}; choose one of {', '.join(RERANKERS)}")
    try:
        inspect.signature(RERANKERS[name]).bind(**options)
    except TypeError as exc:
        raise ValueError(f"reranker {name!r}: {exc}") from None
    return RERANKERS[name](**options)


def load_reranker(config: dict) -> Reranker:
    """The reranker a manifest recorded (its ``config()``)."""
    options = dict(config)
    if "reranker" not in options:
        raise ValueError(f"the reranker settings {config} name no reranker; rebuild the retriever")
    return make_reranker(options.pop("reranker"), **options)
