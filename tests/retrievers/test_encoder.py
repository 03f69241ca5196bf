"""Concurrent encoder calls gathered into batches (:class:`multihop.retrievers.encoder.Coalescing`): each caller gets
its own rows in order, the same vectors as alone (within float rounding), a failing batch reaches its own callers
only, and a batch starts when full or when its window ends, never holding a caller past its batch."""

import pickle
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from multihop.retrievers.encoder import BatchStats, Coalescing, Encoder

from helpers import tiny

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def rows(result, start, stop):
    return result[start:stop]


def texts_of(i: int) -> list[str]:
    """1–3 texts of different lengths for caller ``i`` (a padded batch mixes lengths)."""
    return [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(1 + (i * 7 + n) % 9)) for n in range(1 + i % 3)]


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> Encoder:
    return Encoder(tiny(tmp_path_factory.mktemp("tiny-encoder"), 2), device="cpu")


def run_at_once(fn, items: list, threads: int) -> list:
    """``fn(item)`` for every item, each on its own thread, all released together."""
    start = threading.Barrier(threads)

    def call(item):
        start.wait(5)
        return fn(item)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(call, items))


@pytest.mark.slow  # a tiny model built and loaded (~10 s with torch's import on 2 cores)
@pytest.mark.parametrize("threads", [8, 32])
def test_concurrent_callers_get_their_own_vectors_as_unbatched_in_order(tiny_encoder, threads):
    alone = Encoder(tiny_encoder.path, device="cpu", max_batch=1, forward_tokens=0)  # each call alone, 8 a pass
    calls = [texts_of(i) for i in range(threads)]
    tiny_encoder.configure_batching(max_batch=64, max_wait_s=0.05, forward_tokens=1024)  # short texts: many a pass
    pooled = run_at_once(tiny_encoder.encode, calls, threads)
    states = run_at_once(lambda texts: tiny_encoder.states(texts, token_layers=(1,)), calls, threads)
    stats = tiny_encoder.batching_stats()
    assert stats.calls == 2 * threads and stats.texts == 2 * sum(map(len, calls))
    assert stats.batches < stats.calls  # calls were gathered, not run one by one
    for texts, vectors, state in zip(calls, pooled, states, strict=True):
        np.testing.assert_allclose(vectors, alone.encode(texts), atol=1e-5)
        own = alone.states(texts, token_layers=(1,))
        np.testing.assert_allclose(state.pooled, own.pooled, atol=1e-5)
        np.testing.assert_allclose(state.cls, own.cls, atol=1e-5)
        for mine, theirs in zip([*state.tokens, *state.layer_tokens[1]], [*own.tokens, *own.layer_tokens[1]],
                                strict=True):
            np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert alone.batching_stats().sizes.keys() <= {1, 2, 3}  # max_batch 1: each call alone, whatever its length


@pytest.mark.slow
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device")
def test_batched_vectors_on_cuda_match_the_unbatched_ones(tiny_encoder):
    gpu = Encoder(tiny_encoder.path, device="cuda", precision="fp32", max_wait_s=0.05)
    calls = [texts_of(i) for i in range(16)]
    for texts, vectors in zip(calls, run_at_once(gpu.encode, calls, 16), strict=True):
        np.testing.assert_allclose(vectors, tiny_encoder.encode(texts), atol=1e-5)


def test_a_failing_batch_reaches_the_callers_whose_texts_raise_and_no_other_batch():
    def run(texts):
        time.sleep(0.02)
        if any(text.startswith("boom") for text in texts):
            raise RuntimeError("forward failed")
        return [text.upper() for text in texts]

    batcher = Coalescing(run, rows, max_batch=4, max_wait_s=0.05)
    calls = [["a"], ["boom-b"], ["c", "d"], ["e"], ["boom-f"], ["g"]]
    outcomes = run_at_once(lambda texts: _outcome(batcher, texts), calls, len(calls))
    for texts, outcome in zip(calls, outcomes, strict=True):
        if texts[0].startswith("boom"):
            assert isinstance(outcome, RuntimeError) and str(outcome) == "forward failed"
        else:
            assert outcome == [text.upper() for text in texts]

    broken = Coalescing(lambda texts: 1 / 0, rows, max_batch=8, max_wait_s=0.05)  # a broken model fails every call
    assert all(isinstance(outcome, ZeroDivisionError)
               for outcome in run_at_once(lambda texts: _outcome(broken, texts), calls, len(calls)))


def _outcome(batcher, texts):
    try:
        return batcher(texts)
    except Exception as exc:  # noqa: BLE001 - the test compares it
        return exc


def test_a_batch_keeps_max_batch_texts_and_the_callers_order():
    batches = []

    def run(texts):
        batches.append(list(texts))
        time.sleep(0.01)
        return list(texts)

    batcher = Coalescing(run, rows, max_batch=5, max_wait_s=0.02)
    calls = [[f"{i}-{j}" for j in range(1 + i % 3)] for i in range(24)] + [[f"big-{j}" for j in range(7)]]
    assert run_at_once(batcher, calls, len(calls)) == calls
    assert all(len(batch) <= 5 for batch in batches if not batch[0].startswith("big"))
    assert ["big-" + str(j) for j in range(7)] in batches  # a call longer than max_batch runs alone, whole
    assert sorted(text for batch in batches for text in batch) == sorted(text for call in calls for text in call)
    stats = batcher.take_stats()
    assert stats.batches == len(batches) and stats.texts == sum(map(len, calls)) and max(stats.sizes) == 7


def test_a_lone_call_waits_the_window_and_a_full_batch_does_not():
    started = []
    batcher = Coalescing(lambda texts: started.append(time.perf_counter()) or list(texts), rows, max_batch=4,
                         max_wait_s=0.1)
    sent = time.perf_counter()
    assert batcher(["alone"]) == ["alone"]
    assert 0.1 <= started[0] - sent < 0.3  # no company came: it ran when the window ended
    assert batcher.take_stats().longest_wait_s >= 0.1

    batcher.max_wait_s = 5.0
    sent = time.perf_counter()
    assert run_at_once(lambda text: batcher([text]), list("abcd"), 4) == [["a"], ["b"], ["c"], ["d"]]
    assert started[1] - sent < 1.0 and len(started) == 2  # four texts filled the batch: it ran at once

    nobody = Coalescing(lambda texts: list(texts), rows, max_batch=4, max_wait_s=0.0)
    sent = time.perf_counter()
    nobody(["x"])
    assert time.perf_counter() - sent < 0.05  # max_wait_s 0 waits for no company


def test_answered_callers_return_when_their_batch_ends_not_after_the_next():
    release, second_started = threading.Event(), threading.Event()
    ended = {}

    def run(texts):
        if texts[0] == "slow":
            second_started.set()
            release.wait(5)
        return list(texts)

    batcher = Coalescing(run, rows, max_batch=1, max_wait_s=0.0)  # one text a batch: "fast", then "slow"

    def call(text):
        result = batcher([text])
        ended[text] = time.perf_counter()
        return result

    with ThreadPoolExecutor(2) as pool:
        fast = pool.submit(call, "fast")
        time.sleep(0.01)
        slow = pool.submit(call, "slow")
        assert fast.result(timeout=5) == ["fast"]  # returned while the next batch still runs
        assert second_started.wait(5)
        release.set()
        assert slow.result(timeout=5) == ["slow"]
    assert ended["fast"] < ended["slow"]


def test_batching_settings_are_checked():
    with pytest.raises(ValueError, match="max_batch is a number of texts"):
        Coalescing(list, rows, max_batch=0)
    with pytest.raises(ValueError, match="max_wait_s is a number of seconds"):
        Coalescing(list, rows, max_wait_s=-1)


@pytest.mark.slow
def test_an_encoders_batching_settings_survive_pickling_and_its_counts_reset(tiny_encoder):
    encoder = Encoder(tiny_encoder.path, device="cpu", max_batch=3, max_wait_s=0.01, forward_tokens=64)
    copy = pickle.loads(pickle.dumps(encoder))
    assert (copy.max_batch, copy.max_wait_s, copy.forward_tokens) == (3, 0.01, 64) and copy._encode.max_batch == 3
    assert encoder.forward_size([4, 2]) == 16 and encoder.forward_size([100]) == encoder.batch_size == 8
    with pytest.raises(ValueError, match="forward_tokens is a number of tokens"):
        encoder.configure_batching(forward_tokens=-1)
    encoder.encode(["one text"])
    assert encoder.batching_stats(reset=True).calls == 1 and encoder.batching_stats() == BatchStats()
