import pytest

from multihop.programs.text import (
    citation_marks,
    citations,
    clean,
    is_abstention,
    numbered,
    safe_answer,
    stated_answer,
    strip_citations,
    unique,
)


def test_numbered_contexts_count_from_one():
    assert numbered(["Paris is in France.", "Lyon too."]) == ["[1] Paris is in France.", "[2] Lyon too."]
    assert numbered([]) == []


def test_citations_are_zero_based_first_occurrence_and_inside_the_context():
    assert citations("A [2] and B [4][2] and [9]", 5) == [1, 3]
    assert citations("[0] [1]", 1) == [0]  # [0] is no context
    assert citations("no marks", 3) == [] and citations(None, 3) == []
    assert citation_marks("[2] > [2] > [42]") == 3 and citation_marks("") == 0


def test_strip_citations_leaves_no_gap_before_punctuation():
    assert strip_citations("He went [1] to school [2][3].") == "He went to school."
    assert strip_citations("Paris [1], France [2]") == "Paris, France"
    assert strip_citations(None) == ""


@pytest.mark.parametrize(("answer", "abstains"), [
    ("I don't know.", True),
    ("i DO NOT know", True),
    ("There is not enough information.", True),
    ("", True),
    ("  ?! ", True),  # nothing but punctuation
    ("Bill Gates [1]", False),
    ("Seattle, Washington", False),
])
def test_abstentions(answer, abstains):
    assert is_abstention(answer) is abstains


def test_clean_lists_drop_numbering_blanks_and_none():
    assert clean(["1. Who founded #1?", " 2) Where was #2 born? ", "", "None", "3 apples"]) == [
        "Who founded #1?", "Where was #2 born?", "3 apples"]
    assert clean("Which company makes the Xbox?") == ["Which company makes the Xbox?"]
    assert clean(None) == [] and clean([7]) == ["7"]


def test_unique_keeps_first_occurrence_order_and_safe_answer_never_invents():
    assert unique(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]
    assert safe_answer("  Seattle \n") == "Seattle" and safe_answer(None) == ""


def test_stated_answer_reads_what_follows_answer_is_and_nothing_else():
    assert stated_answer("So the answer is: Germany.") == "Germany"
    assert stated_answer("so the answer is Mack Rides") == "Mack Rides"
    assert stated_answer("So the answer is 19 June 2013.") == "19 June 2013"
    assert stated_answer("So the answer is:") == ""
    assert stated_answer("Lost Gravity was made by Mack Rides.") is None
