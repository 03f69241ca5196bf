"""A served LM that fails: timeouts and retries bounded, a run that stops when the endpoint is down and resumes.

The endpoint is a stub OpenAI server on 127.0.0.1 (an ephemeral port) that answers as each test tells it — hang,
HTTP 500, or a reply — bounded in requests and in time, and stopped when the test ends."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dspy
import pytest
from dspy.utils.exceptions import LMTimeoutError, LMTransportError

from multihop.evaluation.runner import MAX_ENDPOINT_FAILURES, EndpointDownError, evaluate
from multihop.lm.backends import RETRIES, make_lm
from multihop.programs import NoRetrieval

from helpers import echo_examples

MAX_REQUESTS, MAX_HANG = 200, 5.0


class Stub(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - the http.server API
        server = self.server
        server.requests += 1
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if server.requests > MAX_REQUESTS:
            self.send_error(503)
        elif server.mode == "hang":
            time.sleep(MAX_HANG)
            self.send_error(504)
        elif server.mode in ("500", "429"):
            self.send_response(int(server.mode))
            self.send_header("retry-after", "0")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "down on purpose"}}')
        else:
            body = json.dumps({"id": "x", "object": "chat.completion", "model": "stub", "choices": [{
                "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content":
                    '{"reasoning": "r", "answer": "Paris"}'}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    server.daemon_threads = True
    server.requests, server.mode = 0, "ok"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def stub_lm(server, **settings) -> dspy.LM:
    return make_lm("openai/stub", api_base=f"http://127.0.0.1:{server.server_port}/v1", api_key="k", cache=False,
                   **settings)


def test_a_hanging_endpoint_gives_up_after_the_timeout_and_its_retries(endpoint):
    endpoint.mode = "hang"
    lm = stub_lm(endpoint, timeout=1)
    start = time.monotonic()
    with pytest.raises(LMTimeoutError, match="gave no reply in 1 s"):  # our served engine: structured outputs on
        lm("hello")
    elapsed = time.monotonic() - start
    assert endpoint.requests == RETRIES + 1  # the first request and its retries
    assert elapsed < (RETRIES + 1) * 1 + 1 + 2 + 2  # each attempt within the timeout, plus DSPy's 1 s and 2 s backoff


def test_a_run_against_a_dead_endpoint_stops_and_its_rerun_finishes_once_it_answers(endpoint, tmp_path):
    endpoint.mode = "500"
    questions = echo_examples(MAX_ENDPOINT_FAILURES + 2)
    with dspy.context(lm=stub_lm(endpoint), adapter=dspy.JSONAdapter()):
        with pytest.raises(EndpointDownError, match="failed on 10 questions in a row"):
            evaluate(NoRetrieval(), questions, tmp_path, progress=False)
    assert not (tmp_path / "results.jsonl").read_text()  # nothing recorded as done
    endpoint.mode = "ok"
    with dspy.context(lm=stub_lm(endpoint), adapter=dspy.JSONAdapter()):
        summary = evaluate(NoRetrieval(), questions, tmp_path, progress=False)
    assert summary["questions"] == len(questions) and summary["errors"] == 0


@pytest.mark.parametrize("mode,error", [("500", "LMServerError"), ("429", "LMRateLimitError")])
def test_the_served_engine_reports_failures_as_dspys_retryable_errors(endpoint, mode, error):
    from dspy.lm15 import Config, Message, Request

    from multihop.lm.engines.served import ServedEngine

    endpoint.mode = mode
    engine = ServedEngine(f"http://127.0.0.1:{endpoint.server_port}/v1", "smollm2-llamacpp-x", timeout=5)
    with pytest.raises(Exception) as raised:
        engine.complete(Request(model="m", messages=(Message.user("q"),), config=Config(max_tokens=4)))
    assert type(raised.value).__name__ == error and f"answered {mode}" in str(raised.value)
    assert (raised.value.status, raised.value.retry_after) == (int(mode), 0.0)  # the stub's Retry-After: DSPy waits 0 s
    dead = ServedEngine("http://127.0.0.1:9/v1", "smollm2-llamacpp-x", timeout=5)
    with pytest.raises(LMTransportError, match="unreachable"):
        dead.complete(Request(model="m", messages=(Message.user("q"),), config=Config(max_tokens=4)))


def test_retry_after_is_read_as_seconds_or_a_date_and_capped():
    from datetime import datetime, timedelta, timezone
    from email.utils import format_datetime

    from multihop.lm.engines.served import RETRY_AFTER_LIMIT, retry_after_seconds

    assert retry_after_seconds("2.5") == 2.5 and retry_after_seconds("0") == 0.0
    assert retry_after_seconds("3600") == RETRY_AFTER_LIMIT == 60.0  # never an hour a retry
    soon = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after_seconds(soon) <= 30
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date gone: at once
    assert retry_after_seconds(None) is None and retry_after_seconds("-1") is None  # DSPy's backoff then


def test_an_eval_whose_every_question_failed_at_the_endpoint_exits_4_with_the_first_error(endpoint, tmp_path, capsys):
    from multihop.cli import app
    from multihop.cli.errors import ALL_ERRORED, run

    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Capital {i}?", "answers": ["Paris"]}) + "\n"
                                 for i in range(2)))
    lm = ["--lm", "openai/stub", "--api-base", f"http://127.0.0.1:{endpoint.server_port}/v1", "--api-key", "k"]
    endpoint.mode = "500"
    eval_ = ["eval", "--program", "NoRetrieval", "--data", str(questions), *lm]
    assert run(app, [*eval_, "--out", str(tmp_path / "down")]) == ALL_ERRORED == 4
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: 2 of 2 questions ended in an error (LMServerError: 2); the first: q0: "
                          "LMServerError: ")
    assert "answered 500" in err and err.endswith("(--allow-errors exits 0)")
    manifest = json.loads((tmp_path / "down" / "run.json").read_text())
    assert manifest["lm_settings"]["api_base"] == f"http://127.0.0.1:{endpoint.server_port}/v1"  # the served LM's
    assert run(app, [*eval_, "--out", str(tmp_path / "allowed"), "--allow-errors"]) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("warning: 2 of 2 questions ended in an error")
    endpoint.mode = "ok"
    assert run(app, [*eval_, "--out", str(tmp_path / "down")]) == 0  # the rerun retries them, and all answer
    assert "error" not in capsys.readouterr().err
