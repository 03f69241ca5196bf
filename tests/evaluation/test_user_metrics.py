"""Metrics a DSPy user brings: ``evaluate(metric=fn | {name: fn})`` records each per row and in the summary (a metric
that raises records None and its error, and the run goes on), the names key the run's manifest, the tables show them;
``eval``/``compare``/``reproduce --metric module:function``; recall@k over the passages a program read; and
``dspy.Evaluate`` over every declared program."""

import json

import dspy
import pytest
from rich.console import Console
from typer.testing import CliRunner

import multihop
from multihop.cli import app
from multihop.data.folders import RUN_MANIFEST, RunMismatchError
from multihop.data.jsonl import read_rows
from multihop.evaluation.runner import evaluate, render_table
from multihop.experiments.tables import cell, shown_columns, summary_row
from multihop.programs import PROGRAMS

from helpers import Echo, TypedScript, declared_program, echo_examples, paris_data, scripted_lm

runner = CliRunner()


def answer_is_x(example, prediction, trace=None):
    return prediction.answer == "x"


def answer_length(example, prediction, trace=None):
    if example.question == "question 1":
        raise KeyError("no length today")
    return len(prediction.answer) / 2


def test_a_users_metric_is_recorded_per_row_and_averaged_in_the_summary(tmp_path):
    summary = evaluate(Echo(), echo_examples(4), tmp_path, progress=False, metric=answer_is_x)
    rows = read_rows(tmp_path / "results.jsonl")
    assert [rows[f"q{i}"]["metrics"]["answer_is_x"] for i in range(4)] == [1.0] * 4
    assert summary["answer_is_x"] == 1.0 and summary["metrics"] == ["answer_is_x"]
    assert json.loads((tmp_path / "summary.json").read_text())["answer_is_x"] == 1.0


def test_a_metric_that_raises_records_none_and_its_error_and_the_run_goes_on(tmp_path):
    summary = evaluate(Echo(), echo_examples(3), tmp_path, progress=False,
                       metric={"length": answer_length, "right": answer_is_x})
    rows = read_rows(tmp_path / "results.jsonl")
    assert rows["q1"]["metrics"]["length"] is None
    assert rows["q1"]["metric_errors"] == {"length": "KeyError: 'no length today'"}
    assert rows["q1"]["error"] is None and rows["q1"]["metrics"]["right"] == 1.0
    assert rows["q0"]["metrics"]["length"] == 0.5 and "metric_errors" not in rows["q0"]
    assert summary["length"] == 0.5 and summary["right"] == 1.0  # the raised question is left out of the mean
    assert summary["errors"] == 0


def test_an_errored_question_scores_zero_on_a_users_metric_as_on_em(tmp_path):
    summary = evaluate(Echo.faulty(fail_on={"question 1"}), echo_examples(2), tmp_path, progress=False,
                       metric=answer_is_x)
    assert summary["answer_is_x"] == 0.5


def test_the_metric_names_key_the_run(tmp_path):
    evaluate(Echo(), echo_examples(2), tmp_path, progress=False, metric=answer_is_x)
    program = Echo()
    evaluate(program, echo_examples(2), tmp_path, progress=False, metric=answer_is_x)  # the same run: resumed
    assert program.seen == []
    with pytest.raises(RunMismatchError):
        evaluate(Echo(), echo_examples(2), tmp_path, progress=False, metric={"other": answer_is_x})
    with pytest.raises(RunMismatchError):
        evaluate(Echo(), echo_examples(2), tmp_path, progress=False)


def test_a_metric_may_not_take_a_built_in_name(tmp_path):
    with pytest.raises(ValueError, match="metric name 'em' is taken"):
        evaluate(Echo(), echo_examples(1), tmp_path, progress=False, metric={"em": answer_is_x})


def test_recall_at_k_is_over_every_passage_the_program_read(tmp_path):
    class ThreePassages(Echo):
        def forward(self, question):
            return dspy.Prediction(answer="x", passage_ids=["n1", "n2", "g2"])

    summary = evaluate(ThreePassages(), echo_examples(2), tmp_path, progress=False)
    rows = read_rows(tmp_path / "results.jsonl")
    assert rows["q0"]["metrics"]["recall@k"] == 0.5 and rows["q0"]["metrics"]["recall@2"] == 0.0
    assert summary["recall@k"] == 0.5 and summary["recall@2"] == 0.0 and summary["recall@5"] == 0.5


def test_the_eval_table_and_the_comparison_table_show_the_users_metrics(tmp_path):
    summary = evaluate(Echo(), echo_examples(2), tmp_path, progress=False, metric=answer_is_x)
    console = Console(width=300, record=True)
    console.print(render_table({"Echo": summary}))
    text = console.export_text()
    assert "answer_is_x" in text and "1.000" in text and "R@k" in text
    row = summary_row("musique", "Echo", summary)
    assert ("answer_is_x", "answer_is_x") in shown_columns([row]) and cell("answer_is_x", 0.25) == "0.250"


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    """A folder holding ``my_metrics.py`` (``says_paris``, ``broken``), the current folder."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "my_metrics.py").write_text(
        "def says_paris(example, prediction, trace=None):\n    return 'paris' in prediction.answer.lower()\n\n"
        "def broken(example, prediction, trace=None):\n    raise ValueError('nope')\n")
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_eval_takes_metric_module_function(user_folder, built_lms, questions):
    result = runner.invoke(app, ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", "run",
                                 "--lm", "openai/x", "--metric", "my_metrics:says_paris", "--metric",
                                 "my_metrics:broken"], terminal_width=300)
    assert result.exit_code == 0, result.output
    row = next(iter(read_rows(user_folder / "run" / "results.jsonl").values()))
    assert row["metrics"]["says_paris"] == 1.0 and row["metrics"]["broken"] is None
    assert row["metric_errors"] == {"broken": "ValueError: nope"}
    manifest = json.loads((user_folder / "run" / RUN_MANIFEST).read_text())
    summary = json.loads((user_folder / "run" / "summary.json").read_text())
    assert summary["says_paris"] == 1.0 and summary["broken"] is None and "says_paris" in result.output
    assert manifest["metrics"] == ["broken", "says_paris"]


@pytest.mark.parametrize(("spec", "message"), [
    ("my_metrics", "give module:function"),
    ("nosuch_module:f", "cannot import nosuch_module"),
    ("my_metrics:nosuch", "my_metrics has no nosuch"),
])
def test_a_bad_metric_spec_is_one_line(user_folder, built_lms, questions, spec, message):
    for command in (["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", "run", "--lm", "openai/x"],
                    ["compare", "--out", "cmp", "--lm", "openai/x"], ["reproduce", "CoopRAG", "--lm", "openai/x"]):
        result = runner.invoke(app, [*command, "--metric", spec], terminal_width=300)
        assert result.exit_code == 2 and message in " ".join(result.output.replace("│", " ").split()), result.output


def test_compare_records_and_tables_a_users_metric(tmp_path, monkeypatch):
    paris_data(tmp_path, monkeypatch)
    dspy.configure(lm=scripted_lm(lambda prompt: {"answer": "Paris"})[0])
    comparison = multihop.compare(tmp_path / "out", programs=["NoRetrieval"], datasets=["musique"],
                                  first_stage="bm25", progress=False, metric=answer_is_x)
    assert comparison["rows"][0]["answer_is_x"] == 0.0 and comparison["rows"][0]["metrics"] == ["answer_is_x"]
    assert "| answer_is_x |" in (tmp_path / "out" / "comparison.md").read_text()


DECLARED = sorted(method.name for method in PROGRAMS.declared())


def mentions_a_passage_or_answers(example, prediction, trace=None):
    """A user's metric: 1 when the program answered at all, plus a half point for reading a passage."""
    return float(bool(prediction.answer)) * 0.5 + 0.5 * bool(prediction.get("passage_ids"))


@pytest.mark.parametrize("name", DECLARED)
def test_dspy_evaluate_runs_every_declared_program_with_a_users_metric(name):
    program = declared_program(name)
    devset = [dspy.Example(question=question, answers=["Bill Gates"]).with_inputs("question")
              for question in ["Who founded the company that makes the Xbox?", "Where was Bill Gates born?"]]
    scored = []

    def metric(example, prediction, trace=None):
        scored.append(prediction)
        return mentions_a_passage_or_answers(example, prediction, trace)

    with dspy.context(lm=TypedScript(program).lm):
        result = dspy.Evaluate(devset=devset, metric=metric, num_threads=1, display_progress=False)(program)
    score = result.score if hasattr(result, "score") else result
    assert len(scored) == 2 and 0.0 <= score <= 100.0
    assert all(isinstance(prediction.answer, str) for prediction in scored)


def test_the_dspy_metric_recall_at_k_is_over_every_passage_read():
    from multihop.evaluation.metrics import dspy_metric

    example = dspy.Example(gold_passage_ids=["g1", "g2"])
    prediction = dspy.Prediction(answer="x", passage_ids=["n1", "n2", "g1"])
    assert dspy_metric("recall@k")(example, prediction) == 0.5 and dspy_metric("recall@2")(example, prediction) == 0.0
