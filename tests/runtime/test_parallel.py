"""Independent calls run at once: :func:`multihop.runtime.parallel.fan_out` gives the serial loop's results,
records and counts in its order whatever order the calls end in, and every program with independent calls (HANRAG's
relevance judgments and compound sub-questions, CIRAG's per-document extraction, DualRAG's per-entity retrieval and
summaries) answers, traces and counts the same at ``inner_threads`` 4 as at 1 on a scripted LM whose replies come
back in a shuffled order."""

import hashlib
import json
import threading
import time

import dspy
import pytest

from multihop.lm.backends import make_lm
from multihop.lm.engines.served import ServedEngine
from multihop.programs import CIRAG, HANRAG, DualRAG
from multihop.runtime.parallel import SERVED_INNER_THREADS, concurrency, fan_out
from multihop.runtime.tracing import count, record_trace

from helpers import PASSAGES, StaticRetriever, TypedScript


def test_fan_out_keeps_the_items_order_of_results_records_and_counts():
    active, peak, lock = [0], [0], threading.Lock()

    def call(i):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05 * (4 - i))  # the last item ends first
        count(f"item{i}")
        count("items")
        with lock:
            active[0] -= 1
        return i * 10

    with record_trace() as trace:
        assert fan_out(call, range(4), threads=4) == [0, 10, 20, 30]
    assert peak[0] == 4
    assert list(trace.events) == ["item0", "items", "item1", "item2", "item3"]
    assert trace.events["items"] == 4


def test_fan_out_raises_the_first_error_in_order_with_the_serial_loops_counts():
    def call(i):
        count("started")
        if i in (1, 2):
            time.sleep(0.05 if i == 1 else 0)  # item 2 fails first; item 1's error is the serial loop's
            raise ValueError(f"item {i}")
        return i

    with record_trace() as trace, pytest.raises(ValueError, match="item 1"):
        fan_out(call, range(4), threads=4)
    assert trace.events["started"] == 2  # items 0 and 1, as the serial loop: 2 and 3 never counted


def test_fan_out_nested_in_a_fan_out_keeps_the_serial_order():
    def inner(pair):
        time.sleep(0.01 * (3 - pair[1]))
        count(f"{pair[0]}.{pair[1]}")

    def outer(i):
        time.sleep(0.02 * (2 - i))
        fan_out(inner, [(i, j) for j in range(3)], threads=3)

    with record_trace() as trace:
        fan_out(outer, range(2), threads=2)
    assert list(trace.events) == ["0.0", "0.1", "0.2", "1.0", "1.1", "1.2"]


def test_an_in_process_engine_takes_one_call_at_a_time_and_a_served_lm_eight():
    local = make_lm("local:smollm2")
    served = dspy.LM("openai/x", engine=ServedEngine("http://127.0.0.1:9/v1", "x", timeout=5,
                                                     schema_form="json_schema"))
    assert concurrency(served) == SERVED_INNER_THREADS
    assert concurrency(served, local) == 1
    assert concurrency(dspy.LM("hosted_vllm/x")) == SERVED_INNER_THREADS


class ShuffledScript(TypedScript):
    """Replies drawn from the output types, each after a delay drawn from its prompt, so calls sent at once end in
    an order unrelated to the order they were sent; DualRAG's reasoner always asks for retrieval, and its entity
    identifier names three entities, so each round has independent calls."""

    def respond(self, prompt: str) -> dict:
        time.sleep(int(hashlib.sha256(prompt.encode()).hexdigest()[:2], 16) / 255 * 0.03)
        reply = super().respond(prompt)
        if "need_retrieval" in reply:
            reply["need_retrieval"] = "true"
        if "entities" in reply:
            reply["entities"] = json.dumps([{"entity": name, "queries": [f"{name} facts"]}
                                            for name in ("Nolan", "London", "Thames")])
        return reply


def programs():
    retriever = StaticRetriever(PASSAGES)
    return {
        "HANRAG compound": lambda: HANRAG(retriever=retriever, route="compound", k=5),
        "HANRAG complex": lambda: HANRAG(retriever=retriever, route="complex", k=5),
        "CIRAG": lambda: CIRAG(retriever=retriever, k=5, encoder="minilm", max_iterations=2),
        "DualRAG": lambda: DualRAG(retriever=retriever, k=3, rerank=None),
    }


def stable(record: dict) -> dict:
    return {key: value for key, value in record.items() if key not in ("start_s", "latency_s")}


@pytest.mark.parametrize("name", sorted(programs()))
def test_a_program_with_independent_calls_gives_the_serial_run_at_four_inner_threads(name):
    runs, dspy_traces = {}, {}
    for threads in (1, 4):
        program = programs()[name]()
        program.inner_threads = threads
        script = ShuffledScript(program, garbled=0.1)
        names = {id(predictor): stage for stage, predictor in program.named_predictors()}
        calls = []  # DSPy's own trace, which optimizers and trajectory collection read
        with dspy.context(lm=script.lm, adapter=dspy.ChatAdapter(), trace=calls):
            runs[threads] = [program(question=q) for q in ("Who directed Inception and where was he born?",
                                                         "Which river flows through the capital of England?")]
        dspy_traces[threads] = [(names[id(predictor)], dict(inputs)) for predictor, inputs, _ in calls]
    assert dspy_traces[4] == dspy_traces[1]
    for serial, parallel in zip(runs[1], runs[4], strict=True):
        assert parallel.answer == serial.answer
        assert [stable(r) for r in parallel.stage_trace] == [stable(r) for r in serial.stage_trace]
        assert parallel.counts == serial.counts
    assert sum(p.counts["llm_calls"] for p in runs[4]) > 4
    if name == "DualRAG":
        assert sum(p.counts["entities"] for p in runs[4]) >= 3  # a round of three entities, searched at once
