import logging
from typing import Literal

import dspy
import pytest

from multihop import lms
from multihop.engines import LlamaCppEngine, TransformersEngine
from multihop.engines.llamacpp import response_schema
from multihop.engines.schema import (
    CHARS_PER_TOKEN,
    LIST_CAP,
    MIN_LIST,
    MIN_STRING,
    POLICY,
    STRING_CAP,
    bounded,
    worst_case_chars,
)
from multihop.lms import make_lm


def test_every_string_and_list_gets_a_cap_and_declared_caps_are_kept():
    schema = {"type": "object", "properties": {
        "answer": {"type": "string"},
        "short": {"type": "string", "maxLength": 20},
        "choice": {"type": "string", "enum": ["a", "b"]},
        "sub_questions": {"type": "array", "items": {"type": "string"}},
        "chain": {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
        "many": {"type": "array", "minItems": 12, "items": {"type": "integer"}},
        "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "count": {"type": "integer"},
    }}
    props = bounded(schema)["properties"]
    assert props["answer"]["maxLength"] == STRING_CAP and props["short"]["maxLength"] == 20
    assert "maxLength" not in props["choice"] and "maxLength" not in props["count"]
    assert props["sub_questions"]["maxItems"] == LIST_CAP and props["sub_questions"]["items"]["maxLength"] == STRING_CAP
    assert props["chain"]["maxItems"] == LIST_CAP and props["chain"]["items"]["maxItems"] == 3
    assert props["many"]["maxItems"] == 12  # never below the schema's own minimum
    assert props["maybe"]["anyOf"][0]["maxLength"] == STRING_CAP
    assert "maxLength" not in schema["properties"]["answer"]  # the input is not changed


def test_worst_case_size_is_the_longest_json_the_schema_allows():
    triple = {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3}
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "kind": {"enum": ["bridge", "x"]},
                                               "chain": {"type": "array", "items": triple, "maxItems": 2}}}
    # {"ok": false, "kind": "bridge", "chain": [["aaaaa", "aaaaa", "aaaaa"], ["aaaaa", "aaaaa", "aaaaa"]]}
    triple_chars = 2 + 3 * (7 + 2)  # [ ] and three quoted strings, each with a comma and a space (one spare)
    assert worst_case_chars(triple) == triple_chars
    # each property: its quoted name, a colon, a space, a comma, a space (6) and its value
    expected = 2 + (2 + 6 + 5) + (4 + 6 + 8) + (5 + 6 + 2 + 2 * (triple_chars + 2))
    assert worst_case_chars(schema) == expected
    assert worst_case_chars({"type": "string"}) == 10_002  # unbounded: counted as too long for any budget
    assert worst_case_chars({}) == 10_000 and worst_case_chars({"type": "integer"}) == 20


def test_a_property_named_like_a_keyword_is_a_property():
    schema = {"type": "object", "properties": {"type": {"type": "string"}, "items": {"type": "array"}}}
    props = bounded(schema)["properties"]
    assert props["type"] == {"type": "string", "maxLength": STRING_CAP}
    assert props["items"]["maxItems"] == LIST_CAP


def test_caps_shrink_until_the_longest_reply_fits_the_token_budget():
    schema = {"type": "object", "properties": {
        "sub_questions": {"type": "array", "items": {"type": "string"}},
        "chain": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}}}
    assert worst_case_chars(bounded(schema)) > 512 * CHARS_PER_TOKEN
    for budget in (128, 256, 512):
        assert worst_case_chars(bounded(schema, max_tokens=budget)) <= budget * CHARS_PER_TOKEN
    tight = bounded(schema, max_tokens=1)["properties"]["sub_questions"]  # never below the minimum caps
    assert (tight["maxItems"], tight["items"]["maxLength"]) == (MIN_LIST, MIN_STRING)


def test_only_a_json_schema_response_format_constrains_decoding():
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    assert response_schema({"type": "json_schema", "schema": schema, "name": "X", "strict": True}) == schema
    assert response_schema({"type": "json_object"}) is None and response_schema(None) is None


def test_the_llama_cpp_engine_declares_structured_outputs_only_when_constrained(tmp_path):
    constrained, free = LlamaCppEngine(tmp_path / "m.gguf"), LlamaCppEngine(tmp_path / "m.gguf", constrained=False)
    assert constrained.supports_response_schema and "response_format" in constrained.supported_params
    assert not free.supports_response_schema and "response_format" not in free.supported_params
    lm = dspy.LM("local/x", engine=constrained)
    assert lm.supports_response_schema and "response_format" in lm.supported_params  # what the JSONAdapter reads


def test_auto_engine_runs_a_gguf_model_on_llama_cpp_and_falls_back_without_it(monkeypatch, caplog):
    monkeypatch.setattr(lms, "llama_cpp_available", lambda: True)
    lm = make_lm("local:smollm2")
    assert isinstance(lm._engine_spec, LlamaCppEngine) and lm._engine_spec.constrained
    assert lm.model.startswith(f"local/smollm2-llamacpp-json{POLICY}-")
    assert make_lm("local:smollm2", max_tokens=7)._engine_spec is lm._engine_spec  # one engine per model
    assert make_lm("local:smollm2", constrained=False).model.startswith("local/smollm2-llamacpp-")
    monkeypatch.setattr(lms, "llama_cpp_available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="multihop.lms"):
        fallback = make_lm("local:smollm2")
    assert isinstance(fallback._engine_spec, TransformersEngine) and "llama-cpp-python is not installed" in caplog.text
    with pytest.raises(ValueError, match="needs llama-cpp-python"):
        make_lm("local:smollm2", engine="llamacpp")


def test_engine_choices_that_cannot_work_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(lms, "llama_cpp_available", lambda: True)
    adapter = tmp_path / "lora"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.safetensors").write_bytes(b"student weights")
    student = make_lm("local:smollm2", adapter=adapter)  # auto: a LoRA adapter runs on transformers, which loads it
    assert student._engine_spec.adapter == adapter and student._engine_spec.path == lms.resolve_local("smollm2")
    plain = make_lm("local:smollm2", engine="transformers")
    assert plain._engine_spec.adapter is None and student.model != plain.model  # the adapter keys DSPy's cache
    with pytest.raises(ValueError, match="the llama.cpp engine runs GGUF files"):
        make_lm(f"local:{lms.resolve_local('smollm2')}", engine="llamacpp")
    with pytest.raises(ValueError, match="runs on the transformers engine"):
        make_lm("local:smollm2", adapter=adapter, engine="llamacpp")
    with pytest.raises(ValueError, match="unknown engine"):
        make_lm("local:smollm2", engine="vllm")
    with pytest.raises(ValueError, match="local models only"):
        make_lm("openai/x", engine="llamacpp")


def llama_lm(**settings) -> dspy.LM:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not built in this virtualenv")
    return make_lm("local:smollm2", engine="llamacpp", cache=False, **settings)


class EveryFieldType(dspy.Signature):
    """Read the passage and describe the question it answers."""

    passage: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short answer")
    sub_questions: list[str] = dspy.OutputField()
    chain: list[list[str]] = dspy.OutputField(desc="[head, relation, tail] triples")
    supported: bool = dspy.OutputField()
    hops: int = dspy.OutputField()
    kind: Literal["bridge", "comparison"] = dspy.OutputField()


PASSAGE = "Audrey Hepburn starred as Eliza Doolittle in My Fair Lady (1964), directed by George Cukor."


@pytest.mark.slow
def test_a_constrained_reply_parses_for_every_field_type_and_ends_before_the_cap():
    lm = llama_lm(max_tokens=512)
    dspy.configure(lm=lm, adapter=dspy.JSONAdapter())
    result = dspy.Predict(EveryFieldType)(passage=PASSAGE)  # an AdapterParseError would fail the test
    assert isinstance(result.answer, str) and len(result.answer) <= 200
    assert isinstance(result.sub_questions, list) and all(isinstance(s, str) for s in result.sub_questions)
    assert all(isinstance(row, list) and all(isinstance(x, str) for x in row) for row in result.chain)
    assert isinstance(result.supported, bool) and isinstance(result.hops, int)
    assert result.kind in ("bridge", "comparison")
    assert len(result.sub_questions) <= 6 and len(result.chain) <= 6  # the bounded schema's caps
    assert 0 < lm.history[-1]["usage"]["completion_tokens"] < 512  # it ended when the fields were written


@pytest.mark.slow
def test_real_stage_signatures_parse_under_constraints(musique_dev):
    from multihop.signatures.composerag import AnswerVerification
    from multihop.signatures.cooprag import QuestionUnrolling

    dspy.configure(lm=llama_lm(max_tokens=384), adapter=dspy.JSONAdapter())
    unrolled = dspy.Predict(QuestionUnrolling)(question=musique_dev[0].question)
    assert isinstance(unrolled.hop_count, int) and isinstance(unrolled.sub_questions, list)
    assert all(isinstance(row, list) for row in unrolled.reasoning_chain)
    verdict = dspy.Predict(AnswerVerification)(question="Who played Eliza?", answer="Audrey Hepburn",
                                               source=[PASSAGE])
    assert isinstance(verdict.valid, bool)


@pytest.mark.slow
def test_prefix_reuse_stop_strings_usage_and_parity_with_transformers():
    from dspy.lm15 import Config, Message, Request

    engine = llama_lm()._engine_spec
    system = "You answer in one short phrase. " + PASSAGE
    first = Request(model="m", system=system, messages=(Message.user("Who played Eliza Doolittle?"),),
                    config=Config(max_tokens=24, temperature=0.0))
    second = Request(model="m", system=system, messages=(Message.user("Who directed the film?"),),
                     config=Config(max_tokens=24, temperature=0.0))
    engine.complete(first)
    evaluated, real_eval = [], engine._model.eval
    engine._model.eval = lambda tokens: evaluated.append(len(tokens)) or real_eval(tokens)
    try:
        reused = engine.complete(second)  # only the tokens after the prefix it shares with the first are evaluated
    finally:
        engine._model.eval = real_eval
    assert 0 < evaluated[0] < reused.usage.input_tokens
    fresh = LlamaCppEngine(engine.gguf).complete(second)  # nothing to reuse
    assert reused.text == fresh.text
    usage = fresh.usage
    assert usage.input_tokens > 20 and 0 < usage.output_tokens <= 24
    stopped = engine.complete(Request(model="m", system=system, messages=(Message.user("List two facts."),),
                                      config=Config(max_tokens=48, temperature=0.0, stop=("\n", "."))))
    assert "\n" not in stopped.text and "." not in stopped.text
    capital = Request(model="m", messages=(Message.user("What is the capital of France? One word."),),
                      config=Config(max_tokens=8, temperature=0.0))
    # the GGUF is Q4_1 and the transformers model its de-quantised copy: greedy texts may differ, the fact may not
    assert "Paris" in engine.complete(capital).text
    assert "Paris" in TransformersEngine(lms.resolve_local("smollm2")).complete(capital).text


def test_a_constrained_reply_cut_at_the_cap_is_decoded_again_under_tighter_caps(tmp_path):
    from dspy.lm15 import Config, Message, Request

    schema = {"type": "object", "properties": {"sub_questions": {"type": "array", "items": {"type": "string"}}}}
    calls = []

    class Model:  # stands in for llama_cpp.Llama
        def create_chat_completion(self, messages, **options):
            calls.append(options["response_format"]["schema"])
            finish = "length" if len(calls) == 1 else "stop"
            return {"choices": [{"message": {"content": '{"sub_questions": []}'}, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 64 if finish == "length" else 5}}

    engine = LlamaCppEngine(tmp_path / "m.gguf")
    engine._model = Model()
    request = Request(model="m", messages=(Message.user("q"),), config=Config(
        max_tokens=64, response_format={"type": "json_schema", "schema": schema, "name": "Out", "strict": True}))
    reply = engine.complete(request)
    assert [c["properties"]["sub_questions"]["items"]["maxLength"] for c in calls] == [
        bounded(schema, 64)["properties"]["sub_questions"]["items"]["maxLength"],
        bounded(schema, 64 // CHARS_PER_TOKEN)["properties"]["sub_questions"]["items"]["maxLength"]]
    assert calls[1] != calls[0] and reply.finish_reason == "stop"
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (10, 69)  # the prompt once, both replies


def test_no_second_decode_when_the_caps_cannot_shrink(tmp_path):
    from dspy.lm15 import Config, Message, Request

    calls = []

    class Model:
        def create_chat_completion(self, messages, **options):
            calls.append(options)
            return {"choices": [{"message": {"content": "{}"}, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 8}}

    engine = LlamaCppEngine(tmp_path / "m.gguf")
    engine._model = Model()
    schema = {"type": "object", "properties": {"chain": {"type": "array", "items": {"type": "string"}}}}
    reply = engine.complete(Request(model="m", messages=(Message.user("q"),), config=Config(
        max_tokens=8, response_format={"type": "json_schema", "schema": schema, "name": "Out", "strict": True})))
    assert len(calls) == 1 and reply.finish_reason == "length"  # the smallest caps already: one decode
    assert calls[0]["seed"] == 0 and calls[0]["top_k"] == 0  # greedy: the engine's seed, no top-k cut
