"""Interrupted work, every kind: each command is stopped mid-run with kill -9 or Ctrl-C (SIGINT), run again into the
same folder, and must end with what an uninterrupted run writes — the same rows, cache or index files — and no stray
lock, shard or temporary file."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from multihop.lm.loopback import loopback_server

QUESTIONS = [{"id": f"q{i}", "question": f"Which city is number {i}?", "answers": ["Paris"],
              "paragraphs": [{"title": f"Paris {i}", "text": f"Paris is city number {i}.", "is_supporting": True},
                             {"title": f"Berlin {i}", "text": f"Berlin is city {i}.", "is_supporting": False}]}
             for i in range(10)]
STRAY = (".multihop.lock", ".tmp", "shards")  # what a finished folder keeps none of (names containing these)


def commands(server) -> dict[str, tuple[list[str], str, str]]:
    """name → (argv after ``multihop`` with OUT for the output folder, the file whose growth means work is under way,
    the file or folder compared with the uninterrupted run's)."""
    lm = ["--lm", "hosted_vllm/loopback", "--api-base", server.api_base]
    return {
        "eval --threads": (["eval", "--program", "NoRetrieval", "--data", "musique", "--out", "OUT", "--threads", "4",
                            *lm], "results.jsonl", "results.jsonl"),
        "compare --threads": (["compare", "--programs", "NoRetrieval,SingleStepRAG", "--datasets", "musique",
                               "--first-stage", "bm25", "--threads", "4", "--out", "OUT", *lm],
                              "musique/SingleStepRAG/results.jsonl", "musique/SingleStepRAG/results.jsonl"),
        "reproduce": (["reproduce", "HANRAG", "--table", "2", "--datasets", "musique", "--limit", "4", "--threads",
                       "4", "--out", "OUT", *lm], "table-2/musique/No-retrieval/results.jsonl",
                      "table-2/musique/Single-step-Approach/results.jsonl"),
        "cirag extract --threads": (["cirag", "extract", "DEV", "--out", "OUT", "--threads", "2", *lm],
                                    "triples-00000.jsonl", "triples-00000.jsonl"),
        "adaptiverag labels": (["adaptiverag", "labels", "--dataset", "musique", "--bias", "C", "--out", "OUT",
                                "--threads", "2", *lm], "labels.jsonl", "labels.jsonl"),
    }


def rows(path: Path) -> dict:
    """A JSON-lines file's rows by id, without what differs from run to run (seconds, timings)."""
    found = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        found[row["id"]] = {key: value for key, value in row.items() if key not in ("seconds", "timing", "started")}
    return found


def start(argv: list[str], out: Path, env: dict) -> subprocess.Popen:
    dev = Path(env["MULTIHOP_DATA"]) / "musique" / "dev" / "musique_qa_100.json"
    argv = [str(out) if arg == "OUT" else str(dev) if arg == "DEV" else arg for arg in argv]
    return subprocess.Popen([sys.executable, "-m", "multihop.cli", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupted")
    data = root / "data"
    for split, name in (("dev", "musique_qa_100.json"), ("train", "musique_train.json")):
        (data / "musique" / split).mkdir(parents=True)
        questions = QUESTIONS if split == "dev" else [{**q, "id": f"t{q['id']}"} for q in QUESTIONS]
        (data / "musique" / split / name).write_text(json.dumps(questions))
    return {**os.environ, "MULTIHOP_DATA": str(data), "MULTIHOP_HOME": str(root / "home"), "HF_HUB_OFFLINE": "1"}


@pytest.mark.slow  # each case runs its command three times in subprocesses
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
@pytest.mark.parametrize("command", ["eval --threads", "compare --threads", "reproduce", "cirag extract --threads",
                                     "adaptiverag labels"])
def test_an_interrupted_command_reruns_to_what_an_uninterrupted_run_writes(command, how, environment, tmp_path):
    with loopback_server(latency=0.5, lifetime=600) as server:  # half a second a call: the signal lands mid-run
        argv, progress, compared = commands(server)[command]
        whole = start(argv, tmp_path / "whole", environment)
        assert whole.wait(timeout=300) == 0, whole.stderr.read()
        cut = start(argv, tmp_path / "cut", environment)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
                (tmp_path / "cut" / progress).exists() and (tmp_path / "cut" / progress).read_text().count("\n") >= 2):
            time.sleep(0.05)
        cut.send_signal(how)
        code = cut.wait(timeout=60)
        assert code == (130 if how == signal.SIGINT else -signal.SIGKILL), cut.stderr.read()
        rerun = start(argv, tmp_path / "cut", environment)
        assert rerun.wait(timeout=300) == 0, rerun.stderr.read()
    resumed, uninterrupted = rows(tmp_path / "cut" / compared), rows(tmp_path / "whole" / compared)
    assert sorted(resumed) == sorted(uninterrupted)
    differing = sorted({(qid, key) for qid, row in uninterrupted.items() for key in row
                        if resumed[qid].get(key) != row[key]})
    assert not differing, differing
    stray = [path for path in (tmp_path / "cut").rglob("*") if any(mark in path.name for mark in STRAY)]
    assert not stray, stray
