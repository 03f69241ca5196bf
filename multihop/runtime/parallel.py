"""Independent calls run at once, with the results, stage records and counts a serial loop gives.

:func:`fan_out` is ``[fn(item) for item in items]`` on up to ``threads`` threads: each call runs in a copy of the
caller's context (DSPy's settings, the LM, the traces being recorded), its stage records and counted events are kept
apart while it runs (a :class:`~multihop.runtime.tracing.Branch` per trace), and once every call has ended they are
added in the items' order, so ``stage_trace``, ``counts`` and DSPy's own trace (``dspy.settings.trace``, which
optimizers and trajectory collection read) are exactly the serial loop's. When a call raises, the calls before it keep
their records, the failing call keeps those it made, later calls not yet started never start, those already running are
dropped, and the first error in the items' order is raised — what the serial loop would have recorded before the
same error. (Their LM usage is not dropped: DSPy's tracker has it; the serial loop would not have spent it.)

:func:`concurrency` says how many calls an LM takes at once: an in-process engine runs one call at a time (it holds
one lock), so fanning out only adds threads; a served LM takes :data:`SERVED_INNER_THREADS`
(``$MULTIHOP_INNER_THREADS``). Fan-outs nest (HANRAG's sub-questions each judge their passages) and multiply with
``--threads``: a server sees up to questions × inner threads² requests at once.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import TypeVar

import dspy

from multihop.runtime.tracing import Branch, active_traces

SERVED_INNER_THREADS = 8  # independent calls of one question sent at once to a served LM
INNER_THREADS_ENV = "MULTIHOP_INNER_THREADS"
CHUNK_PER_THREAD = 4  # items a thread takes between two results handed back by fan_out_chunks

T = TypeVar("T")
R = TypeVar("R")


def fan_out(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """``[fn(item) for item in items]`` with up to ``threads`` calls at once, results, records and counts in the
    items' order (serial when ``threads`` is 1 or there is one item)."""
    results, error = _fan_out(fn, list(items), threads)
    if error is not None:
        raise error
    return results


def _fan_out(fn: Callable[[T], R], items: list[T], threads: int) -> tuple[list[R], BaseException | None]:
    """The results of the calls before the first one to fail, in order, and that failure (None when none failed);
    calls not yet started when it is known are not started."""
    if threads <= 1 or len(items) <= 1:
        results = []
        for item in items:
            try:
                results.append(fn(item))
            except Exception as exc:  # noqa: BLE001 - handed to the caller, as the threaded path does
                return results, exc
        return results, None
    traces, dspy_trace = active_traces(), dspy.settings.trace

    def branch(item: T) -> tuple[list[Branch], list, R | None, BaseException | None]:
        branches, calls = [Branch() for _ in traces], []
        for trace, own in zip(traces, branches, strict=True):
            trace.branch.set(own)  # this call's context is a copy: the caller's branch is untouched
        try:
            with dspy.context(trace=calls) if dspy_trace is not None else nullcontext():
                return branches, calls, fn(item), None
        except Exception as exc:  # noqa: BLE001 - raised again, in the items' order, by the caller
            return branches, calls, None, exc

    results: list[R] = []
    with ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="multihop-fan-out") as pool:
        futures = [pool.submit(contextvars.copy_context().run, branch, item) for item in items]
        try:
            for i, future in enumerate(futures):
                branches, calls, result, error = future.result()
                for trace, own in zip(traces, branches, strict=True):
                    trace.merge(own)
                if dspy_trace is not None:  # DSPy's own trace (optimizers, trajectories) in the serial order too
                    dspy_trace.extend(calls[: max(0, dspy.settings.max_trace_size - len(dspy_trace))])
                if error is not None:
                    for later in futures[i + 1:]:
                        later.cancel()
                    return results, error
                results.append(result)
        except BaseException:  # an interrupt: nothing more starts
            for future in futures:
                future.cancel()
            raise
    return results, None


def fan_out_chunks(fn: Callable[[T], R], items: Sequence[T], threads: int) -> Iterator[list[tuple[T, R]]]:
    """:func:`fan_out` over ``items`` a chunk at a time (``threads`` × :data:`CHUNK_PER_THREAD` items; one when
    serial), yielding each chunk's ``(item, result)`` pairs in order: a batch job appends them as they come, so an
    interrupt loses at most the chunk in flight, which a rerun redoes."""
    size = 1 if threads <= 1 else threads * CHUNK_PER_THREAD
    for start in range(0, len(items), size):
        chunk = list(items[start:start + size])
        results, error = _fan_out(fn, chunk, threads)
        if results:  # the chunk's calls before a failure are kept, as a serial loop's
            yield list(zip(chunk[: len(results)], results, strict=True))
        if error is not None:
            raise error


def concurrency(*lms: dspy.BaseLM | None) -> int:
    """How many independent calls to send at once to ``lms`` (None: the configured LM): 1 when any of them runs
    in this process (its engine holds one lock), else :data:`SERVED_INNER_THREADS`."""
    for lm in lms or (None,):
        if getattr(getattr(lm or dspy.settings.lm, "engine", None), "in_process", False):
            return 1
    return served_inner_threads()


def served_inner_threads() -> int:
    """:data:`SERVED_INNER_THREADS`, or ``$MULTIHOP_INNER_THREADS`` (a server that takes fewer requests at once)."""
    value = os.environ.get(INNER_THREADS_ENV)
    if value is None:
        return SERVED_INNER_THREADS
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{INNER_THREADS_ENV} is a number of threads (1 or more), not {value!r}")
    return int(value)
