"""Served LMs at full speed, against the loopback OpenAI-compatible server (127.0.0.1, an ephemeral port,
a latency per call, replies drawn from each request's schema): the schema every stage sends per server kind, a
refused schema stopping the run in one line, the decoding in the cache key, ``acall`` with 50 questions in flight
keeping every trace, and a served student's stages routed to its LoRA's name."""

import asyncio
import time
from pathlib import Path

import dspy
import pytest

from multihop.cli import app
from multihop.cli.errors import run
from multihop.evaluation.runner import evaluate
from multihop.lm.adapter import default_adapter
from multihop.lm.backends import make_lm
from multihop.lm.engines.served import ServedEngine, StructuredOutputRefused
from multihop.lm.loopback import loopback_server, reply_text, schema_value
from multihop.lm.options import LMOptions, served_student
from multihop.optimize.student_stages import use_student
from multihop.programs import HANRAG, NoRetrieval, SingleStepRAG

from helpers import PASSAGES, StaticRetriever, echo_examples

SHIPPED_STUDENT = "multihop/student_adapters/gold-smollm2"


@pytest.fixture
def server():
    with loopback_server(latency=0.0, lifetime=120) as running:
        yield running


def sent_format(server) -> dict:
    return server.requests[-1]["response_format"]


def test_vllm_and_openai_compatible_servers_get_every_stages_bounded_schema_as_json_schema(server):
    program = HANRAG(retriever=StaticRetriever(PASSAGES), route="compound", k=2)
    for spec in ("hosted_vllm/qwen", "openai/qwen"):
        lm = make_lm(spec, api_base=server.api_base, cache=False)
        assert isinstance(default_adapter(lm), dspy.JSONAdapter)
        with dspy.context(lm=lm, adapter=default_adapter(lm)):
            program(question="Who directed Inception and where was Nolan born?")
    bodies = server.requests
    assert {body["model"] for body in bodies} == {"qwen"}
    assert len(bodies) >= 8  # decompose, relevance per passage, answers, aggregate — twice
    for body in bodies:
        form = body["response_format"]
        assert form["type"] == "json_schema" and form["json_schema"]["strict"] is True
        properties = form["json_schema"]["schema"]["properties"]
        strings = [p for p in properties.values() if p.get("type") == "string"]
        assert all("maxLength" in p for p in strings)  # bounded, so a reply ends within its budget
        assert not body.keys() & {"top_k", "min_p"}  # no option a plain OpenAI endpoint refuses


def test_multihop_serve_gets_llama_cpps_json_object_form_with_the_schema(server):
    engine = ServedEngine(server.api_base, "smollm2-llamacpp-x", timeout=5)
    lm = dspy.LM("local/smollm2-llamacpp-x-json6", engine=engine)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        assert NoRetrieval()(question="Capital of France?").answer
    form = sent_format(server)
    assert form["type"] == "json_object" and form["schema"]["properties"]["answer"]["maxLength"] > 0


def test_off_and_hosted_providers_decode_freely_and_the_decoding_keys_the_cache(server):
    models = {mode: make_lm("hosted_vllm/qwen", api_base=server.api_base, structured=mode).model
              for mode in ("auto", "json_schema", "json_object", "off")}
    assert models == {"auto": "hosted_vllm/qwen-json_schema7", "json_schema": "hosted_vllm/qwen-json_schema7",
                      "json_object": "hosted_vllm/qwen-json_object7", "off": "hosted_vllm/qwen"}
    assert not isinstance(make_lm("openai/gpt-4o-mini").engine, ServedEngine)  # a hosted provider: DSPy's own
    assert isinstance(make_lm("openai/gpt-4o-mini", structured="json_schema").engine, ServedEngine)
    assert not make_lm("local:smollm2", structured="off").engine.constrained
    with pytest.raises(ValueError, match="choose one of auto, json_schema, json_object, off"):
        make_lm("hosted_vllm/qwen", api_base=server.api_base, structured="grammar")


def test_a_server_that_refuses_the_schema_stops_the_run_in_one_line(server, tmp_path, capsys, questions):
    server.refuse_schemas = True
    lm = make_lm("openai/qwen", api_base=server.api_base, cache=False)
    with dspy.context(lm=lm, adapter=default_adapter(lm)), pytest.raises(StructuredOutputRefused):
        evaluate(NoRetrieval(), echo_examples(3), tmp_path / "run", progress=False)
    assert server.count <= 2  # the first refusal stops it, unretried (the next question may have started)
    assert not (tmp_path / "run" / "results.jsonl").read_text()
    code = run(app, ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "cli"),
                     "--lm", "openai/qwen", "--api-base", server.api_base])
    err = capsys.readouterr().err.strip()  # the progress bar, then one line
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[-1].startswith("error: ") and "run with --structured off" in err.splitlines()[-1]
    server.refuse_schemas = False
    assert run(app, ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "off"),
                     "--lm", "openai/qwen", "--api-base", server.api_base, "--api-key", "k", "--structured",
                     "off"]) == 0
    assert "response_format" not in server.requests[-1]


def test_replies_are_drawn_from_the_schema_and_seeded_by_the_prompt():
    schema = {"type": "object", "properties": {
        "route": {"enum": ["a", "b"]}, "n": {"type": "integer", "minimum": 2, "maximum": 2},
        "items": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 2}}}
    import random

    value = schema_value(schema, random.Random(0))
    assert value["route"] in ("a", "b") and value["n"] == 2 and 1 <= len(value["items"]) <= 2
    assert all(len(item) <= 3 for item in value["items"])
    body = {"messages": [{"role": "user", "content": "q"}], "response_format": {"type": "json_object",
                                                                                "schema": schema}}
    assert reply_text(body) == reply_text(dict(body))


def test_fifty_questions_in_flight_through_acall_keep_their_own_traces():
    with loopback_server(latency=0.2, lifetime=120) as server:
        lm = make_lm("openai/qwen", api_base=server.api_base, cache=False)
        program = SingleStepRAG(retriever=StaticRetriever(PASSAGES), k=2)
        questions = [f"Question number {i}?" for i in range(50)]

        async def ask_all():
            with dspy.context(lm=lm, adapter=default_adapter(lm)):
                return await asyncio.gather(*(program.acall(question=q) for q in questions))

        start = time.perf_counter()
        predictions = asyncio.run(ask_all())
        wall = time.perf_counter() - start
    assert wall < 50 * 0.2 / 4  # at least 4 questions at once (the ideal is 0.2 s for all of them)
    for question, prediction in zip(questions, predictions, strict=True):
        stages = [(record["stage"], record["kind"]) for record in prediction.stage_trace]
        assert stages == [("retriever", "retriever"), ("answer", "lm")]
        assert prediction.stage_trace[1]["inputs"]["question"] == question
        assert prediction.counts["llm_calls"] == 1 and prediction.counts["retrieval_calls"] == 1
        assert prediction.counts["prompt_tokens"] > 0


def test_a_served_student_runs_the_stages_its_folder_learnt_under_its_lora_name(server):
    options = LMOptions(lm="openai/base-model", api_base=server.api_base)
    assert served_student(SHIPPED_STUDENT) == (None, Path(SHIPPED_STUDENT))
    student, weights = options.student(f"openai/gold@{SHIPPED_STUDENT}")
    assert weights == "openai/gold" and student.engine.api_base == server.api_base
    program = SingleStepRAG(retriever=StaticRetriever(PASSAGES), k=2)
    assert use_student(program, student, served_student(f"openai/gold@{SHIPPED_STUDENT}")[1]) == ["answer"]
    with dspy.context(lm=options.make(), adapter=dspy.JSONAdapter()):
        program(question="Who directed Inception?")
    assert [body["model"] for body in server.requests] == ["gold"]
    with pytest.raises(ValueError, match="neither a `multihop distill` folder"):
        served_student("no-such-folder")
