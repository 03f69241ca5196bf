"""Iter-RetGen: each round retrieves with the last generation and the question, and keeps the last generation when a
round fails, on a scripted LM."""

from multihop.data.corpus import Corpus
from multihop.programs import IterRetGen
from multihop.programs.baselines.iter_retgen import next_query

from helpers import LOST_GRAVITY as DOCS
from helpers import LOST_GRAVITY_QUESTION as QUESTION
from helpers import QueryRecordingBM25, field, run_loop


def test_iter_retgen_queries_with_the_last_generation_then_the_question():
    program = IterRetGen(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1, iterations=3)
    answers = iter(["Mack Rides", "Germany", "Germany"])
    prediction, script = run_loop(program, generate=lambda p: {"reasoning": f"It saw {field(p, 'passages')[:30]}",
                                                               "answer": next(answers)})
    queries = [q for q, _ in program.rm.asked]
    assert queries[0] == QUESTION and len(queries) == 3 and script.seen == ["generate"] * 3
    first = prediction.generations[0]
    assert queries[1] == next_query(QUESTION, first["reasoning"], first["answer"])
    assert queries[1].endswith(QUESTION) and queries[1].startswith("It saw")
    assert prediction.answer == "Germany" and prediction.counts["answer_changed"] == 1
    assert prediction.counts["rounds"] == 3


def test_iter_retgen_keeps_the_last_generation_when_one_fails():
    program = IterRetGen(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1, iterations=2)
    calls = []

    def generate(prompt):  # the second round (and DSPy's JSON retry of it) replies with no field
        calls.append(prompt)
        return {"reasoning": "Made by Mack Rides.", "answer": "Germany"} if len(calls) == 1 else {}

    prediction, _ = run_loop(program, generate=generate)
    assert prediction.answer == "Germany" and prediction.counts["generate.fallback"] == 1
