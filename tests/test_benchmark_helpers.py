"""The benchmarks' helpers against hand-computed values: the throughput benchmark's sequential LM rounds of a
question's trace and ideal wall time of questions run through a fixed number of slots, and the retrieval benchmark's
ranking measures (by ranx) of a retriever's top passages."""

import importlib.util
import math
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



def test_encoder_batching_settings_read_as_texts_seconds_tokens_and_threads_and_a_bad_one_is_refused():
    assert throughput.batching("64x2") == (64, 0.002, throughput.FORWARD_TOKENS, None)
    assert throughput.batching("1x0x0@1") == (1, 0.0, 0, 1)
    for bad in ("64", "0x2", "x2", "64x-1", "64x2x", "64x2x1x1", "64x2@0", "64x2@"):
        with pytest.raises(SystemExit, match="MAXxWAIT"):
            throughput.batching(bad)


def test_a_rows_encoder_cells_show_its_batches_sizes_waits_and_seconds():
    stats = throughput.BatchStats(batches=2, calls=5, texts=6, waited_s=0.05, longest_wait_s=0.02, run_s=1.5)
    stats.sizes.update({2: 1, 4: 1})
    row = {"program": "P", "mode": "threads", "in_flight": 4, "questions": 2, "wall_s": 2.0, "llm_calls": 2,
           "lm_requests": [1, 1], "rounds": [1, 1], "stage_errors": 0, "harness_ms_per_call": 3.0,
           "batching": "64x2", "encoder": stats.as_dict()}
    cells = dict(zip(throughput.COLUMNS, throughput.cells(row, 0.3, [1, 1]), strict=True))
    assert (cells["batching"], cells["encoder batches"], cells["texts/batch (max)"], cells["wait ms (max)"],
            cells["encoder s"]) == ("64x2", "2", "3.0 (4)", "10 (20)", "1.5")
    del row["batching"], row["encoder"]  # a row saved without them
    assert throughput.cells(row, 0.3, [1, 1])[3] == "-"

def benchmark(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark",
                                                  Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # ranx's measures are numba code, compiled on first use (~50 s in a fresh venv)
def test_the_retrieval_benchmark_scores_each_retrievers_top_passages_with_ranx():
    pytest.importorskip("ranx")
    from multihop.data.corpus import Passage

    from helpers import StaticRetriever, example

    retrieval = benchmark("retrieval")
    passages = [Passage.make(title, f"{title} text.") for title in ("A", "B", "C")]
    a, b, c = (passage.id for passage in passages)
    questions = [example(0, gold_passage_ids=[b]), example(1, gold_passage_ids=[a, c]), example(2)]  # q2: no gold
    row = retrieval.recall_row("static", StaticRetriever(passages), questions)  # A, B, C for every question
    # q0: B at rank 2 (R@2 1, nDCG 1/log2 3, RR 1/2); q1: A at 1, C at 3 (R@2 1/2, nDCG 1.5 / (1 + 1/log2 3), RR 1)
    ndcg = (1 / math.log2(3) + 1.5 / (1 + 1 / math.log2(3))) / 2
    assert row[:5] == ["static", "75.0", "100.0", f"{100 * ndcg:.1f}", "75.0"]
    scores = retrieval.ranking_scores({"q0": [b], "q1": []}, questions)  # q1 found nothing: 0
    assert scores == {"recall@2": 0.5, "recall@5": 0.5, "ndcg@10": 0.5, "mrr": 0.5}
