"""The reranker protocol and the one registry of reranker names, used by ``multihop index build --rerank``, by saved
retrievers' manifests and by the programs' ``rerank=`` switches.

A reranker orders candidates a first stage found: ``rerank(query, candidates, k)`` takes a prediction with the
candidate texts (``passages``) and their ``ids`` and returns the top ``k`` as :class:`~.query.Hits` (``passages``,
``ids``, ``scores``, best first) with the ids of all the ``candidates``. It works from the candidate texts alone, so
it ranks passages, sentences or triples alike; ``config()`` is what a manifest stores to rebuild it, its registry
name under ``"reranker"``. A reranker that draws on its first stage (an encoder, a token cache) also defines
``bind(first_stage)``, returning itself set up for that first stage; :class:`~.reranked.RerankedRetriever` calls it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Protocol, runtime_checkable

import dspy

from multihop.runtime.spans import RERANKER, traced

from .cosine import Cosine
from .late_interaction import MaxSim
from .query import Hits
from .rala import RaLa


@runtime_checkable
class Reranker(Protocol):
    def rerank(self, query: str, candidates: dspy.Prediction, k: int) -> Hits: ...

    def config(self) -> dict: ...


class RerankStep(dspy.Module):
    """A reranker as a step of a program: ``step(query, candidates, k)`` is ``reranker.rerank(query, candidates, k)``
    (keyword arguments passed on), recorded in the program's ``stage_trace`` as a ``rerank`` record of its own — the
    query, the candidates' ids, ``k`` and the hits kept — even inside a retrieval. Like a retriever, it has no
    predictors and a copy of a program shares it.

    Args:
        reranker: any :class:`Reranker`.
    """

    trace_kind = "rerank"

    def __init__(self, reranker: Reranker):
        super().__init__()
        self.reranker = reranker

    def forward(self, query: str, candidates: dspy.Prediction, k: int, **options) -> Hits:
        return traced(f"{type(self.reranker).__name__}.rerank", RERANKER,
                      {"query": query, "candidates": list(getattr(candidates, "ids", [])), "k": k},
                      lambda: self.reranker.rerank(query, candidates, k, **options))

    @staticmethod
    def trace_inputs(inputs: dict) -> dict:
        """What the trace records of a call's inputs: the query, the candidates' ids and ``k`` (not the candidates'
        texts, which the retrieval before it recorded, nor a query's token states)."""
        candidates = inputs.get("candidates", inputs.get("arg1"))
        return {"query": inputs.get("query", inputs.get("arg0")), "candidates": list(getattr(candidates, "ids", [])),
                "k": inputs.get("k", inputs.get("arg2"))}

    def __deepcopy__(self, memo: dict) -> RerankStep:
        return self


RERANKERS: dict[str, Callable[..., Reranker]] = {
    "maxsim": MaxSim,
    "rala-eq4": partial(RaLa, "eq4"),
    "rala-eq3": partial(RaLa, "eq3"),
    "cosine": Cosine,
}


def checked_reranker(name: str | None) -> str | None:
    """A program's ``rerank`` switch checked: a registered name, or None (no reranking), which is also written
    ``none`` in any case, ``null`` or False (as ``--set rerank=none``, ``rerank=null`` and ``rerank=false`` give it);
    anything else is a ``ValueError`` naming the choices and how to write None."""
    if not name or isinstance(name, str) and name.strip().lower() in ("none", "null"):
        return None
    if name not in RERANKERS:
        raise ValueError(f"unknown rerank {name!r}; choose one of {', '.join(RERANKERS)}, or None for no reranking "
                         "(--set rerank=none or rerank=null on the command line)")
    return name


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
