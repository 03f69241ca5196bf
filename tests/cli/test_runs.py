"""How a command that runs programs ends when questions ended in an error: exit 3 when some did, 4 when every one did,
0 with ``--allow-errors``, each with one line counting the errors by type and giving the first one's message."""

import pytest
import typer

from multihop.cli.errors import ALL_ERRORED, ERRORED
from multihop.cli.runs import exit_on_errors, run_summaries
from multihop.evaluation.runner import summarize


def rows(*errors):
    return [{"id": f"q{i}", "error": error, "counts": {}, "metrics": {}, "prediction": "", "answers": ["a"],
             "seconds": 0.1}
            for i, error in enumerate(errors)]


def test_a_summary_counts_its_errors_by_type_and_keeps_the_first():
    summary = summarize(rows(None, "ValueError: bad\nreply", "LMServerError: down", "ValueError: worse"))
    assert summary["errors"] == 3 and summary["error_types"] == {"ValueError": 2, "LMServerError": 1}
    assert summary["first_error"] == "q1: ValueError: bad\nreply"
    assert "error_types" not in summarize(rows(None)) and "first_error" not in summarize(rows(None))


def test_some_errors_exit_3_every_one_4_none_0_and_allowed_0(capsys):
    some = {"A": summarize(rows(None, "ValueError: bad\nreply")), "B": summarize(rows(None, "KeyError: 'x'"))}
    with pytest.raises(typer.Exit) as ended:
        exit_on_errors(some)
    assert ended.value.exit_code == ERRORED == 3
    assert capsys.readouterr().err == ("error: 2 of 4 questions ended in an error (ValueError: 1, KeyError: 1); the "
                                       "first: A q1: ValueError: bad reply (--allow-errors exits 0)\n")
    with pytest.raises(typer.Exit) as ended:
        exit_on_errors({"A": summarize(rows("LMServerError: " + "x" * 400))})
    assert ended.value.exit_code == ALL_ERRORED == 4
    err = capsys.readouterr().err
    assert err.startswith("error: 1 of 1 questions ended in an error (LMServerError: 1); the first: q0: ")
    assert "…" in err
    exit_on_errors(some, allow_errors=True)
    assert capsys.readouterr().err.startswith("warning: 2 of 4 questions ended in an error")
    exit_on_errors({"A": summarize(rows(None, None))})
    assert capsys.readouterr().err == ""


def test_a_comparisons_runs_are_read_from_its_table(tmp_path):
    import json

    (tmp_path / "musique" / "A").mkdir(parents=True)
    (tmp_path / "musique" / "A" / "summary.json").write_text(json.dumps(summarize(rows("KeyError: 'x'"))))
    (tmp_path / "comparison.json").write_text(json.dumps({"runs": [
        {"dataset": "musique", "program": "A", "folder": "musique/A"},
        {"dataset": "musique", "program": "B", "folder": "musique/B"}]}))  # B has no summary: left out
    assert list(run_summaries(tmp_path)) == [str((tmp_path / "musique" / "A").resolve())]
    assert run_summaries(tmp_path / "none") == {}
