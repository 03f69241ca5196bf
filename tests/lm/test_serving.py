"""``multihop serve``: a DSPy program driven over loopback through llama-cpp-python's server."""

import socket
import subprocess
import sys
import time

import dspy
import pytest

from multihop.lm.backends import make_lm
from multihop.lm.engines.schema import POLICY
from multihop.lm.serving import server_app
from multihop.programs import NoRetrieval


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
    server = subprocess.Popen([sys.executable, "-m", "multihop.cli", "serve", "--port", str(port), "--api-key",
                               "s3cret"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:  # a keyed server: the client sends the key with every request
                lm = make_lm("local:smollm2", api_base=f"http://127.0.0.1:{port}/v1", api_key="s3cret", cache=False)
                break
            except ValueError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    pytest.fail(f"the server did not start: {server.communicate(timeout=10)[0]}")
                time.sleep(0.5)
        assert lm.model.startswith("local/smollm2-llamacpp-") and lm.model.endswith(f"-json{POLICY}")
        with pytest.raises(ValueError, match="401"):  # no key: refused
            make_lm("local:smollm2", api_base=f"http://127.0.0.1:{port}/v1")
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            prediction = NoRetrieval()(question="Who wrote Hamlet?")
        assert prediction.answer and prediction.counts["llm_calls"] == 1
        assert prediction.counts["prompt_tokens"] > 20  # the server's usage reached the trace
        served_as_openai(port, lm.model.removeprefix("local/").removesuffix(f"-json{POLICY}"))
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_host_other_machines_reach_needs_a_key_or_insecure():
    from multihop.lm.serving import is_loopback

    assert [is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost", "0.0.0.0", "10.0.0.5", "myhost")] \
        == [True, True, True, True, False, False, False]
    for host in ("0.0.0.0", "192.168.1.7"):
        with pytest.raises(ValueError, match=f"--host {host} opens the model to the network: give --api-key"):
            server_app("local:smollm2", 8000, host=host)


@pytest.mark.slow
def test_a_keyed_server_answers_only_clients_with_the_key():
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python's server is not installed")
    from starlette.testclient import TestClient

    client = TestClient(server_app("local:smollm2", 8000, host="0.0.0.0", api_key="s3cret"))
    assert client.get("/v1/models").status_code == 401
    assert client.get("/v1/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
    answered = client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
    assert answered.status_code == 200 and answered.json()["data"][0]["id"].startswith("smollm2")


@pytest.mark.slow
def test_the_served_model_samples_under_a_schema_as_the_engine_does():
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python's server is not installed")
    import llama_cpp
    from llama_cpp.server import app as served

    from multihop.lm.engines.llamacpp_sampler import guided_llama_class

    server_app("local:smollm2", 8000)
    assert isinstance(served._llama_proxy._current_model, guided_llama_class())
    assert llama_cpp.Llama is not guided_llama_class()  # only the server's model was built as one


def served_as_openai(port: int, name: str) -> None:
    """The same server reached as any OpenAI-compatible endpoint (``openai/<its model>``): in llama-cpp-python's
    ``json_object`` form every stage of HANRAG parses (no fallback, no stage error); the ``json_schema`` form, which
    that server refuses, stops with the line naming ``--structured off``."""
    from multihop.lm.engines.served import StructuredOutputRefused
    from multihop.programs import HANRAG

    from helpers import PASSAGES, StaticRetriever

    api_base = f"http://127.0.0.1:{port}/v1"
    lm = make_lm(f"openai/{name}", api_base=api_base, api_key="s3cret", structured="json_object", cache=False,
                 max_tokens=64)
    program = HANRAG(retriever=StaticRetriever(PASSAGES), k=2, max_steps=2)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        prediction = program(question="Where was the director of Inception born?")
    assert prediction.counts["llm_calls"] >= 2
    assert prediction.counts.get("fallbacks", 0) == 0 and prediction.counts["stage_errors"] == 0
    refused = make_lm(f"openai/{name}", api_base=api_base, api_key="s3cret", cache=False)  # auto: json_schema
    with dspy.context(lm=refused, adapter=dspy.JSONAdapter()), pytest.raises(StructuredOutputRefused,
                                                                            match="--structured off"):
        NoRetrieval()(question="Who wrote Hamlet?")
