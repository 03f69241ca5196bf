"""The reranker protocol and the one registry of reranker names, used by ``multihop index build --rerank``, by saved
retrievers' manifests and by the programs' ``rerank=`` switches.

A reranker orders candidates a first stage found: ``rerank(query, candidates, k)`` takes a prediction with the
candidate texts (``passages``) and their ``ids`` and returns the top ``k`` as :class:`~.query.Hits` (``passages``,
``ids``, ``scores``, best first) with the ids of all the ``candidates``. It works from the candidate texts alone, so
it ranks passages, sentences or triples alike; ``config()`` is what a manifest stores to rebuild it, its registry
name under ``"reranker"``. A reranker that draws on its first stage (an encoder, a token cache) also defines
``bind(first_stage)``, returning itself set up for that first stage; :class:`~.reranked.RerankedRetriever` calls it.

A reranker with a model of its own is named with its model after a colon, ``cross-encoder:MODEL`` (a program's
``rerank`` switch, ``--set rerank=...``, ``multihop index build --rerank``): :func:`parse_rerank` reads that form, in
this one place.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Protocol, runtime_checkable

import dspy

from multihop.runtime.spans import RERANKER, traced

from .cosine import Cosine
from .cross_encoder import NAME as CROSS_ENCODER
from .cross_encoder import CrossEncoderReranker
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
    CROSS_ENCODER: CrossEncoderReranker,
}
MODEL_RERANKERS = {CROSS_ENCODER: "model"}  # a reranker named NAME:VALUE → the constructor option VALUE sets
FIRST_STAGE_OPTIONS = ("encoder", "special_tokens", "cache")  # what a first stage shares with a reranker of its model


def parse_rerank(name: str) -> tuple[str, dict]:
    """A ``rerank`` value as the registry name and the options its text carries: ``cross-encoder:MODEL`` →
    ``("cross-encoder", {"model": "MODEL"})`` (the model a Hub id, ``org/name[@revision]``, or a folder); any other
    name as it is, with none."""
    registered, colon, value = name.partition(":")
    if colon and registered in MODEL_RERANKERS:
        if not value.strip():
            raise ValueError(f"rerank {name!r} names no model: write {registered}:MODEL (a Hugging Face Hub id, e.g. "
                             f"{registered}:BAAI/bge-reranker-v2-m3, or a model folder)")
        return registered, {MODEL_RERANKERS[registered]: value.strip()}
    return name, {}


def checked_reranker(name: str | None) -> str | None:
    """A program's ``rerank`` switch checked: a registered name (``cross-encoder:MODEL`` for a reranker with a model
    of its own, :func:`parse_rerank`), or None (no reranking), which is also written ``none`` in any case, ``null`` or
    False (as ``--set rerank=none``, ``rerank=null`` and ``rerank=false`` give it); anything else is a ``ValueError``
    naming the choices and how to write None. The model itself is looked for when the reranker is built."""
    if not name or isinstance(name, str) and name.strip().lower() in ("none", "null"):
        return None
    registered, options = parse_rerank(name)
    if registered not in RERANKERS:
        raise ValueError(f"unknown rerank {name!r}; choose one of {', '.join(choices())}, or None for no reranking "
                         "(--set rerank=none or rerank=null on the command line)")
    if registered in MODEL_RERANKERS and not options:
        raise ValueError(f"rerank {name!r} needs a model (none ships offline): {registered}:MODEL, a Hugging Face Hub "
                         f"id (e.g. {registered}:BAAI/bge-reranker-v2-m3) or a model folder")
    return name


def choices() -> list[str]:
    """The ``rerank`` values as a user writes them: the registry's names, ``cross-encoder:MODEL`` for a reranker that
    takes a model."""
    return [f"{name}:MODEL" if name in MODEL_RERANKERS else name for name in RERANKERS]


def make_reranker(name: str, **options) -> Reranker:
    """The reranker registered as ``name`` (or written ``cross-encoder:MODEL``, :func:`parse_rerank`), built with
    ``options`` (RaLa: ``buckets``, ``omega``, ``seed``; the cross-encoder: ``model``, ``revision``, ``max_length``,
    ``batch_size``, ``device``; the late-interaction ones and Cosine: ``encoder``, and ``special_tokens``, ``cache``).
    The options a first stage hands every reranker (:data:`FIRST_STAGE_OPTIONS`: its encoder, the query markers) are
    left out for a reranker with a model of its own, which takes none of them."""
    name, named = parse_rerank(name)
    if name not in RERANKERS:
        raise ValueError(f"unknown reranker {name!r}; choose one of {', '.join(choices())}")
    options = {**options, **named}
    if name in MODEL_RERANKERS:
        options = {key: value for key, value in options.items() if key not in FIRST_STAGE_OPTIONS}
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
