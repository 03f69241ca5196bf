"""Typed MLflow spans for a program's retrievals and reranks (docs/design.md, "Traces").

Under MLflow's DSPy tracing (``mlflow.dspy.autolog()``) every module call is a span; MLflow types DSPy's own
``dspy.Retrieve`` as a retriever and any other module as a chain. Inside an MLflow trace, each search of a multihop
retriever and each rerank step therefore adds a child span of type ``RETRIEVER`` (``RERANKER``) whose inputs are the
queries and ``k`` and whose outputs are the passages as MLflow documents (``page_content``, ``id``, ``metadata`` with
the title and score) — the shape MLflow's trace view and its retrieval judges read. Outside an active trace (and
wherever MLflow was never imported) nothing is recorded and MLflow is not imported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import dspy

RETRIEVER = "RETRIEVER"  # MLflow's span types (mlflow.entities.SpanType)
RERANKER = "RERANKER"
T = TypeVar("T")


def documents(hits: dspy.Prediction) -> list[dict]:
    """The passages of ``hits`` as MLflow document dicts, best first."""
    titles = list(hits.get("titles") or [""] * len(hits.passages))
    scores = list(hits.get("scores") or [None] * len(hits.passages))
    ids = list(hits.get("ids") or [None] * len(hits.passages))
    texts = list(hits.get("texts") or hits.passages)
    return [{"page_content": text, "id": pid, "metadata": {"title": title, "score": score, "doc_uri": pid}}
            for text, pid, title, score in zip(texts, ids, titles, scores, strict=True)]


def active_mlflow():
    """MLflow, when it is imported and a trace is being recorded in this context; else None."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is None or not hasattr(mlflow, "get_current_active_span"):
        return None
    return mlflow if mlflow.get_current_active_span() is not None else None


def traced(name: str, span_type: str, inputs: dict[str, Any], call: Callable[[], T]) -> T:
    """``call()``, recorded as a child span ``name`` of type ``span_type`` of the active MLflow trace, if any. Its
    result — one hits or a list of them, one per query — is recorded as documents (a list per query for a list)."""
    mlflow = active_mlflow()
    if mlflow is None:
        return call()
    with mlflow.start_span(name=name, span_type=span_type) as span:
        span.set_inputs(inputs)
        result = call()
        span.set_outputs([documents(hits) for hits in result] if isinstance(result, list) else documents(result))
        return result
