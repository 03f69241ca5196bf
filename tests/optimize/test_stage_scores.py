import pytest

from multihop.optimize.stage_scores import chain_accuracy, scored_field, stage_score, sub_question_overlap


def test_sub_question_overlap_takes_the_best_match_per_gold_sub_question():
    gold = ["Who founded Acme Press?", "Where was Ann Lee born?"]
    # "who founded acme press" matches the first exactly (1.0); "where was ann lee born" shares "ann lee" with
    # "Ann Lee?" (precision 2/2, recall 2/5 → F1 4/7)
    assert sub_question_overlap(["Who founded Acme Press?", "Ann Lee?"], gold) == pytest.approx((1 + 4 / 7) / 2)
    assert sub_question_overlap([], gold) == 0.0 and sub_question_overlap(["x"], []) == 0.0


def test_chain_accuracy_counts_tails_in_their_position():
    gold = [["Journal X", "publisher", "Acme Press"], ["Acme Press", "founder", "Ann Lee"]]
    assert chain_accuracy(gold, gold) == 1.0
    assert chain_accuracy([["Journal X", "publisher", "the Acme Press"], ["x", "y", "Bob"]], gold) == 0.5  # article
    assert chain_accuracy([gold[1], gold[0]], gold) == 0.0  # right tails, wrong places
    assert chain_accuracy([["only two", "cells"]], gold) == 0.0


def test_stage_score_is_chosen_by_the_fields_a_stage_writes():
    assert scored_field({"hop_count": 2, "sub_questions": [], "reasoning_chain": []}) == "sub_questions"
    assert stage_score({"valid": False}, {"reason": "r", "valid": False}) == 1.0
    assert stage_score({}, {"reason": "r", "valid": True}) == 0.0  # an unparsed verdict is wrong
    assert stage_score({"answer": "Ann Lee [2]"}, {"reasoning": "r", "answer": "Ann Lee [3]"}) == pytest.approx(2 / 3)
    assert stage_score({"completed_chain": "not a list"}, {"completed_chain": [["a", "b", "c"]]}) == 0.0
    with pytest.raises(ValueError, match="no stage score"):
        scored_field({"ranking": "[1] > [2]"})


def test_labels_and_verdicts_score_agreement_and_a_next_question_scores_f1():
    assert stage_score({"route": "complex"}, {"route": "complex"}) == 1.0
    assert stage_score({"route": "compound"}, {"route": "complex"}) == 0.0
    assert stage_score({"relevant": True}, {"relevant": True}) == 1.0
    assert stage_score({"finished": 1}, {"finished": True}) == 0.0  # a verdict is a bool, not a truthy value
    assert stage_score({"seed_question": "Who directed Kiss?"}, {"seed_question": "Who is the director of Kiss?"}) \
        == pytest.approx(2 * (2 / 3) * (2 / 5) / (2 / 3 + 2 / 5))  # "who", "kiss"; "the" is dropped
