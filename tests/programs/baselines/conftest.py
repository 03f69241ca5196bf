import dspy
import pytest

from helpers import LOST_GRAVITY, LOST_GRAVITY_QUESTION


@pytest.fixture
def musique_example():
    """A two-hop MuSiQue question over :data:`helpers.LOST_GRAVITY` with its annotations: both hops' supporting
    paragraphs and a distractor, the decomposition, each hop's answer and support."""
    hop1 = {"id": "p1", "title": "Lost Gravity", "text": LOST_GRAVITY[0].text, "is_supporting": True}
    hop2 = {"id": "p2", "title": "Mack Rides", "text": LOST_GRAVITY[1].text, "is_supporting": True}
    other = {"id": "p3", "title": "Xbox", "text": LOST_GRAVITY[3].text, "is_supporting": False}
    return dspy.Example(id="q1", question=LOST_GRAVITY_QUESTION, answer="Germany", paragraphs=[hop1, hop2, other],
                        gold_passage_ids=["p1", "p2"], decomposition=["Lost Gravity >> manufacturer",
                                                                      "#1 >> country"],
                        decomposition_answers=["Mack Rides", "Germany"],
                        decomposition_support=["p1", "p2"]).with_inputs("question")
