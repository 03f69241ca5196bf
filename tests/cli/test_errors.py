"""Every user error ends the command with one line ``error: …`` naming what to change (exit 2), a failure at run time
with one line too (exit 1), and the traceback only with ``--debug``."""

import json
import os

import pytest

from multihop.cli import app
from multihop.cli.errors import run


def fails(argv, capsys, code=2) -> str:
    """Run the command line; assert its exit code and that stderr is one ``error:`` line; return that line."""
    assert run(app, argv) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_unknown_names_and_values_are_one_line(capsys, questions, tmp_path):
    assert "unknown model 'gpt5'" in fails(["models", "install", "gpt5"], capsys)
    out = ["--out", str(tmp_path / "run")]
    assert "unknown program 'Nope'" in fails(["eval", "--program", "Nope", "--data", str(questions), *out], capsys)
    err = fails(["eval", "--program", "SingleStepRAG", "--data", str(questions), *out, "--set", "frobnicate=1"],
                capsys)
    assert "SingleStepRAG has no switch frobnicate; its switches:" in err
    assert "set with --k" in fails(["eval", "--program", "NoRetrieval", "--data", str(questions), *out, "--set",
                                    "k=3"], capsys)
    assert "--limit" in fails(["eval", "--program", "NoRetrieval", "--data", str(questions), *out, "--limit", "-3"],
                              capsys)
    assert "--threads" in fails(["eval", "--program", "NoRetrieval", "--data", str(questions), *out, "--threads",
                                 "0"], capsys)
    assert "does not exist" in fails(["trace", "show", str(tmp_path / "nowhere")], capsys)
    assert "no such file" in fails(["eval", "--program", "NoRetrieval", "--data", str(tmp_path / "none.jsonl"),
                                    *out], capsys)
    err = fails(["compile", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "c"),
                 "--optimizer", "nope"], capsys)
    assert "nope" in err


def test_a_bad_data_file_is_one_line_naming_file_line_and_field(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "q1", "question": "Q?", "answers": "Paris"}) + "\n")
    err = fails(["eval", "--program", "NoRetrieval", "--data", str(bad), "--out", str(tmp_path / "run")], capsys)
    assert f"{bad}:line 1: field 'answers' should be a list, got a string" in err


def test_a_corrupt_compiled_folder_is_one_line(capsys, tmp_path, static_retriever):
    from multihop.programs import SingleStepRAG, save

    save(SingleStepRAG(retriever=static_retriever, k=2), tmp_path / "prog")
    (tmp_path / "prog" / "manifest.json").write_text("{not json")
    err = fails(["ask", "Capital of France?", "--load", str(tmp_path / "prog")], capsys)
    assert "manifest.json:line 1: not valid JSON" in err


def test_a_failure_at_run_time_exits_1_and_debug_shows_the_traceback(capsys, monkeypatch, questions, tmp_path):
    import multihop.lm.backends

    def down(*args, **kwargs):
        raise RuntimeError("the endpoint is down")

    monkeypatch.setattr(multihop.lm.backends, "make_lm", down)
    argv = ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "run")]
    assert fails(argv, capsys, code=1) == "error: the endpoint is down"
    assert run(app, ["--debug", *argv]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().endswith("error: the endpoint is down")


def test_an_identical_rerun_resumes_and_another_run_is_refused(capsys, monkeypatch, questions, tmp_path):
    import multihop.lm.backends

    from helpers import scripted_lm

    monkeypatch.setattr(multihop.lm.backends, "make_lm", lambda spec, **settings: scripted_lm(
        lambda prompt: {"reasoning": "r", "answer": "Paris"}, name="scripted")[0])
    argv = ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "run")]
    assert run(app, argv) == 0 and run(app, argv) == 0  # the same run resumes
    capsys.readouterr()
    err = fails([*argv, "--judge-lm", "openai/judge"], capsys)
    assert "holds another evaluation (judge: None there, 'local/scripted' now)" in err


def test_model_metadata_is_read_from_dspys_snapshot_with_no_network_call(monkeypatch, capfd):
    import importlib
    import urllib.request

    from dspy.clients import model_metadata

    import multihop

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    importlib.reload(multihop)  # offline: importing multihop sets DSPy's (LiteLLM's) variable
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "true"
    monkeypatch.setattr(model_metadata, "_data", None)
    monkeypatch.setattr(urllib.request, "urlopen", lambda *args, **kwargs: pytest.fail("a network call"))
    assert model_metadata._load() and model_metadata.source_info()["source"] == "local"
    assert "refresh failed" not in capfd.readouterr().err  # DSPy's own logger writes to stderr


def test_a_command_whose_extra_is_not_installed_names_the_extra(capsys, monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "trl", None)  # what `import trl` meets where the train extra is not installed
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"stage": "answer", "question_id": "q1", "call": 0,
                                "messages": [{"role": "user", "content": "Seven?"}], "completion": "seven"}) + "\n")
    err = fails(["distill", str(rows), "--out", str(tmp_path / "student")], capsys)
    assert err.endswith("this command needs pip install 'multihop[train]'"), err
