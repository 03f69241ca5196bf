"""A threaded ``multihop compare`` stopped with Ctrl-C (SIGINT) keeps every row it finished, and its rerun finishes
the rest: each program's results hold every question once, the rows an uninterrupted run writes."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from multihop.lm.loopback import loopback_server

QUESTIONS = [{"id": f"q{i}", "question": f"Which city is number {i}?", "answers": ["Paris"],
              "paragraphs": [{"title": "Paris", "text": f"Paris is city number {i}.", "is_supporting": True},
                             {"title": "Berlin", "text": "Berlin is a city.", "is_supporting": False}]}
             for i in range(12)]
PROGRAMS = ("NoRetrieval", "SingleStepRAG")


def compare(out, server, data, home) -> subprocess.Popen:
    env = {**os.environ, "MULTIHOP_DATA": str(data), "MULTIHOP_HOME": str(home), "HF_HUB_OFFLINE": "1",
           "DSPY_CACHEDIR": str(out) + "-cache"}  # its own replies' cache: the cut run asks the server as the whole did
    return subprocess.Popen([sys.executable, "-m", "multihop.cli", "compare", "--programs", ",".join(PROGRAMS),
                             "--datasets", "musique", "--first-stage", "bm25", "--threads", "4", "--out", str(out),
                             "--lm", "hosted_vllm/loopback", "--api-base", server.api_base],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows(out) -> dict[str, list[str]]:
    found = {}
    for program in PROGRAMS:
        path = out / "musique" / program / "results.jsonl"
        found[program] = [json.loads(line)["id"] for line in path.read_text().splitlines()] if path.exists() else []
    return found


def answers(out) -> dict[str, dict[str, str]]:
    return {program: {json.loads(line)["id"]: json.loads(line)["prediction"]
                      for line in (out / "musique" / program / "results.jsonl").read_text().splitlines()}
            for program in PROGRAMS}


@pytest.mark.slow  # three compare runs in subprocesses (20 s)
def test_a_threaded_compare_stopped_with_ctrl_c_keeps_its_rows_once_and_its_rerun_finishes_the_rest(tmp_path):
    data = tmp_path / "data"
    (data / "musique" / "dev").mkdir(parents=True)
    (data / "musique" / "dev" / "musique_qa_100.json").write_text(json.dumps(QUESTIONS))
    with loopback_server(latency=1.0, lifetime=300) as server:  # 24 rows take six seconds at 4 threads
        whole = compare(tmp_path / "whole", server, data, tmp_path / "home")
        assert whole.wait(timeout=240) == 0, whole.stderr
        stopped = compare(tmp_path / "cut", server, data, tmp_path / "home")
        deadline = time.monotonic() + 120
        while sum(map(len, rows(tmp_path / "cut").values())) < 6 and time.monotonic() < deadline:
            time.sleep(0.1)
        stopped.send_signal(signal.SIGINT)
        code = stopped.wait(timeout=60)
        assert code == 130 and "interrupted (a rerun resumes" in stopped.stderr.read()
        kept = rows(tmp_path / "cut")
        assert 6 <= sum(map(len, kept.values())) < 2 * len(QUESTIONS)  # stopped mid-run
        assert all(len(ids) == len(set(ids)) for ids in kept.values())
        rerun = compare(tmp_path / "cut", server, data, tmp_path / "home")
        assert rerun.wait(timeout=240) == 0, rerun.stderr.read()
    finished = rows(tmp_path / "cut")
    assert all(sorted(ids) == sorted(q["id"] for q in QUESTIONS) for ids in finished.values())  # each once
    assert all(finished[program][:len(kept[program])] == kept[program] for program in PROGRAMS)  # none rewritten
    assert answers(tmp_path / "cut") == answers(tmp_path / "whole")
