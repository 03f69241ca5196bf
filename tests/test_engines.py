import logging

import dspy
import pytest

from multihop import lms
from multihop.engines import LlamaCppEngine, TransformersEngine
from multihop.engines.llamacpp import response_schema
from multihop.engines.schema import LIST_CAP, STRING_CAP, bounded
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
    capped = bounded(schema, string_cap=50, list_cap=4)
    props = capped["properties"]
    assert props["answer"]["maxLength"] == 50 and props["short"]["maxLength"] == 20
    assert "maxLength" not in props["choice"] and "maxLength" not in props["count"]
    assert props["sub_questions"]["maxItems"] == 4 and props["sub_questions"]["items"]["maxLength"] == 50
    assert props["chain"]["maxItems"] == 4 and props["chain"]["items"]["maxItems"] == 3
    assert props["chain"]["items"]["items"]["maxLength"] == 50
    assert props["many"]["maxItems"] == 12  # never below the schema's own minimum
    assert props["maybe"]["anyOf"][0]["maxLength"] == 50
    assert "maxLength" not in schema["properties"]["answer"]  # the input is not changed
    assert bounded({"type": "string"}) == {"type": "string", "maxLength": STRING_CAP}
    assert bounded({"type": "array"})["maxItems"] == LIST_CAP


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
    assert lm.model.startswith("local/smollm2-llamacpp-json-")
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
    assert isinstance(make_lm("local:smollm2", adapter=adapter)._engine_spec, TransformersEngine)  # auto: LoRA
    with pytest.raises(ValueError, match="runs on the transformers engine"):
        make_lm("local:smollm2", adapter=adapter, engine="llamacpp")
    with pytest.raises(ValueError, match="unknown engine"):
        make_lm("local:smollm2", engine="vllm")
    with pytest.raises(ValueError, match="local models only"):
        make_lm("openai/x", engine="llamacpp")
