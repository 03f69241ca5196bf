"""Runs that refuse to mix, retry what failed, stop when the endpoint is down, and hold their folder alone."""

import json
import multiprocessing
import os
import subprocess
import sys
import time

import dspy
import pytest
from dspy.utils.exceptions import LMServerError

from multihop.data.folders import FolderInUseError, RunMismatchError, locked
from multihop.data.jsonl import read_rows
from multihop.data.paths import atomic_write_text
from multihop.evaluation.runner import MAX_ENDPOINT_FAILURES, EndpointDownError, evaluate

from helpers import Echo, echo_examples, scripted_lm


class Outage(Echo):
    """An Echo whose LM endpoint fails (HTTP 500) on the questions in ``down`` (none unless set: an outage is not a
    setting of the program)."""

    down: set = set()

    def forward(self, question):
        if question in self.down:
            raise LMServerError("HTTP 500 from the endpoint", model="openai/x")
        return super().forward(question)


def test_a_rerun_of_another_program_or_question_set_is_refused_naming_what_differs(tmp_path):
    evaluate(Echo(), echo_examples(3), tmp_path, progress=False)
    with pytest.raises(RunMismatchError, match=r"holds another evaluation \(config: \{'answer': 'x'\} there, "
                                               r"\{'answer': 'y'\} now\)"):
        evaluate(Echo(answer="y"), echo_examples(3), tmp_path, progress=False)
    others = [example.copy(id=f"other{i}") for i, example in enumerate(echo_examples(3))]
    with pytest.raises(RunMismatchError, match="holds another evaluation \\(questions: "):
        evaluate(Echo(), others, tmp_path, progress=False)  # other questions: no superset of the recorded ones
    assert evaluate(Echo(), echo_examples(3), tmp_path, progress=False)["questions"] == 3  # the same run resumes


def test_a_run_grows_to_more_questions_keeping_its_rows_and_asking_only_the_new_ones(tmp_path):
    from multihop.programs import NoRetrieval

    lm, engine = scripted_lm(lambda prompt: {"answer": "x"}, cache=False)
    with dspy.context(lm=lm):
        evaluate(NoRetrieval(), echo_examples(2), tmp_path, progress=False)
        first = (tmp_path / "results.jsonl").read_text().splitlines()
        summary = evaluate(NoRetrieval(), echo_examples(5), tmp_path, progress=False)  # a larger --limit
    assert len(engine.requests) == 2 + 3 and summary["questions"] == 5
    assert (tmp_path / "results.jsonl").read_text().splitlines()[:2] == first  # byte-identical
    assert json.loads((tmp_path / "run.json").read_text())["count"] == 5
    with pytest.raises(RunMismatchError, match="config"):  # a grown run is still the same run
        evaluate(Echo(), echo_examples(5), tmp_path, progress=False)


def test_errored_questions_are_retried_on_rerun_and_the_file_keeps_one_row_per_id(tmp_path):
    evaluate(Echo.faulty(fail_on={"question 1"}), echo_examples(3), tmp_path, progress=False)
    kept = Echo()
    summary = evaluate(kept, echo_examples(3), tmp_path, progress=False, keep_errors=True)
    assert kept.seen == [] and summary["errors"] == 1  # --keep-errors: nothing rerun
    retried = Echo()
    summary = evaluate(retried, echo_examples(3), tmp_path, progress=False)
    assert retried.seen == ["question 1"] and summary["errors"] == 0
    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(row["id"] for row in lines) == ["q0", "q1", "q2"] and all(row["error"] is None for row in lines)


def test_an_endpoint_down_on_ten_questions_in_a_row_stops_the_run_without_recording_them(tmp_path):
    n = MAX_ENDPOINT_FAILURES + 3
    outage = Outage()
    outage.down = {f"question {i}" for i in range(2, n)}
    with pytest.raises(EndpointDownError, match="failed on 10 questions in a row"):
        evaluate(outage, echo_examples(n), tmp_path, progress=False)
    rows = read_rows(tmp_path / "results.jsonl")
    assert set(rows) == {"q0", "q1"}  # the streak's questions are left for the rerun
    recovered = Outage()
    summary = evaluate(recovered, echo_examples(n), tmp_path, progress=False)
    assert summary["questions"] == n and summary["errors"] == 0 and len(recovered.seen) == n - 2


def test_a_short_streak_of_endpoint_failures_is_recorded_as_errors(tmp_path):
    outage = Outage()
    outage.down = {"question 1", "question 2"}
    summary = evaluate(outage, echo_examples(4), tmp_path, progress=False)
    rows = read_rows(tmp_path / "results.jsonl")
    assert summary["errors"] == 2 and rows["q1"]["endpoint_error"] and rows["q1"]["error"].startswith("LMServerError")


def hold(folder, ready, release):
    with locked(folder):
        ready.set()
        release.wait(30)


def test_a_second_job_into_a_held_folder_is_refused_with_the_holders_pid(tmp_path):
    context = multiprocessing.get_context("spawn")
    ready, release = context.Event(), context.Event()
    holder = context.Process(target=hold, args=(tmp_path, ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(FolderInUseError, match=f"in use by another multihop process \\(pid {holder.pid}\\)"):
            evaluate(Echo(), echo_examples(2), tmp_path, progress=False)
    finally:
        release.set()
        holder.join(30)
    start = time.monotonic()
    assert evaluate(Echo(), echo_examples(2), tmp_path, progress=False)["questions"] == 2  # free again
    assert time.monotonic() - start < 10


def test_a_folder_lock_is_reentrant_in_its_process_and_released_by_the_outermost(tmp_path):
    with locked(tmp_path):
        with locked(tmp_path):  # a job holding its folder calls a step that locks it too
            pass
        assert (tmp_path / ".multihop.lock.pid").exists()  # still held by the outer block
    assert not (tmp_path / ".multihop.lock.pid").exists() and not (tmp_path / ".multihop.lock").exists()


def test_a_saved_folder_keeps_no_lock_file_and_lists_none(tmp_path):
    from multihop.programs import SingleStepRAG, save

    save(SingleStepRAG(), tmp_path / "saved")
    assert sorted(path.name for path in (tmp_path / "saved").iterdir()) == ["files.json", "manifest.json",
                                                                            "program.json"]
    assert evaluate(Echo(), echo_examples(1), tmp_path / "run", progress=False)["questions"] == 1
    assert not list((tmp_path / "run").glob(".multihop.lock*"))


def test_a_run_that_recorded_nothing_does_not_hold_its_folder(tmp_path):
    outage = Outage()
    outage.down = {f"question {i}" for i in range(MAX_ENDPOINT_FAILURES)}
    with pytest.raises(EndpointDownError):
        evaluate(outage, echo_examples(MAX_ENDPOINT_FAILURES), tmp_path, progress=False)
    assert evaluate(Echo(answer="y"), echo_examples(2), tmp_path, progress=False)["questions"] == 2  # a new run


def dead_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_taking_a_folder_removes_what_killed_writers_left_and_keeps_a_live_writers(tmp_path):
    dead, alive = dead_pid(), os.getpid()
    (tmp_path / "traces").mkdir()
    left = [tmp_path / f".summary.json.{dead}.tmp", tmp_path / "traces" / f".q3.json.{dead}.tmp"]
    kept = [tmp_path / f".summary.json.{alive}.tmp", tmp_path / "notes.tmp", tmp_path / "traces" / "q3.json"]
    for path in (*left, *kept):
        path.write_text("x")
    (tmp_path / f".index.{dead}.tmp").mkdir()  # an atomic_dir's half-built folder
    with locked(tmp_path):
        pass
    assert [path for path in (*left, tmp_path / f".index.{dead}.tmp") if path.exists()] == []
    assert all(path.exists() for path in kept)


def test_an_interrupted_atomic_write_leaves_no_temporary(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(tmp_path / "summary.json", "{}")
    assert list(tmp_path.iterdir()) == []
