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

from multihop.data.folders import sha256_file
from multihop.lm.loopback import loopback_server

from helpers import tiny, tiny_causal_lm

QUESTIONS = [{"id": f"q{i}", "question": f"Which city is number {i}?", "answers": ["Paris"],
              "paragraphs": [{"title": f"Paris {i}", "text": f"Paris is city number {i}.", "is_supporting": True},
                             {"title": f"Berlin {i}", "text": f"Berlin is city {i}.", "is_supporting": False}]}
             for i in range(10)]
STRAY = (".multihop.lock", ".tmp", "shards")  # what a finished folder keeps none of (names containing these)
# three encoding shards of 256, 256 and 8 passages: a build is cut once its first shard is written
PASSAGES = [{"title": f"Town {i}", "text": f"Town {i} lies on river {i % 7} and has {i} bridges."} for i in range(520)]
# the two encodings a build resumes from: float32 shards (full) and float16 shards, which fp16 and int8 share with
# pq, the one form that also trains a codebook after the shards (each form's own files: test_token_states.py)
TOKEN_STATE_FORMS = ("full", "pq")
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon")
FILES = "files.json"  # a saved folder's inventory: every file's size and sha256


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
        # its rows come in chunks of 8: the cut lands in the last two questions' A, B and two IRCoT steps
        "adaptiverag labels": (["adaptiverag", "labels", "--dataset", "musique", "--bias", "C", "--out", "OUT",
                                "--set", "max_steps=2", "--threads", "2", *lm], "labels.jsonl", "labels.jsonl"),
        "distill": (["distill", "ROWS", "--base", "STUDENT", "--r", "4", "--epochs", "1", "--batch-size", "1",
                     "--checkpoint-every", "10", "--out", "OUT"], "checkpoints/checkpoint-10/trainer_state.json",
                    "adapter_model.safetensors"),
        "cooprag train": (["cooprag", "train", "musique", "--out", "OUT", "--encoder", "ENCODER", "--batch-size",
                             "2", "--micro-batch", "4", "--epochs", "8", "--max-steps", "20", "--checkpoint-every",
                             "5", "--lr", "1e-3"], "checkpoints/checkpoint-5/trainer_state.json",
                            "model.safetensors"),
        **{f"index build --token-states {form}": (
            ["index", "build", "CORPUS", "--out", "OUT", "--encoder", "minilm", "--markers", "CoopRAG",
             "--token-states", form], "HOME/shards/*/shard-*.npz", FILES) for form in TOKEN_STATE_FORMS},
    }


def rows(path: Path) -> dict:
    """A JSON-lines file's rows by id (each id once), without what differs from run to run (seconds, timings); a
    saved folder's inventory (:data:`FILES`) as its files' checksums by name."""
    if path.name == FILES:
        return {name: entry["sha256"] for name, entry in json.loads(path.read_text()).items()}
    if path.suffix != ".jsonl":  # trained weights
        return {path.name: sha256_file(path)}
    found = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        assert row["id"] not in found, f"{path}: {row['id']} recorded twice"
        found[row["id"]] = {key: value for key, value in row.items() if key not in ("seconds", "timing", "started")}
    return found


# `multihop ARGV` with Ctrl-C raising KeyboardInterrupt, as in a terminal, even where the tests run with SIGINT ignored
# (a shell's background job), which a child inherits: Python then never raises it
AS_TYPED = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "sys.argv[0] = 'multihop'; runpy.run_module('multihop.cli', run_name='__main__')")


def start(argv: list[str], out: Path, env: dict) -> subprocess.Popen:
    root = Path(env["MULTIHOP_DATA"])
    files = {"OUT": out, "DEV": root / "musique" / "dev" / "musique_qa_100.json", "CORPUS": root / "corpus.jsonl",
             "ROWS": root / "rows.jsonl", "STUDENT": root / "student", "ENCODER": root / "encoder" / "st"}
    argv = [str(files.get(arg, arg)) for arg in argv]
    # each run a DSPy cache of its own: the cut run asks the server as the whole run did (from the whole run's cache it
    # would finish before the signal), the rerun asks again for the questions the cut run had in flight (from its
    # cache they would count no tokens), and the loopback's replies, seeded by the request, are the same each time
    env = {**env, "DSPY_CACHEDIR": f"{out}-dspy-cache-{time.monotonic_ns()}"}
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{out}-{time.monotonic_ns()}.stderr", "w") as stderr:  # a file: a pipe nobody reads would fill
        run = subprocess.Popen([sys.executable, "-c", AS_TYPED, *argv], env=env, stdout=subprocess.DEVNULL,
                               stderr=stderr)
    run.stderr_path = Path(stderr.name)
    return run


def said(run: subprocess.Popen) -> str:
    """What ``run`` wrote to its stderr."""
    return run.stderr_path.read_text()


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupted")
    data = root / "data"
    for split, name in (("dev", "musique_qa_100.json"), ("train", "musique_train.json")):
        (data / "musique" / split).mkdir(parents=True)
        questions = QUESTIONS if split == "dev" else [{**q, "id": f"t{q['id']}"} for q in QUESTIONS]
        (data / "musique" / split / name).write_text(json.dumps(questions))
    (data / "corpus.jsonl").write_text("".join(json.dumps(passage) + "\n" for passage in PASSAGES))
    rows = [{"stage": "answer", "question_id": f"q{i}", "call": 0, "completion": f"answer {WORDS[i % 4]}",
             "messages": [{"role": "system", "content": "Answer the question."},
                          {"role": "user", "content": f"question {WORDS[i % 5]} {i}"}]} for i in range(30)]
    # 30 steps of one row: cut after the checkpoint at 10
    (data / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    tiny_causal_lm(data / "student", ["Answer the question.", "question answer system user assistant", *WORDS])
    (data / "encoder").mkdir()
    tiny(data / "encoder", 4)  # 20 steps of 2 questions in a few seconds
    return {**os.environ, "MULTIHOP_DATA": str(data), "HF_HUB_OFFLINE": "1"}


def under_way(progress: str, out: Path, home: Path) -> bool:
    """Whether the cut run is under way: its progress file holds two rows, or (a ``HOME/`` pattern) files match in
    MULTIHOP_HOME (an index build's first encoding shard)."""
    if progress.startswith("HOME/"):
        return any(home.glob(progress.removeprefix("HOME/")))
    return (out / progress).exists() and (out / progress).read_text().count("\n") >= 2


SIGNALS = {"kill-9": signal.SIGKILL, "ctrl-c": signal.SIGINT}
COMMANDS = ("eval --threads", "compare --threads", "reproduce", "cirag extract --threads", "adaptiverag labels",
            "distill", "cooprag train", *(f"index build --token-states {form}" for form in TOKEN_STATE_FORMS))


def cut_when_under_way(cuts: dict[str, subprocess.Popen], progress: str, tmp_path: Path, homes: dict) -> dict:
    """Send each cut run (by signal name) its signal as soon as its progress shows, watching them all at once (one
    waited on alone could finish meanwhile); each one's exit code. A run that ends before its progress shows fails."""
    waiting, deadline = dict(cuts), time.monotonic() + 120
    while waiting and time.monotonic() < deadline:
        for how, run in list(waiting.items()):
            assert run.poll() is None, (how, "ended before it was cut", said(run))
            if under_way(progress, tmp_path / how, Path(homes[how]["MULTIHOP_HOME"])):
                run.send_signal(SIGNALS[how])
                del waiting[how]
        time.sleep(0.05)
    assert not waiting, (sorted(waiting), "no progress in 120 s")
    return {how: run.wait(timeout=60) for how, run in cuts.items()}


@pytest.mark.slow  # each command runs in subprocesses: whole, and cut by each signal then run again, side by side
@pytest.mark.parametrize("command", COMMANDS)
def test_an_interrupted_command_reruns_to_what_an_uninterrupted_run_writes(command, environment, tmp_path):
    # each run a MULTIHOP_HOME of its own (a cut run and its rerun share one): an index build resumes from its shards
    homes = {run: {**environment, "MULTIHOP_HOME": str(tmp_path / f"home-{run}")} for run in ("whole", *SIGNALS)}
    runs = []
    with loopback_server(latency=0.5, lifetime=600) as server:  # half a second a call: the signal lands mid-run
        argv, progress, compared = commands(server)[command]
        try:
            runs.append(whole := start(argv, tmp_path / "whole", homes["whole"]))
            cuts = {how: start(argv, tmp_path / how, homes[how]) for how in SIGNALS}
            runs.extend(cuts.values())
            for how, code in cut_when_under_way(cuts, progress, tmp_path, homes).items():
                assert code == (130 if how == "ctrl-c" else -signal.SIGKILL), (how, said(cuts[how]))
            reruns = {how: start(argv, tmp_path / how, homes[how]) for how in SIGNALS}
            runs.extend(reruns.values())
            for run in (whole, *reruns.values()):
                assert run.wait(timeout=300) == 0, said(run)
        finally:  # a failed case leaves no command running into the next
            for run in runs:
                run.kill()
                run.wait()
    expected = rows(tmp_path / "whole" / compared)
    for how in SIGNALS:
        resumed = rows(tmp_path / how / compared)
        assert sorted(resumed) == sorted(expected), how
        if compared == FILES or not compared.endswith(".jsonl"):  # every file of the saved index, or the weights
            assert resumed == expected, (how, sorted(name for name in resumed if resumed[name] != expected[name]))
        else:
            differing = sorted({(qid, key) for qid, row in expected.items() for key in row
                                if resumed[qid].get(key) != row[key]})
            assert not differing, (how, differing)
        stray = [path for path in (tmp_path / how).rglob("*") if any(mark in path.name for mark in STRAY)]
        stray += [path for path in (tmp_path / f"home-{how}").rglob("*")  # no shard or lock file left behind
                  if path.is_file() and any(mark in str(path) for mark in STRAY)]
        assert not stray, (how, stray)
