"""How sure a score is: a bootstrap interval of a mean over questions, and a paired test of two programs on the same
questions, both by scipy and seeded, so the same rows always give the same numbers (docs/design.md, "Evaluation").

Each question's value of a metric follows the rules of the evaluation summary's means (its means are computed from
:func:`metric_values`), so an interval is an interval around the very mean printed: EM, F1, Acc and Cover-EM count every
question, an errored one as 0; recall, nDCG, MRR and LLM Eval only the questions that have them; a user's metric every
question, an errored one as 0, but not one whose metric raised; a count every question, 0 where it is absent.

Intervals are percentile bootstrap intervals (``scipy.stats.bootstrap(method="percentile")``). BCa corrects for skew
but is undefined where every value is equal (all questions right, or all wrong: common on a few questions) and returns
NaN there; the percentile interval of equal values is the zero-width interval at that value. That zero width is the
bootstrap's answer, not certainty: on a few questions read the question count beside it. Fewer than two values have
no interval (None): a single question says nothing of the spread.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 1000  # bootstrap resamples of an interval
PERMUTATIONS = 9999  # sign flips of a paired test; the test is exact where 2**n is no more
BATCH = 1000  # resamples evaluated at once: bounds the memory on thousands of questions
ANSWER_METRICS = ("em", "f1", "acc", "cover_em")  # every question; an errored one scores 0
GRADED_METRICS = ("recall@2", "recall@5", "recall@k", "ndcg@10", "mrr", "llm_eval")  # the questions that have one
DEFAULT_COUNTS = ("llm_calls", "retrieval_calls", "tokens", "stage_errors")  # counted even where no row has them


def bootstrap_interval(values: Sequence[float], confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                       seed: int = 0) -> tuple[float, float] | None:
    """The ``confidence`` percentile bootstrap interval of the mean of ``values`` (``resamples`` resamples drawn with
    ``seed``), or None for fewer than two values. The values are sorted first, so the same values in any order give
    the same interval."""
    sample = np.sort(np.asarray(values, dtype=float))
    if sample.size < 2:
        return None
    result = stats.bootstrap((sample,), np.mean, n_resamples=resamples, batch=BATCH, confidence_level=confidence,
                             method="percentile", rng=np.random.default_rng(seed))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def paired_test(a: Sequence[float], b: Sequence[float], seed: int = 0) -> dict:
    """Two programs' values on the same questions (``a[i]`` and ``b[i]`` are question i's): ``difference``, the mean of
    b − a (positive where b scores higher); ``interval``, its 95% paired bootstrap interval (the questions resampled,
    each with both its values: :func:`bootstrap_interval` of the differences); ``p_value``, two-sided, of a sign-flip
    permutation test of the mean difference (``scipy.stats.permutation_test`` of the differences with
    ``permutation_type="samples"``: under the null hypothesis each question's difference is as likely of either sign;
    exact up to 13 questions); and ``n``, the questions. With one question there is no interval and no p-value (None),
    with none no difference either."""
    if len(a) != len(b):
        raise ValueError(f"a paired test takes the values of the same questions: got {len(a)} and {len(b)}")
    differences = np.sort(np.asarray(b, dtype=float) - np.asarray(a, dtype=float))
    n = int(differences.size)
    difference = float(differences.mean()) if n else None
    if n < 2:
        return {"difference": difference, "interval": None, "p_value": None, "n": n}
    flips = stats.permutation_test((differences,), np.mean, permutation_type="samples", n_resamples=PERMUTATIONS,
                                   batch=BATCH, rng=np.random.default_rng(seed))
    return {"difference": difference, "interval": list(bootstrap_interval(differences, seed=seed)),
            "p_value": float(flips.pvalue), "n": n}


def question_values(rows: Sequence[dict], key: str) -> list[float | None]:
    """Each evaluation row's value of ``key`` (a metric, a user's metric, a count or ``seconds``) as the summary's mean
    counts it, None where the question has none (module docstring). A key some row counts is a count; any other key
    is a user's metric."""
    if key == "seconds":
        return [row["seconds"] for row in rows]
    if key in ANSWER_METRICS:
        return [row["metrics"].get(key, 0.0) for row in rows]
    if key in GRADED_METRICS:
        return [row["metrics"].get(key) for row in rows]
    if key in DEFAULT_COUNTS or any(key in row["counts"] for row in rows):
        return [row["counts"].get(key, 0) for row in rows]
    return [0.0 if row.get("error") else row["metrics"].get(key) for row in rows]


def metric_values(rows: Sequence[dict], key: str) -> list[float]:
    """The values of ``key`` the summary averages: those of the questions that have one, in the rows' order."""
    return [value for value in question_values(rows, key) if value is not None]


def mean(values: Sequence[float]) -> float | None:
    """The mean of ``values``, None for none."""
    return sum(values) / len(values) if values else None


def metric_interval(rows: Sequence[dict], key: str, seed: int = 0) -> list[float] | None:
    """The 95% bootstrap interval ``[low, high]`` of the summary's mean of ``key`` over ``rows``, None with fewer than
    two values."""
    found = bootstrap_interval(metric_values(rows, key), seed=seed)
    return list(found) if found else None


def paired_values(a_rows: Sequence[dict], b_rows: Sequence[dict], key: str) -> tuple[list[float], list[float]]:
    """Two runs' values of ``key`` aligned by question id (rows of one question set: ids are unique in it): the
    questions both runs answered and both have a value for (a program that never retrieves has no recall), in
    ``a_rows``' order."""
    a = dict(zip((row["id"] for row in a_rows), question_values(a_rows, key), strict=True))
    b = dict(zip((row["id"] for row in b_rows), question_values(b_rows, key), strict=True))
    shared = [qid for qid, value in a.items() if value is not None and b.get(qid) is not None]
    return [a[qid] for qid in shared], [b[qid] for qid in shared]
