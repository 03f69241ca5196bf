"""The throughput benchmark's pure helpers against hand-computed values: a question's sequential LM rounds from its
trace, and the ideal wall time of questions run through a fixed number of slots."""

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "throughput_benchmark", Path(__file__).resolve().parents[1] / "benchmarks" / "throughput.py")
throughput = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(throughput)


@pytest.mark.parametrize(("durations", "in_flight", "wall"), [
    ([0.3] * 96, 32, 0.9),  # three full rounds
    ([0.3] * 100, 32, 1.2),  # the last 4 questions start when the first 4 end
    ([0.3] * 32, 64, 0.3),  # more slots than questions: all at once
    ([1.0, 0.2, 0.2, 0.2, 0.2], 2, 1.0),  # the short ones run one after another beside the long one
    ([0.2, 0.2, 1.0], 2, 1.2),  # the long one starts last, when a slot frees at 0.2
    ([0.5, 0.1, 0.4], 1, 1.0),  # one slot: the sum
    ([], 4, 0.0),
])
def test_the_ideal_wall_is_the_slots_list_schedule_in_order(durations, in_flight, wall):
    assert throughput.ideal_wall(durations, in_flight) == pytest.approx(wall)


def test_lm_rounds_count_calls_that_do_not_overlap_and_each_retry():
    trace = [
        {"kind": "lm", "start_s": 0.0, "latency_s": 0.3},
        {"kind": "retriever", "start_s": 0.3, "latency_s": 0.1},
        {"kind": "lm", "start_s": 0.4, "latency_s": 0.3},  # a fan-out of three overlapping calls: one round
        {"kind": "lm", "start_s": 0.41, "latency_s": 0.3},
        {"kind": "lm", "start_s": 0.42, "latency_s": 0.3},
        {"kind": "lm", "start_s": 0.8, "latency_s": 0.6, "lm_requests": 2},  # retried: two rounds
    ]
    assert throughput.lm_rounds(trace) == 4
