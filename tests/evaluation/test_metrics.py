import math
import random

import pytest

from multihop.evaluation.metrics import (
    accuracy,
    cover_em,
    dspy_metric,
    exact_match,
    f1,
    ndcg_at_k,
    normalize_answer,
    recall_at_k,
    reciprocal_rank,
)


def test_normalize_answer_follows_squad():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a pear") == "apple pear"


def test_exact_match_takes_the_best_alias():
    assert exact_match("the Beatles", ["Beatles"]) == 1.0
    assert exact_match("Paul McCartney", ["John Lennon", "paul mccartney"]) == 1.0
    assert exact_match("Paul", ["Paul McCartney"]) == 0.0


def test_f1_hand_checked():
    # prediction tokens {barack, obama}, gold {obama}: precision 1/2, recall 1 -> 2/3
    assert f1("Barack Obama", "Obama") == pytest.approx(2 / 3)
    assert f1("Barack Obama", ["Michelle", "Barack Obama"]) == 1.0
    assert f1("yes", "no") == 0.0
    assert f1("", "Obama") == 0.0


def test_accuracy_is_containment_of_the_normalised_gold():
    assert accuracy("It was Paris, France.", ["paris"]) == 1.0
    assert accuracy("Lyon", ["Paris"]) == 0.0
    assert accuracy("categorical", ["cat"]) == 1.0  # substring containment, unlike Cover-EM


def test_cover_em_needs_a_contiguous_token_subsequence():
    assert cover_em("The answer is New York City.", ["new york"]) == 1.0
    assert cover_em("York, New", ["new york"]) == 0.0
    assert cover_em("categorical", ["cat"]) == 0.0
    assert cover_em("the cat", ["The cat"]) == 1.0  # articles are kept by ComposeRAG's Normalize()


def test_recall_at_k():
    assert recall_at_k(["a", "b", "c"], ["c", "d"], 2) == 0.0
    assert recall_at_k(["a", "b", "c"], ["c", "d"], 3) == 0.5
    assert recall_at_k(["a"], [], 5) is None


def test_dspy_metric_wrappers():
    import dspy

    example = dspy.Example(question="q", answers=["Paris"], gold_passage_ids=["p1", "p2"])
    prediction = dspy.Prediction(answer="paris", passage_ids=["p2", "x", "p1"])
    assert dspy_metric("em")(example, prediction) == 1.0
    assert dspy_metric("recall@2")(example, prediction) == 0.5
    assert dspy_metric("mrr")(example, prediction) == 1.0
    assert dspy_metric("ndcg@2")(example, prediction) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    with pytest.raises(ValueError, match="unknown metric"):
        dspy_metric("bleu")


def test_ndcg_hand_computed():
    # gold at ranks 2 and 3: DCG = 1/log2(3) + 1/log2(4); ideal (both first) = 1 + 1/log2(3)
    assert ndcg_at_k(["a", "g1", "g2"], ["g1", "g2"], 10) == pytest.approx(
        (1 / math.log2(3) + 1 / 2) / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["g1", "a"], ["g1", "g2", "g3"], 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at_k(["a", "b", "g1"], ["g1"], 2) == 0.0  # beyond the cut-off
    assert ndcg_at_k(["g1", "g1", "g2"], ["g1", "g2"], 10) == 1.0  # a repeat counts at its first rank
    assert ndcg_at_k(["a"], [], 10) is None


def test_reciprocal_rank_hand_computed():
    assert reciprocal_rank(["a", "b", "g"], ["g", "h"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(["a", "a", "g"], ["g"]) == 0.5  # ranks count each id once
    assert reciprocal_rank(["a", "b", "g"], ["g"], k=2) == 0.0
    assert reciprocal_rank([], ["g"]) == 0.0
    assert reciprocal_rank(["g"], []) is None


@pytest.mark.slow  # ranx's measures are numba code, compiled on first use (~50 s in a fresh venv)
def test_ranking_measures_equal_ranx():
    ranx = pytest.importorskip("ranx")
    rng = random.Random(0)
    runs, gold = {}, {}
    for q in range(40):
        pool = [f"d{i}" for i in range(30)]
        gold[f"q{q}"] = rng.sample(pool, rng.randint(1, 4))
        runs[f"q{q}"] = rng.sample(pool, rng.randint(1, 15))
    runs["q0"] = [gold["q0"][0]]  # a perfect single hit
    qrels = ranx.Qrels({qid: dict.fromkeys(ids, 1) for qid, ids in gold.items()})
    run = ranx.Run({qid: {pid: float(len(ids) - rank) for rank, pid in enumerate(ids)} for qid, ids in runs.items()})
    ranx.evaluate(qrels, run, ["ndcg@10", "mrr", "recall@5"])  # keeps each query's score in run.scores
    for qid in runs:
        assert ndcg_at_k(runs[qid], gold[qid], 10) == pytest.approx(run.scores["ndcg@10"][qid])
        assert reciprocal_rank(runs[qid], gold[qid]) == pytest.approx(run.scores["mrr"][qid])
        assert recall_at_k(runs[qid], gold[qid], 5) == pytest.approx(run.scores["recall@5"][qid])
