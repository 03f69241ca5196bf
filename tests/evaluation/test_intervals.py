"""Bootstrap intervals and paired tests (``multihop.evaluation.intervals``) against hand-computed values, and the
per-question values behind them against the summary's means."""

import pytest

from multihop.evaluation.intervals import (
    bootstrap_interval,
    metric_interval,
    metric_values,
    paired_test,
    paired_values,
    question_values,
)
from multihop.evaluation.runner import summarize


def row(qid, em=None, f1=None, error=None, counts=None, seconds=1.0, **metrics):
    """An evaluation row as ``run_question`` writes it; an errored one has no metrics and no counts."""
    if error:
        return {"id": qid, "metrics": {}, "counts": {}, "error": error, "seconds": seconds}
    return {"id": qid, "metrics": {"em": em, "f1": f1, **metrics}, "counts": counts or {}, "error": None,
            "seconds": seconds}


ROWS = [
    row("q1", 1.0, 1.0, counts={"llm_calls": 2, "fallbacks": 1}, seconds=1.0, **{"recall@2": 1.0}, mine=1.0),
    row("q2", 0.0, 0.5, counts={"llm_calls": 4}, seconds=2.0, llm_eval=1.0, **{"recall@2": 0.0}, mine=None),
    row("q3", error="RuntimeError: boom", seconds=0.5),
    row("q4", 1.0, 1.0, counts={"llm_calls": 3}, seconds=0.0, **{"recall@2": None}, mine=0.0),
]


def test_equal_values_have_a_zero_width_interval_and_fewer_than_two_none():
    assert bootstrap_interval([0.5] * 5) == (0.5, 0.5)
    assert bootstrap_interval([1.0]) is None and bootstrap_interval([]) is None


def test_two_values_span_their_range():
    # the resampled means of [0, 1] are 0, 0.5 and 1 with chances 1/4, 1/2, 1/4: their 2.5th and 97.5th percentiles
    assert bootstrap_interval([0.0, 1.0]) == (0.0, 1.0)


def test_the_interval_contains_the_mean_and_is_the_same_for_a_seed_and_any_order():
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.25, 0.5, 1.0, 0.0, 1.0, 0.4, 0.7, 0.9]
    low, high = bootstrap_interval(values)
    assert low < sum(values) / len(values) < high and 0.0 <= low and high <= 1.0
    assert bootstrap_interval(values) == bootstrap_interval(values[::-1]) == (low, high)
    assert bootstrap_interval(values, seed=1) != (low, high)  # another seed, other resamples
    narrower = bootstrap_interval(values, confidence=0.5)
    assert low < narrower[0] < narrower[1] < high


def test_a_program_that_beats_the_other_by_one_on_every_question():
    test = paired_test([0.0] * 10, [1.0] * 10)
    # every sign flipped but all or none gives a smaller |mean|: exactly 2 of the 2**10 flips are as extreme
    assert test == {"difference": 1.0, "interval": [1.0, 1.0], "p_value": 2 / 2**10, "n": 10}
    assert paired_test([1.0] * 10, [0.0] * 10)["difference"] == -1.0  # b − a


def test_identical_programs_differ_by_nothing_with_p_one():
    values = [0.0, 1.0, 0.5, 1.0]
    assert paired_test(values, values) == {"difference": 0.0, "interval": [0.0, 0.0], "p_value": 1.0, "n": 4}


def test_a_paired_test_on_one_or_no_question_and_on_unequal_lists():
    assert paired_test([0.0], [1.0]) == {"difference": 1.0, "interval": None, "p_value": None, "n": 1}
    assert paired_test([], []) == {"difference": None, "interval": None, "p_value": None, "n": 0}
    with pytest.raises(ValueError, match="same questions"):
        paired_test([0.0, 1.0], [1.0])


def test_a_paired_test_is_seeded():
    a, b = [0.0, 1.0, 0.0, 1.0] * 5, [1.0, 1.0, 0.0, 0.0, 1.0] * 4
    test = paired_test(a, b)
    assert test == paired_test(a, b) and test["difference"] == pytest.approx(0.1) and test["n"] == 20
    assert test["interval"][0] < 0.1 < test["interval"][1] and 0.3 < test["p_value"] <= 1.0


def test_each_questions_value_follows_the_summarys_rules():
    assert question_values(ROWS, "em") == [1.0, 0.0, 0.0, 1.0]  # the errored question scores 0
    assert question_values(ROWS, "recall@2") == [1.0, 0.0, None, None]  # only the questions that have one
    assert question_values(ROWS, "llm_eval") == [None, 1.0, None, None]
    assert question_values(ROWS, "mine") == [1.0, None, 0.0, 0.0]  # a user metric: raised → none, errored → 0
    assert question_values(ROWS, "fallbacks") == [1, 0, 0, 0]  # a count: 0 where absent
    assert question_values(ROWS, "stage_errors") == [0, 0, 0, 0]  # counted even where no row has it
    assert question_values(ROWS, "seconds") == [1.0, 2.0, 0.5, 0.0]
    assert metric_values(ROWS, "recall@2") == [1.0, 0.0]


def test_the_summarys_means_are_the_means_of_the_values_its_intervals_resample():
    summary = summarize(ROWS, metric_names=["mine"])
    assert (summary["em"], summary["f1"], summary["recall@2"], summary["llm_eval"]) == (0.5, 0.625, 0.5, 1.0)
    assert summary["mine"] == pytest.approx(1 / 3) and summary["llm_calls"] == 2.25 and summary["fallbacks"] == 0.25
    assert summary["seconds"] == 0.875 and summary["judged"] == 1 and summary["recall@5"] is None
    intervals = summary["intervals"]
    for key in ("mine", "em", "f1", "acc", "cover_em", "recall@2", "llm_calls", "fallbacks", "stage_errors",
                "seconds"):
        assert intervals[key] == metric_interval(ROWS, key)
        assert intervals[key][0] <= summary[key] <= intervals[key][1]
    assert intervals["llm_eval"] is None and intervals["recall@5"] is None  # one value, none
    assert intervals["cover_em"] == [0.0, 0.0]
    assert set(intervals) == {"mine", "em", "f1", "acc", "cover_em", "recall@2", "recall@5", "recall@k", "ndcg@10",
                              "mrr", "llm_eval", "llm_calls", "retrieval_calls", "tokens", "stage_errors",
                              "fallbacks", "seconds"}
    assert "intervals" not in summarize([])


def test_two_runs_are_paired_on_the_questions_both_have_a_value_for():
    other = [row("q4", 0.0, 0.0, **{"recall@2": 1.0}), row("q2", 1.0, 1.0, **{"recall@2": 1.0}),
             row("q3", 1.0, 1.0, **{"recall@2": 0.0}), row("q9", 1.0, 1.0)]
    assert paired_values(ROWS, other, "em") == ([0.0, 0.0, 1.0], [1.0, 1.0, 0.0])  # q2, q3 (errored: 0), q4
    assert paired_values(ROWS, other, "recall@2") == ([0.0], [1.0])  # q2: q3 errored, q4 has none in ROWS
