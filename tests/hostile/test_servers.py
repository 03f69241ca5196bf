"""Every command that talks to a server, against one that fails on purpose — HTTP 500, HTTP 429, a body that is no
JSON, no answer in time: the command ends with exit 1 and one line, or records the failed questions as errors (and
eval, compare and reproduce then exit 3, or 4 when every question failed, with one line); nothing finished is lost,
and once the server answers, a rerun finishes every question once."""

import json

import pytest
from hostile import QUESTIONS, one_line

from multihop.lm.loopback import FAULTS

LM = ["--lm", "hosted_vllm/loopback", "--lm-timeout", "1"]


def commands(tmp_path, server):
    """Each command that asks a served LM, with where its rows land."""
    lm = [*LM, "--api-base", server.api_base]
    return {
        "eval": (["eval", "--program", "NoRetrieval", "--data", "musique", "--out", tmp_path / "eval", *lm],
                 tmp_path / "eval" / "results.jsonl"),
        "compare": (["compare", "--programs", "NoRetrieval", "--datasets", "musique", "--first-stage", "bm25",
                     "--out", tmp_path / "compare", *lm], tmp_path / "compare" / "musique" / "NoRetrieval" /
                    "results.jsonl"),
        "reproduce": (["reproduce", "HANRAG", "--table", "2", "--datasets", "musique", "--limit", "1",
                       "--out", tmp_path / "reproduce", *lm],
                      tmp_path / "reproduce" / "table-2" / "musique" / "No-retrieval" / "results.jsonl"),
        "trajectories": (["trajectories", "--program", "NoRetrieval", "--data", "musique", "--out",
                          tmp_path / "rows", "--min-score", "0", *lm], None),
    }


def finished(path) -> list[str]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [row["id"] for row in rows if not row.get("error")]


CASES = [("eval", fault) for fault in FAULTS] + [  # a hang costs the same everywhere: once is enough
    (command, fault) for command in ("compare", "reproduce", "trajectories") for fault in ("500", "garbage")]


@pytest.mark.slow  # every fault is met with the LM's retries and timeouts (5-30 s a case)
@pytest.mark.parametrize("command, fault", CASES)
def test_a_failing_server_ends_in_one_line_or_error_rows_and_the_rerun_finishes_every_question(
        command, fault, data, server, cli, tmp_path):
    argv, results = commands(tmp_path, server)[command]
    server.fault = fault
    code, error = cli(*argv)
    assert code in ((0, 1) if command == "trajectories" else (1, 3, 4)), error
    if code:
        assert "error: " in one_line(error)
    assert not any("Traceback" in line for line in error)
    server.fault = None
    code, error = cli(*argv)
    assert code == 0, error
    if results is not None:
        done = finished(results)
        asked = QUESTIONS[:1] if command == "reproduce" else QUESTIONS
        assert sorted(done) == sorted(q["id"] for q in asked) and len(done) == len(set(done))


def test_a_server_refusing_json_schema_stops_the_run_in_one_line_naming_the_fix(data, server, cli, tmp_path):
    server.refuse_schemas = True
    argv, _ = commands(tmp_path, server)["eval"]
    code, error = cli(*argv)
    assert code in (1, 2) and "--structured" in one_line(error)
