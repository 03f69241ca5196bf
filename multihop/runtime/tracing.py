"""Per-stage traces of a program call (docs/design.md, "Traces").

:func:`record_trace` installs a DSPy callback for the current context only (threads evaluating other questions are
not affected). Every call of a ``dspy.Predict`` (an LLM stage) and of a retriever (a module without predictors whose
output carries ``ids`` or ``passages``: ours, or DSPy's ``dspy.Retrieve``) becomes one record: the stage's path in
the program (``answer.predict``, ``retriever``), inputs, outputs, the LM that served it, latency, and
prompt/completion tokens. DSPy's own history omits retriever calls; here they are
first-class. A ``dspy.Retrieve`` keeps only its passages' texts: its record's ``ids`` are those its ``rm`` found
(a multihop retriever, or any module answering ``ids``), else the texts' content hashes (:func:`passage_ids_of`), so
the passages a user's module read through it are counted as a program's own. Token counts come from DSPy's usage
tracker, so cache hits count zero tokens, as DSPy reports them.

Programs count their own events (a fallback taken, a repair made) with :func:`count`, which adds to every trace
recorded in the current context; :meth:`Trace.counts` reports them beside the LLM and retrieval counts.

Work a program fans out with :func:`multihop.runtime.parallel.fan_out` (``MultihopProgram.fan_out``) is recorded into
the same trace in the serial order: each call runs in a copy of the caller's context with a :class:`Branch` of its own,
added in the items' order when all have ended. ``dspy.Parallel`` also records into the trace (DSPy copies its
settings, callbacks included, into each worker, and deep-copies the usage tracker, whose copy here is the tracker
itself), but in the order the calls end, and outside any branch of an enclosing fan-out. A plain
``ThreadPoolExecutor`` sees DSPy's context settings (the LM, callbacks, this trace) only when its tasks run in a copy
of the caller's context: ``pool.submit(contextvars.copy_context().run, fn, ...)``, as :func:`multihop.evaluate` does.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback
from dspy.utils.usage_tracker import UsageTracker

from multihop.data.corpus import passage_id


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


def short_json(value: Any, width: int = 160) -> str:
    """``value`` as one line of JSON, cut to ``width`` characters (an ellipsis marks the cut)."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def record_cells(record: dict, width: int = 160) -> dict:
    """What ``multihop trace show`` shows of one stage record: stage, kind, LM, seconds, tokens, and its inputs →
    outputs on one line (each cut to ``width``), with its error."""
    return {"stage": record["stage"], "kind": record["kind"], "lm": str(record.get("lm") or ""),
            "seconds": f"{record.get('latency_s', 0):.2f}",
            "tokens": str(record.get("prompt_tokens", 0) + record.get("completion_tokens", 0)),
            "io": f"{short_json(record.get('inputs'), width)} → {short_json(record.get('outputs'), width)}",
            "error": record.get("error") or ""}


def _call_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """Flatten ``__call__(*args, **kwargs)`` callback inputs into one mapping, dropping DSPy's ``config``/demos."""
    flat = {f"arg{i}": a for i, a in enumerate(inputs.get("args", ()))}
    flat.update(inputs.get("kwargs", {}))
    flat.update({k: v for k, v in inputs.items() if k not in ("args", "kwargs")})
    return {k: v for k, v in flat.items() if k not in ("config", "demos", "signature", "lm")}


class Branch:
    """The stage records and counted events of one call fanned out from a traced call, kept apart while it runs."""

    def __init__(self):
        self.records: list[dict] = []
        self.events: Counter = Counter()


def module_paths(root: dspy.Module) -> dict[int, str]:
    """The path in ``root`` of each module it holds (``answer.predict``; ``root`` itself ``self``), by id: DSPy's
    ``named_sub_modules`` walk — attributes, lists, tuples and dicts, the first path found — without the modules'
    ``history`` lists, which DSPy grows by an entry every LM call (up to 10,000 a module), so a walk into them would
    cost more with every question evaluated."""
    paths: dict[int, str] = {}
    queue, seen = deque([("self", root)]), {id(root)}
    while queue:
        name, item = queue.popleft()
        if isinstance(item, dspy.Retrieve):  # DSPy's retrieval step: a Parameter, not a module
            paths.setdefault(id(item), name.removeprefix("self."))
            continue
        if isinstance(item, dspy.BaseModule):
            paths.setdefault(id(item), name.removeprefix("self."))
            children = ((f"{name}.{key}", value) for key, value in item.__dict__.items() if key != "history")
        elif isinstance(item, (list, tuple)):
            children = ((f"{name}[{index}]", value) for index, value in enumerate(item))
        elif isinstance(item, dict):
            children = ((f"{name}[{key}]", value) for key, value in item.items())
        else:
            continue
        for child in children:
            if id(child[1]) not in seen:
                seen.add(id(child[1]))
                queue.append(child)
    return paths


class Trace:
    """The ordered stage records of one program call, its counted events, and the per-question counts the papers
    report. Safe to share between threads."""

    def __init__(self, root: dspy.Module | None = None):
        self.names = module_paths(root) if root is not None else {}
        self.root_id = id(root) if root is not None else None
        self.records: list[dict] = []
        self.events: Counter = Counter()
        self._open: dict[str, dict] = {}
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self.usage: UsageTracker | None = None  # set by record_trace
        self.current = contextvars.ContextVar(f"multihop_stage_{id(self)}", default=None)
        self.module = contextvars.ContextVar(f"multihop_module_{id(self)}", default=None)
        self.branch = contextvars.ContextVar(f"multihop_branch_{id(self)}", default=None)  # a fanned-out call's
        # records and events, kept apart until :func:`multihop.runtime.parallel.fan_out` adds them in the serial
        # order

    def stage_name(self, instance: Any) -> str:
        """A stage's path in the program (``answer.predict``, ``retriever``); a step of its own kind (a rerank) is
        named by its kind, a module the program built for itself by its ``trace_stage`` (``search``), another module
        outside the program ``rm``."""
        if getattr(instance, "trace_kind", None):
            return instance.trace_kind
        name = self.names.get(id(instance)) or getattr(instance, "trace_stage", None)
        if name is None:
            return "rm" if not isinstance(instance, dspy.Predict) else type(instance).__name__.lower()
        return name

    def count(self, name: str, n: int = 1) -> None:
        branch = self.branch.get()
        with self._lock:
            (self.events if branch is None else branch.events)[name] += n

    def add_record(self, record: dict) -> None:
        """Add a finished stage record to this trace, or to the branch of the fanned-out call that made it."""
        branch = self.branch.get()
        with self._lock:
            (self.records if branch is None else branch.records).append(record)

    def merge(self, branch: Branch) -> None:
        """Add a branch's records and events where the call that opened it adds its own."""
        parent = self.branch.get()
        with self._lock:
            (self.records if parent is None else parent.records).extend(branch.records)
            (self.events if parent is None else parent.events).update(branch.events)

    def counts(self) -> dict:
        """LLM calls, LM requests, retrievals, stage errors, tokens (with the prompt tokens an engine read from its
        prefix cache instead of evaluating, and the output tokens of each stage as ``completion_tokens.<stage>``),
        the passages retrieved, and every event."""
        with self._lock:
            records, events = list(self.records), dict(self.events)
        lm_records = [r for r in records if r["kind"] == "lm"]
        retrievals = [r for r in records if r["kind"] == "retriever"]
        passage_ids: list[str] = []
        for record in retrievals:
            for pid in (record.get("outputs") or {}).get("ids", []):
                if pid not in passage_ids:
                    passage_ids.append(pid)
        prompt = sum(r.get("prompt_tokens", 0) for r in lm_records)
        completion = sum(r.get("completion_tokens", 0) for r in lm_records)
        cached = sum(r.get("cached_tokens", 0) for r in lm_records)
        by_stage: Counter = Counter()  # output tokens per stage (DualRAG Tables 7-8's per-module budget)
        for record in lm_records:
            by_stage[f"completion_tokens.{record['stage'].split('.')[0]}"] += record.get("completion_tokens", 0)
        return {
            "llm_calls": len(lm_records),
            "lm_requests": sum(r.get("lm_requests", 0) for r in lm_records),
            "retrieval_calls": len(retrievals),
            "stage_errors": sum(1 for r in records if "error" in r),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "tokens": prompt + completion,
            "cached_prompt_tokens": cached,
            "passage_ids": passage_ids,
            **by_stage,
            **events,
        }

    def to_list(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self.records]


def active_traces() -> list[Trace]:
    """The traces recorded in the current context, outermost first (DSPy carries them into its parallel workers)."""
    return [cb.trace for cb in dspy.settings.get("callbacks") or [] if isinstance(cb, TraceCallback)]


def count(name: str, n: int = 1) -> None:
    """Count ``n`` occurrences of the event ``name`` (a fallback, a repair, a rewrite) in every trace being recorded
    here; outside a trace it does nothing. The counts appear in ``prediction.counts`` and evaluation summaries."""
    for trace in active_traces():
        trace.count(name, n)


class _StageUsage(UsageTracker):
    """DSPy's usage tracker, also adding each LM response's tokens to the stage that is running and passing every
    entry on to the tracker it replaced (DSPy's own, when usage tracking is on).

    DSPy's ``ParallelExecutor`` deep-copies the tracker for each worker thread; the copy is this tracker itself, so
    work fanned out inside a program call is added to the same trace and totals (under a lock)."""

    def __init__(self, trace: Trace, parent: UsageTracker | None):
        super().__init__()
        self.trace, self.parent = trace, parent
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> _StageUsage:
        return self

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        with self._lock:
            super().add_usage(lm, usage_entry)
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)
        record = self.trace.current.get()
        if record is not None:
            with self.trace._lock:
                record["prompt_tokens"] += int(usage_entry.get("prompt_tokens") or 0)
                record["completion_tokens"] += int(usage_entry.get("completion_tokens") or 0)
                details = usage_entry.get("prompt_tokens_details") or {}
                record["cached_tokens"] = record.get("cached_tokens", 0) + int(details.get("cached_tokens") or 0)

    def get_total_tokens(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return super().get_total_tokens()


class TraceCallback(BaseCallback):
    """Turns DSPy's module and LM callbacks into :class:`Trace` records."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self._tokens: dict[str, contextvars.Token] = {}
        self._inner: dict[str, dict] = {}  # a call inside a recorded module → that module's open record

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]):
        trace = self.trace
        if id(instance) == trace.root_id:
            return
        is_lm = isinstance(instance, dspy.Predict)
        step = getattr(instance, "trace_kind", None)  # a step recorded as its kind wherever it runs (a rerank)
        if not is_lm and list(getattr(instance, "named_predictors", list)()):
            return  # a composite sub-module: its predictors are recorded on their own
        if not is_lm and not step and trace.module.get() is not None:
            with trace._lock:  # a module inside a recorded one (a reranker's first stage, dspy.Retrieve's rm): one
                self._inner[call_id] = trace.module.get()  # retrieval, recorded once, with the ids it found
            return
        call_inputs = _call_inputs(inputs)
        if hasattr(instance, "trace_inputs"):  # what a step chooses to record of its inputs
            call_inputs = instance.trace_inputs(call_inputs)
        record = {
            "stage": trace.stage_name(instance),
            "kind": "lm" if is_lm else step or "module",
            "inputs": jsonable(call_inputs),
            "start_s": round(time.perf_counter() - trace._t0, 4),
            "_t": time.perf_counter(),
        }
        if is_lm:
            record.update(lm=None, lm_requests=0, prompt_tokens=0, completion_tokens=0)
        token = (trace.current if is_lm else trace.module).set(record)
        with trace._lock:
            self._tokens[call_id] = token
            trace._open[call_id] = record

    def on_module_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None):
        trace = self.trace
        with trace._lock:
            record = trace._open.pop(call_id, None)
            token = self._tokens.pop(call_id, None)
            outer = self._inner.pop(call_id, None)
        if outer is not None and isinstance(outputs, dspy.Prediction) and outputs.get("ids") is not None:
            with trace._lock:  # the outermost inner call ends last: the rm itself, not its own first stage
                outer["_inner_ids"] = list(outputs.ids)
        if record is None:
            return
        token.var.reset(token)
        if record["kind"] == "module":
            if hasattr(outputs, "ids") or hasattr(outputs, "passages"):  # a retriever: ours, or dspy.Retrieve
                record["kind"] = "retriever"
            elif exception is None:
                return  # a helper module that neither retrieved nor failed: nothing to report
        record["latency_s"] = round(time.perf_counter() - record.pop("_t"), 4)
        record["outputs"] = jsonable(outputs)
        inner_ids = record.pop("_inner_ids", None)
        if record["kind"] == "retriever" and isinstance(record["outputs"], dict) and "ids" not in record["outputs"]:
            record["outputs"]["ids"] = passage_ids_of(record["outputs"].get("passages") or [], inner_ids)
        if exception is not None:
            record["error"] = f"{type(exception).__name__}: {exception}"
        trace.add_record(record)

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]):
        record = self.trace.current.get()
        if record is not None:
            with self.trace._lock:
                record["lm"] = getattr(instance, "model", type(instance).__name__)
                record["lm_requests"] += 1


def passage_ids_of(passages: list, inner_ids: list | None) -> list[str]:
    """The ids of the passages a retrieval returned without them (``dspy.Retrieve``, which keeps only the texts):
    those the retriever it called found (``inner_ids``, one a passage), else each text's content hash, the id a
    multihop corpus or :class:`~multihop.retrievers.DSPyRetriever` gives an untitled passage."""
    if inner_ids is not None and len(inner_ids) == len(passages):
        return [str(pid) for pid in inner_ids]
    return [passage_id("", text if isinstance(text, str) else json.dumps(text)) for text in passages]


class TracedPrediction(dspy.Prediction):
    """A program's prediction, with its stage records as ``stage_trace`` and its counts as ``counts``."""

    @classmethod
    def from_trace(cls, prediction: dspy.Prediction, trace: Trace, with_usage: bool = False) -> TracedPrediction:
        """``prediction`` with ``stage_trace`` and ``counts`` from ``trace``; ``with_usage`` also sets DSPy's LM usage
        (``get_lm_usage()``) from the trace's tracker, which stood in for the one DSPy would have opened."""
        traced = cls(dict(prediction.items(include_dspy=True)), stage_trace=trace.to_list(), counts=trace.counts())
        traced._completions = prediction._completions
        traced.set_lm_usage(trace.usage.get_total_tokens() if with_usage else prediction.get_lm_usage())
        return traced


class TracedModule(dspy.Module):
    """A module that records its own trace: every call returns a :class:`TracedPrediction` with the stage records
    and counts of that call, so evaluation reuses them instead of tracing the call a second time.

    ``await module.acall(...)`` is the same call for asyncio code (a server hosting a program): it runs on a worker
    thread of :data:`ASYNC_WORKERS` in a copy of the caller's context (its ``dspy.context`` settings, its traces), so
    the event loop stays free and the prediction keeps its ``stage_trace``, counts and usage. Our stages are
    synchronous DSPy modules: an awaited call holds one worker thread while its LM calls are in flight."""

    def __call__(self, *args, **kwargs) -> TracedPrediction:
        own_usage = dspy.settings.track_usage and dspy.settings.get("usage_tracker") is None
        with record_trace(self) as trace:
            prediction = super().__call__(*args, **kwargs)
        return TracedPrediction.from_trace(prediction, trace, with_usage=own_usage)

    async def acall(self, *args, **kwargs) -> TracedPrediction:
        return await in_worker(self.__call__, *args, **kwargs)

    async def aforward(self, *args, **kwargs) -> TracedPrediction:
        return await self.acall(*args, **kwargs)


ASYNC_WORKERS = 512  # calls awaited at once across a process (threads are made as calls arrive)


@functools.cache
def _async_workers() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=ASYNC_WORKERS, thread_name_prefix="multihop-acall")


async def in_worker(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` awaited: on a worker thread of :data:`ASYNC_WORKERS`, in a copy of the caller's
    context."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_async_workers(), call)


@contextmanager
def record_trace(root: dspy.Module | None = None) -> Iterator[Trace]:
    """Record every stage call made in this context (and only this context) into a :class:`Trace`.

    >>> with record_trace(program) as trace:
    ...     program(question="...")
    >>> trace.counts()["llm_calls"]

    ``trace.usage.get_total_tokens()`` is the context's LM usage in DSPy's format: DSPy's own modules see the trace's
    tracker and open none, so a plain module's ``get_lm_usage()`` stays None inside a trace (a
    :class:`~multihop.programs.MultihopProgram` sets it from this tracker).
    """
    trace = Trace(root)
    trace.usage = _StageUsage(trace, dspy.settings.get("usage_tracker"))
    callbacks = [*dspy.settings.get("callbacks", []), TraceCallback(trace)]
    with dspy.context(callbacks=callbacks, usage_tracker=trace.usage):
        yield trace
