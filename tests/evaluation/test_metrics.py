import pytest

from multihop.evaluation.metrics import accuracy, cover_em, dspy_metric, exact_match, f1, normalize_answer, recall_at_k


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
    with pytest.raises(ValueError, match="unknown metric"):
        dspy_metric("bleu")
