"""A ``--ray`` address where no cluster answers ends in one line, in the time ``MULTIHOP_RAY_TIMEOUT`` allows, naming
the address and how to start a cluster; Ray itself is never asked to connect there (it retries for minutes). Ray
tasks whose worker died: retried, else one line naming what a rerun answers, and the rerun answers only that."""

import json
import os
import socket
import time
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from multihop.cli import app
from multihop.cli.errors import run
from multihop.data.jsonl import read_rows
from multihop.evaluation.ray_cluster import RayTasksFailed, RayUnreachableError, check_reachable, ray_evaluate_all
from multihop.evaluation.runner import Evaluation, evaluate

from helpers import Echo, echo_examples, local_ray, without_seconds

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


@pytest.mark.parametrize("command", ["index", "eval", "compare"])
def test_index_build_eval_and_compare_on_an_unanswering_cluster_end_in_one_line(command, tmp_path, monkeypatch,
                                                                                 capsys):
    monkeypatch.setenv("MULTIHOP_RAY_TIMEOUT", "0.3")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "p1", "title": "Paris", "text": "Paris is in France."}\n')
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "q1", "question": "Where is Paris?", "answer": "France"}\n')
    address = f"127.0.0.1:{closed_port()}"
    lm = ["--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1"]
    argv = {"index": ["index", "build", str(corpus), "--out", str(tmp_path / "index"), "--first-stage", "dense",
                      "--encoder", "minilm", "--ray", address],
            "eval": ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "run"),
                     "--ray", address, *lm],
            "compare": ["compare", "--programs", "NoRetrieval", "--datasets", str(questions), "--out",
                        str(tmp_path / "cmp"), "--ray", address, *lm]}[command]
    started = time.monotonic()
    code = run(app, argv)
    assert code == 2 and time.monotonic() - started < 60
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("error: ") and f"--ray {address}: no Ray cluster answers there" in error[-1]
    assert not any("Traceback" in line for line in error)


class DyingEcho(Echo):
    """An Echo whose process dies (``os._exit``) on question 5 while the file ``marker`` exists, removing it first:
    a worker killed once, as a preempted node's."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = marker

    def forward(self, question):
        if question == "question 5" and Path(self.marker).exists():
            Path(self.marker).unlink()
            os._exit(1)
        return super().forward(question)


def dying_echo(marker: str):
    """The recipe of a Ray task: a :class:`DyingEcho`, no DSPy settings."""
    return DyingEcho(marker), {}


@pytest.mark.slow  # a local two-CPU Ray cluster (~30 s)
def test_a_task_whose_worker_died_is_one_line_and_a_rerun_answers_only_its_questions(tmp_path):
    examples = echo_examples(8)
    evaluate(Echo(), examples, tmp_path / "one", progress=False)
    marker = tmp_path / "die"

    def on_ray(out, retries):
        evaluation = Evaluation(DyingEcho(str(marker)), examples, out, name="echo")
        return ray_evaluate_all([evaluation], [partial(dying_echo, str(marker))], workers=2, progress=False,
                                questions_per_task=2, retries=retries)

    with local_ray(Path(__file__).parent):
        marker.touch()
        with pytest.raises(RayTasksFailed, match=r"^1 Ray task\(s\) failed, 2 question\(s\) unanswered \(the first: "
                                                 r"echo on q4, q5: \w+Error: .*\); every other question is "
                                                 r"recorded: rerun the same command to answer those of .*ray$"):
            on_ray(tmp_path / "ray", retries=0)
        assert sorted(read_rows(tmp_path / "ray" / "results.jsonl")) == ["q0", "q1", "q2", "q3", "q6", "q7"]
        assert on_ray(tmp_path / "ray", retries=0)[0]["questions"] == 8  # the rerun
        lines = (tmp_path / "ray" / "results.jsonl").read_text().splitlines()
        assert [json.loads(line)["id"] for line in lines[6:]] == ["q4", "q5"]  # it answered those two only
        marker.touch()
        assert on_ray(tmp_path / "retried", retries=1)[0]["questions"] == 8  # Ray ran the dead worker's task again
    for folder in ("ray", "retried"):
        assert without_seconds(read_rows(tmp_path / folder / "results.jsonl")) == without_seconds(
            read_rows(tmp_path / "one" / "results.jsonl"))
    assert not marker.exists()
