"""The hostile suite's fixtures: a loopback server that misbehaves on purpose (``server.fault``), a data folder of
three questions, and ``cli``, which runs a command as a user does and returns its exit code and stderr lines."""

import json

import pytest
from hostile import QUESTIONS

from multihop.cli import app
from multihop.cli.errors import run
from multihop.lm.loopback import loopback_server


@pytest.fixture
def server():
    with loopback_server(latency=0.0, lifetime=600) as running:
        running.hang_seconds = 3.0
        yield running


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A MULTIHOP_DATA whose MuSiQue dev and train files hold three questions, and a MULTIHOP_HOME of the test's."""
    root = tmp_path / "data"
    train = [{**question, "id": f"train-{question['id']}"} for question in QUESTIONS]  # no dev question in training
    for split, name, questions in (("dev", "musique_qa_100.json", QUESTIONS), ("train", "musique_train.json", train)):
        (root / "musique" / split).mkdir(parents=True)
        (root / "musique" / split / name).write_text(json.dumps(questions))
    monkeypatch.setenv("MULTIHOP_DATA", str(root))
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MULTIHOP_LM_TIMEOUT", "1")
    return root


@pytest.fixture
def cli(capsys):
    """``cli(*argv) -> (exit code, stderr lines)``: the command run as ``multihop`` runs it."""

    def invoke(*argv):
        capsys.readouterr()
        code = run(app, [str(arg) for arg in argv])
        return code, capsys.readouterr().err.strip().splitlines()

    return invoke
