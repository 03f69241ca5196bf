"""Independent calls run at once, with the results, stage records and counts a serial loop gives.

:func:`fan_out` is ``[fn(item) for item in items]`` on up to ``threads`` threads: each call runs in a copy of the
caller's context (DSPy's settings, the LM, the traces being recorded), its stage records and counted events are kept
apart while it runs (a :class:`~multihop.tracing.Branch` per trace), and once every call has ended they are added in
the items' order, so ``stage_trace`` and ``counts`` read exactly as the serial loop's. When a call raises, the calls
before it keep their records, the failing call keeps those it made, later calls' are dropped and the first error in
the items' order is raised — what the serial loop would have recorded before the same error.

:func:`concurrency` says how many calls an LM takes at once: an in-process engine runs one call at a time (it holds
one lock), so fanning out only adds threads; a served LM takes :data:`SERVED_INNER_THREADS`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import dspy

from multihop.tracing import Branch, active_traces

SERVED_INNER_THREADS = 8  # independent calls of one question sent at once to a served LM
CHUNK_PER_THREAD = 4  # items a thread takes between two results handed back by fan_out_chunks

T = TypeVar("T")
R = TypeVar("R")


def fan_out(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """``[fn(item) for item in items]`` with up to ``threads`` calls at once, results, records and counts in the
    items' order (serial when ``threads`` is 1 or there is one item)."""
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    traces = active_traces()

    def branch(item: T) -> tuple[list[Branch], R | None, BaseException | None]:
        branches = [Branch() for _ in traces]
        for trace, own in zip(traces, branches, strict=True):
            trace.branch.set(own)  # this call's context is a copy: the caller's branch is untouched
        try:
            return branches, fn(item), None
        except Exception as exc:  # noqa: BLE001 - raised again, in the items' order, by the caller
            return branches, None, exc

    with ThreadPoolExecutor(max_workers=min(threads, len(items)), thread_name_prefix="multihop-fan-out") as pool:
        done = [future.result() for future in
                [pool.submit(contextvars.copy_context().run, branch, item) for item in items]]
    results = []
    for branches, result, error in done:
        for trace, own in zip(traces, branches, strict=True):
            trace.merge(own)
        if error is not None:
            raise error
        results.append(result)
    return results


def fan_out_chunks(fn: Callable[[T], R], items: Sequence[T], threads: int) -> Iterator[list[tuple[T, R]]]:
    """:func:`fan_out` over ``items`` a chunk at a time (``threads`` × :data:`CHUNK_PER_THREAD` items; one when
    serial), yielding each chunk's ``(item, result)`` pairs in order: a batch job appends them as they come, so an
    interrupt loses at most the chunk in flight, which a rerun redoes."""
    size = 1 if threads <= 1 else threads * CHUNK_PER_THREAD
    for start in range(0, len(items), size):
        chunk = list(items[start:start + size])
        yield list(zip(chunk, fan_out(fn, chunk, threads), strict=True))


def concurrency(*lms: dspy.BaseLM | None) -> int:
    """How many independent calls to send at once to ``lms`` (None: the configured LM): 1 when any of them runs
    in this process (its engine holds one lock), else :data:`SERVED_INNER_THREADS`."""
    from multihop.engines.base import LocalEngine
    from multihop.engines.served import ServedEngine

    for lm in lms or (None,):
        lm = lm or dspy.settings.lm
        engine = getattr(lm, "engine", None)
        if isinstance(engine, LocalEngine) and not isinstance(engine, ServedEngine):
            return 1
    return SERVED_INNER_THREADS
