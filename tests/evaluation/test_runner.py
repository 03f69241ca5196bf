import asyncio
import inspect
import json
import math
import re

import dspy
import pytest
from rich.console import Console

from multihop.data.jsonl import read_rows
from multihop.evaluation.runner import RATES, aevaluate, default_columns, evaluate, render_table
from multihop.runtime.tracing import count

from helpers import Echo, echo_examples, scripted_lm
from helpers import examples as make_examples


def test_scores_counts_and_files(tmp_path):
    summary = evaluate(Echo(), echo_examples(4), tmp_path, threads=2, progress=False)
    assert summary["questions"] == 4 and summary["em"] == 0.5 and summary["recall@2"] == 0.5
    rows = read_rows(tmp_path / "results.jsonl")
    assert set(rows) == {"q0", "q1", "q2", "q3"}
    assert json.loads((tmp_path / "summary.json").read_text())["em"] == 0.5
    assert (tmp_path / "traces" / "q0.json").exists()


def test_ranking_measures_are_recorded_per_question_and_shown_beside_recall(tmp_path):
    summary = evaluate(Echo(), echo_examples(2), tmp_path, progress=False)  # reads g1 then n1; gold g1, g2
    row = read_rows(tmp_path / "results.jsonl")["q0"]
    assert row["metrics"]["ndcg@10"] == pytest.approx(1 / (1 + 1 / math.log2(3))) and row["metrics"]["mrr"] == 1.0
    assert summary["ndcg@10"] == pytest.approx(0.6131, abs=1e-4) and summary["intervals"]["mrr"] == [1.0, 1.0]
    [cells] = table_cells({"echo": summary})
    assert (cells["R@2"], cells["nDCG@10"], cells["MRR"]) == ("50.0", "61.3", "100.0")


def test_aevaluate_takes_evaluates_parameters_with_in_flight_for_threads():
    sync, async_ = inspect.signature(evaluate).parameters, inspect.signature(aevaluate).parameters
    assert [name if name != "threads" else "in_flight" for name in sync] == list(async_)
    assert async_["in_flight"].default == 8
    assert all(async_[name].default == parameter.default for name, parameter in sync.items() if name != "threads")
    with pytest.raises(TypeError, match="threads"):
        asyncio.run(aevaluate(Echo(), echo_examples(1), "unused", threads=2))


@pytest.mark.parametrize("run", ["evaluate", "aevaluate"])
def test_the_retriever_given_is_what_dspy_retrieve_searches_and_its_passages_are_scored(static_retriever, tmp_path,
                                                                                         run):
    class Retrieving(dspy.Module):  # a plain module: its passages come from its trace
        def forward(self, question):
            return dspy.Prediction(answer="x", context=dspy.Retrieve(k=2)(question).passages)

    first, second = (p.id for p in static_retriever.passages[:2])
    questions = make_examples(2, answer="x", gold_passage_ids=[second])
    if run == "evaluate":
        summary = evaluate(Retrieving(), questions, tmp_path, progress=False, retriever=static_retriever)
    else:
        summary = asyncio.run(aevaluate(Retrieving(), questions, tmp_path, progress=False, retriever=static_retriever))
    rows = read_rows(tmp_path / "results.jsonl")
    assert summary["errors"] == 0 and summary["recall@2"] == 1.0 and dspy.settings.rm is None
    assert all(row["passage_ids"] == [first, second] and row["counts"]["retrieval_calls"] == 1 for row in rows.values())


def test_aevaluate_writes_the_rows_evaluate_writes_and_takes_its_options(tmp_path):
    def first_char(example, prediction, trace=None):
        return float(prediction.answer[:1] == example.answer[:1])

    summary = asyncio.run(aevaluate(Echo(), echo_examples(4), tmp_path / "async", in_flight=3, progress=False,
                                    name="echo", metric=first_char))
    expected = evaluate(Echo(), echo_examples(4), tmp_path / "sync", threads=3, progress=False, name="echo",
                        metric=first_char)
    scores = ("questions", "em", "f1", "recall@2", "first_char", "program")
    assert {key: summary[key] for key in scores} == {key: expected[key] for key in scores}
    assert summary["program"] == "echo" and summary["first_char"] == 0.5
    assert set(read_rows(tmp_path / "async" / "results.jsonl")) == {"q0", "q1", "q2", "q3"}


def test_an_exception_is_recorded_and_the_run_goes_on(tmp_path):
    summary = evaluate(Echo.faulty(fail_on={"question 1"}), echo_examples(3), tmp_path, progress=False)
    rows = read_rows(tmp_path / "results.jsonl")
    assert rows["q1"]["error"] == "RuntimeError: boom" and rows["q2"]["error"] is None
    assert summary["errors"] == 1 and summary["questions"] == 3


def test_interrupted_run_resumes_without_redoing_finished_questions(tmp_path):
    examples = echo_examples(5)
    with pytest.raises(KeyboardInterrupt):
        evaluate(Echo.faulty(die_on={"question 2"}), examples, tmp_path, threads=1, progress=False)
    assert set(read_rows(tmp_path / "results.jsonl")) == {"q0", "q1"}
    with open(tmp_path / "results.jsonl", "a") as fh:  # a write torn by the crash
        fh.write('{"id": "q2", "quest')
    program = Echo()
    summary = evaluate(program, examples, tmp_path, threads=1, progress=False)
    assert program.seen == ["question 2", "question 3", "question 4"]
    assert summary["questions"] == 5
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 5


def test_a_program_that_never_retrieves_has_no_recall(tmp_path):
    class NoPassages(Echo):
        def forward(self, question):
            return dspy.Prediction(answer="x")

    summary = evaluate(NoPassages(), echo_examples(2), tmp_path, progress=False)
    assert summary["recall@2"] is None and summary["em"] == 0.5


def judge_lm(verdicts: dict):
    """A judge that says "correct" when the judged answer is a key of ``verdicts`` mapped to "true"."""
    def respond(prompt):
        answer = prompt.rsplit("[[ ## our_answer ## ]]", 1)[1].split("Respond with", 1)[0].strip()
        if answer not in verdicts:
            return {"nonsense": "?"}
        return {"reasoning": "compared", "correct": verdicts[answer]}

    return scripted_lm(respond, name="judge")


def test_llm_judge_scores_parses_and_never_guesses():
    from multihop.evaluation.metrics import LLMJudge, dspy_metric

    lm, engine = judge_lm({"Paris": "true", "Lyon": "false"})
    judge = LLMJudge(lm)
    assert judge("capital?", "Paris", ["Paris"]) == 1.0 and judge("capital?", "Lyon", ["Paris"]) == 0.0
    assert judge("capital?", "???", ["Paris"]) is None  # unparsable verdict: left out, not scored
    calls = len(engine.requests)
    assert judge("capital?", "  ", ["Paris"]) == 0.0 and len(engine.requests) == calls  # empty: no call
    assert "Paris" in engine.requests[0].split("ground_truth_answer")[-1]
    example = dspy.Example(question="capital?", answers=["Paris"])
    assert dspy_metric("llm_eval", judge_lm=lm)(example, dspy.Prediction(answer="Paris")) == 1.0
    with pytest.raises(ValueError, match="judge LM"):
        dspy_metric("llm_eval")


def test_evaluation_reports_llm_eval_beside_cover_em_without_counting_the_judge(tmp_path):
    lm, _ = judge_lm({"x": "true"})
    summary = evaluate(Echo(), echo_examples(4), tmp_path, progress=False, judge_lm=lm)
    assert summary["llm_eval"] == 1.0 and summary["judged"] == 4 and summary["cover_em"] == 0.5
    assert summary["llm_calls"] == 0  # the judge's calls are not the program's
    assert all(row["metrics"]["llm_eval"] == 1.0 for row in read_rows(tmp_path / "results.jsonl").values())


def test_any_dspy_module_gets_its_calls_counted(tmp_path):
    class Plain(dspy.Module):  # not a MultihopProgram: evaluation traces it itself
        def __init__(self):
            super().__init__()
            self.answer = dspy.Predict("question -> answer")

        def forward(self, question):
            return self.answer(question=question)

    lm, _ = scripted_lm(lambda prompt: {"answer": "x"})
    dspy.configure(lm=lm)
    summary = evaluate(Plain(), echo_examples(2), tmp_path, progress=False)
    assert summary["llm_calls"] == 1.0 and summary["tokens"] > 0 and summary["em"] == 0.5
    trace = json.loads((tmp_path / "traces" / "q0.json").read_text())
    assert [record["stage"] for record in trace] == ["answer"]


class Hedging(Echo):
    """Declares how two of its counts are shown: ``hedged`` (questions 0 and 1) as a rate, ``lookups`` as a mean."""

    count_display = {"hedged": "rate", "lookups": "mean"}

    def forward(self, question):
        count("hedged", int(question in {"question 0", "question 1"}))
        count("lookups", 3)
        count("undeclared", 2)
        return super().forward(question)


def table_cells(summaries, **options) -> list[dict[str, str]]:
    """The rendered table's rows as {header: cell}."""
    console = Console(record=True, width=250)
    console.print(render_table(summaries, **options))
    lines = [[cell.strip() for cell in re.split("[┃│]", line)[1:-1]] for line in console.export_text().splitlines()
             if line.startswith(("┃", "│"))]
    return [dict(zip(lines[0], line, strict=True)) for line in lines[1:]]


def test_a_program_declares_how_its_counts_are_shown(tmp_path):
    summary = evaluate(Hedging(), echo_examples(4), tmp_path, progress=False)
    assert summary["count_display"] == {"hedged": "rate", "lookups": "mean"}
    assert json.loads((tmp_path / "summary.json").read_text())["count_display"] == summary["count_display"]
    assert summary["hedged"] == 0.5 and summary["undeclared"] == 2.0
    [cells] = table_cells({"hedging": summary})
    assert cells["hedged %"] == "50.0" and cells["lookups/q"] == "3.0" and cells["EM"] == "50.0"
    assert not any("undeclared" in header for header in cells)  # a count nobody declared is in the summary only
    assert table_cells({"hedging": summary}, columns=[("hedged", "hedged")]) == [{"program": "hedging", "n": "4",
                                                                                 "hedged": "50.0"}]


def test_shared_evaluation_names_no_programs_event(tmp_path):
    from multihop.programs import PROGRAMS

    events = {name for cls in PROGRAMS.values() for name in cls.count_display}
    assert events and not events & (RATES | {key for key, _ in default_columns([])})
    summary = evaluate(Echo(), echo_examples(2), tmp_path, progress=False)  # declares nothing: no extra column
    assert summary["count_display"] == {} and default_columns([summary]) == default_columns([])


def test_a_count_display_must_be_a_rate_or_a_mean():
    with pytest.raises(TypeError, match="percent"):
        type("Odd", (Echo,), {"count_display": {"hedged": "percent"}})


def test_evaluate_save_and_compare_refuse_anything_but_a_program(tmp_path):
    import multihop
    from multihop.programs import save

    program = Echo()
    for call in (lambda: evaluate((program, {}), echo_examples(1), tmp_path / "e", progress=False),
                 lambda: save((program, {}), tmp_path / "s")):
        with pytest.raises(TypeError, match="takes a dspy.Module \\(a program\\), not a tuple"):
            call()
    with pytest.raises(TypeError, match="compare takes program names"):
        multihop.compare(tmp_path / "c", programs=[program], datasets=["musique"], progress=False)
    assert not (tmp_path / "e").exists() and not (tmp_path / "s").exists()
