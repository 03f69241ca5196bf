"""Per-stage traces of a program call (DESIGN.md, "Traces").

:func:`record_trace` installs a DSPy callback for the current context only (threads evaluating other questions are
not affected). Every call of a ``dspy.Predict`` (an LLM stage) and of a retriever (a module whose output carries
``ids``) becomes one record: the stage's path in the program (``answer.predict``, ``retriever``), inputs, outputs,
the LM that served it, latency, and prompt/completion tokens. DSPy's own history omits retriever calls; here they are
first-class. Token counts come from DSPy's usage tracker, so cache hits count zero tokens, as DSPy reports them.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback
from dspy.utils.usage_tracker import UsageTracker


def jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy of stage inputs/outputs (Predictions and Examples become dicts, other objects strings)."""
    if depth > 6:
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (dspy.Example, dspy.Prediction)):
        return {k: jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v, depth + 1) for v in value]
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(), depth + 1)
    return repr(value)


def _call_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """Flatten ``__call__(*args, **kwargs)`` callback inputs into one mapping, dropping DSPy's ``config``/demos."""
    flat = {f"arg{i}": a for i, a in enumerate(inputs.get("args", ()))}
    flat.update(inputs.get("kwargs", {}))
    flat.update({k: v for k, v in inputs.items() if k not in ("args", "kwargs")})
    return {k: v for k, v in flat.items() if k not in ("config", "demos", "signature", "lm")}


class Trace:
    """The ordered stage records of one program call, with the per-question counts the papers report."""

    def __init__(self, root: dspy.Module | None = None):
        self.names: dict[int, str] = {}
        if root is not None:
            for name, module in root.named_sub_modules():
                self.names.setdefault(id(module), name.removeprefix("self."))
        self.root_id = id(root) if root is not None else None
        self.records: list[dict] = []
        self._open: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self.current = contextvars.ContextVar(f"multihop_stage_{id(self)}", default=None)
        self.module = contextvars.ContextVar(f"multihop_module_{id(self)}", default=None)

    def stage_name(self, instance: Any) -> str:
        name = self.names.get(id(instance))
        if name is None:
            return "rm" if not isinstance(instance, dspy.Predict) else type(instance).__name__.lower()
        return name

    def counts(self) -> dict:
        lm_records = [r for r in self.records if r["kind"] == "lm"]
        retrievals = [r for r in self.records if r["kind"] == "retriever"]
        passage_ids: list[str] = []
        for record in retrievals:
            for pid in (record.get("outputs") or {}).get("ids", []):
                if pid not in passage_ids:
                    passage_ids.append(pid)
        prompt = sum(r.get("prompt_tokens", 0) for r in lm_records)
        completion = sum(r.get("completion_tokens", 0) for r in lm_records)
        return {
            "llm_calls": len(lm_records),
            "lm_requests": sum(r.get("lm_requests", 0) for r in lm_records),
            "retrieval_calls": len(retrievals),
            "stage_errors": sum(1 for r in self.records if "error" in r),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "tokens": prompt + completion,
            "passage_ids": passage_ids,
        }

    def to_list(self) -> list[dict]:
        return [dict(r) for r in self.records]


class _StageUsage(UsageTracker):
    """DSPy's usage tracker, also adding each LM response's tokens to the stage that is running."""

    def __init__(self, trace: Trace, parent: UsageTracker | None):
        super().__init__()
        self.trace, self.parent = trace, parent

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        super().add_usage(lm, usage_entry)
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)
        record = self.trace.current.get()
        if record is not None:
            record["prompt_tokens"] = record.get("prompt_tokens", 0) + int(usage_entry.get("prompt_tokens") or 0)
            record["completion_tokens"] = record.get("completion_tokens", 0) + int(
                usage_entry.get("completion_tokens") or 0
            )


class TraceCallback(BaseCallback):
    """Turns DSPy's module and LM callbacks into :class:`Trace` records."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self._tokens: dict[str, contextvars.Token] = {}

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]):
        trace = self.trace
        if id(instance) == trace.root_id:
            return
        is_lm = isinstance(instance, dspy.Predict)
        if not is_lm and list(instance.named_predictors()):
            return  # a composite sub-module: its predictors are recorded on their own
        if not is_lm and trace.module.get() is not None:
            return  # a module inside a recorded one (a reranker's first stage): one retrieval, recorded once
        record = {
            "stage": trace.stage_name(instance),
            "kind": "lm" if is_lm else "module",
            "inputs": jsonable(_call_inputs(inputs)),
            "start_s": round(time.perf_counter() - trace._t0, 4),
            "_t": time.perf_counter(),
        }
        if is_lm:
            record.update(lm=None, lm_requests=0, prompt_tokens=0, completion_tokens=0)
        self._tokens[call_id] = (trace.current if is_lm else trace.module).set(record)
        with trace._lock:
            trace._open[call_id] = record

    def on_module_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None):
        trace = self.trace
        with trace._lock:
            record = trace._open.pop(call_id, None)
        if record is None:
            return
        token = self._tokens.pop(call_id)
        token.var.reset(token)
        if record["kind"] == "module":
            if hasattr(outputs, "ids"):
                record["kind"] = "retriever"
            elif exception is None:
                return  # a helper module that neither retrieved nor failed: nothing to report
        record["latency_s"] = round(time.perf_counter() - record.pop("_t"), 4)
        record["outputs"] = jsonable(outputs)
        if exception is not None:
            record["error"] = f"{type(exception).__name__}: {exception}"
        with trace._lock:
            trace.records.append(record)

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]):
        record = self.trace.current.get()
        if record is not None:
            record["lm"] = getattr(instance, "model", type(instance).__name__)
            record["lm_requests"] += 1


@contextmanager
def record_trace(root: dspy.Module | None = None) -> Iterator[Trace]:
    """Record every stage call made in this context (and only this context) into a :class:`Trace`.

    >>> with record_trace(program) as trace:
    ...     program(question="...")
    >>> trace.counts()["llm_calls"]
    """
    trace = Trace(root)
    callbacks = [*dspy.settings.get("callbacks", []), TraceCallback(trace)]
    usage = _StageUsage(trace, dspy.settings.get("usage_tracker"))
    with dspy.context(callbacks=callbacks, usage_tracker=usage):
        yield trace
