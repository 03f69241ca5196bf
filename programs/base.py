"""What every multihop program shares (DESIGN.md, "The contract every program keeps").

A :class:`MultihopProgram` records a :class:`~multihop.tracing.Trace` around each call, and returns it with the
per-question counts (``llm_calls``, ``retrieval_calls``, ``tokens``, ``passage_ids``) on the prediction as
``prediction.trace`` and ``prediction.counts``. A program adds its own counts (fallbacks taken, repairs made) by
returning them as ``events``; they are merged into ``counts``. It also gives every stage its own LM
(``set_stage_lm``) and the retriever lookup that DSPy's own ``Retrieve`` uses (the constructor's, else
``dspy.settings.rm``).
"""

from __future__ import annotations

import logging

import dspy
from dspy.utils.exceptions import AdapterParseError

from multihop.tracing import record_trace

logger = logging.getLogger(__name__)


class MultihopProgram(dspy.Module):
    """Base class of the five methods and the baselines."""

    def __init__(self, retriever: dspy.Module | None = None):
        super().__init__()
        self.retriever = retriever

    def __call__(self, *args, **kwargs) -> dspy.Prediction:
        with record_trace(self) as trace:
            prediction = super().__call__(*args, **kwargs)
        prediction.trace = trace.to_list()
        prediction.counts = {**trace.counts(), **(prediction.get("events") or {})}
        return prediction

    @property
    def rm(self) -> dspy.Module:
        retriever = self.retriever if self.retriever is not None else dspy.settings.rm
        if retriever is None:
            raise ValueError(f"{type(self).__name__} needs a retriever: pass retriever=... or dspy.configure(rm=...)")
        return retriever

    def run_stage(self, predictor: dspy.Module, fallback: dict, retries: int = 0, **inputs) -> dspy.Prediction:
        """Call one LLM stage. A reply the adapter cannot parse is retried once by DSPy itself when the adapter is the
        ChatAdapter (it re-asks in JSON format), and ``retries`` more times here, sampled (temperature 1.0, a fresh
        rollout id so the cache does not replay the failure). When the stage still fails, it returns ``fallback``
        with ``failed=True`` instead of crashing the question; the trace records each error (``stage_errors``)."""
        for attempt in range(retries + 1):
            config = {"rollout_id": attempt, "temperature": 1.0} if attempt else {}
            try:
                return predictor(**inputs, **({"config": config} if config else {}))
            except AdapterParseError as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        logger.warning("%s: unparsable LM output, using fallback %s (%s)", type(self).__name__, fallback, reason)
        return dspy.Prediction(**fallback, failed=True)

    def stage_names(self) -> list[str]:
        return [name for name, _ in self.named_predictors()]

    def set_stage_lm(self, name: str, lm) -> None:
        """Run one stage on its own LM. ``name`` is a predictor path (``answer.predict``) or its first part
        (``answer``), which sets every predictor under it."""
        matched = [p for n, p in self.named_predictors() if n == name or n.split(".")[0] == name]
        if not matched:
            raise KeyError(f"{type(self).__name__} has no stage {name!r}; stages: {', '.join(self.stage_names())}")
        for predictor in matched:
            predictor.set_lm(lm)

    def config(self) -> dict:
        """The constructor settings that define this program (saved next to a compiled program's state)."""
        return {}


def safe_answer(text: str | None) -> str:
    """An LM answer cleaned of whitespace; an empty answer stays empty (never invented)."""
    return (text or "").strip()
