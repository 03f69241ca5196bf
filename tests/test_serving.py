"""``multihop serve``: a DSPy program driven over loopback through llama-cpp-python's server."""

import socket
import subprocess
import sys
import time

import dspy
import pytest

from multihop.lms import make_lm
from multihop.programs import NoRetrieval
from multihop.serving import server_app


def test_only_a_local_gguf_model_is_served(tmp_path):
    with pytest.raises(ValueError, match="not a local GGUF model"):
        server_app("openai/gpt-4o-mini", 8000)
    with pytest.raises(ValueError, match="not a LoRA adapter folder"):
        server_app("local:smollm2", 8000, adapter=tmp_path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_program_runs_against_the_served_model_over_loopback():
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python's server is not installed")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "multihop.cli", "serve", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                lm = make_lm("local:smollm2", api_base=f"http://127.0.0.1:{port}/v1", cache=False)
                break
            except ValueError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    pytest.fail(f"the server did not start: {server.communicate(timeout=10)[0]}")
                time.sleep(0.5)
        assert lm.model.startswith("local/smollm2-llamacpp-") and lm.model.endswith("-json2")
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            prediction = NoRetrieval()(question="Who wrote Hamlet?")
        assert prediction.answer and prediction.counts["llm_calls"] == 1
        assert prediction.counts["prompt_tokens"] > 20  # the server's usage reached the trace
    finally:
        server.terminate()
        server.wait(timeout=30)
