"""A ``--ray`` address where no cluster answers ends in one line, in the time ``MULTIHOP_RAY_TIMEOUT`` allows, naming
the address and how to start a cluster; Ray itself is never asked to connect there (it retries for minutes)."""

import socket
import time

import pytest
from typer.testing import CliRunner

from multihop.cli import app
from multihop.cli.errors import run
from multihop.evaluation.ray_cluster import RayUnreachableError, check_reachable

pytest.importorskip("ray")
runner = CliRunner()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is: nothing listens there


def test_an_address_nobody_answers_is_refused_within_the_timeout():
    port = closed_port()
    started = time.monotonic()
    with pytest.raises(RayUnreachableError, match=rf"--ray ray://127.0.0.1:{port}: no Ray cluster answers there .* "
                                                  r"`ray start --head` .* --ray auto"):
        check_reachable(f"ray://127.0.0.1:{port}", timeout=1.5)
    assert 1.4 < time.monotonic() - started < 5
    with pytest.raises(RayUnreachableError, match="a cluster's address is host:port"):
        check_reachable("nowhere", timeout=1)
    with socket.socket() as listening:  # a port that answers is left to Ray
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        check_reachable(f"127.0.0.1:{listening.getsockname()[1]}", timeout=1)


@pytest.mark.parametrize("command", ["index", "eval"])
def test_index_build_and_eval_on_an_unanswering_cluster_end_in_one_line(command, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MULTIHOP_RAY_TIMEOUT", "1")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "p1", "title": "Paris", "text": "Paris is in France."}\n')
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "q1", "question": "Where is Paris?", "answer": "France"}\n')
    address = f"127.0.0.1:{closed_port()}"
    argv = (["index", "build", str(corpus), "--out", str(tmp_path / "index"), "--first-stage", "dense", "--encoder",
             "minilm", "--ray", address] if command == "index" else
            ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "run"), "--ray",
             address, "--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1"])
    started = time.monotonic()
    code = run(app, argv)
    assert code == 2 and time.monotonic() - started < 60
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("error: ") and f"--ray {address}: no Ray cluster answers there" in error[-1]
    assert not any("Traceback" in line for line in error)
