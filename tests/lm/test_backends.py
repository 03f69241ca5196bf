import dspy
import pytest

from multihop.lm.adapter import default_adapter
from multihop.lm.backends import make_lm, spec_adapter
from multihop.lm.engines import LlamaCppEngine, TransformersEngine
from multihop.signatures import AnswerFromPassages


def test_unknown_local_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a known model"):
        make_lm(f"local:{tmp_path}")
    with pytest.raises(FileNotFoundError, match="not a LoRA adapter"):
        make_lm("local:smollm2", adapter=tmp_path)


def test_remote_spec_builds_a_plain_dspy_lm_when_it_decodes_freely():
    lm = make_lm("openai/some-model", api_base="http://127.0.0.1:9/v1", api_key="x", structured="off")
    assert isinstance(lm, dspy.LM) and lm.model == "openai/some-model" and lm.engine == "auto"
    assert lm.kwargs["temperature"] == 0.0
    assert isinstance(spec_adapter("local:smollm2"), dspy.JSONAdapter)
    assert type(spec_adapter("openai/x")) is dspy.ChatAdapter


@pytest.mark.parametrize(("spec", "structured"), [("openai/x", "auto"), ("openai/x", "json_object"),
                                                  ("hosted_vllm/m", "auto"), ("hosted_vllm/m", "off")])
def test_a_spec_tells_the_adapter_its_built_lm_gets(spec, structured):
    api_base = "http://127.0.0.1:9/v1"  # nothing listens: no served LM is asked anything when it is built
    lm = make_lm(spec, api_base=api_base, api_key="x", structured=structured)
    told, built = spec_adapter(spec, api_base, structured), default_adapter(lm)
    assert type(told) is type(built)
    assert isinstance(built, dspy.JSONAdapter) == (structured != "off")
    hosted = make_lm("openai/x", api_key="x", structured=structured)  # OpenAI's own API
    assert type(spec_adapter("openai/x", None, structured)) is type(default_adapter(hosted))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["transformers", "llamacpp"])
def test_smollm2_answers_counts_tokens_and_caches(monkeypatch, name):
    if name == "llamacpp":
        pytest.importorskip("llama_cpp", reason="llama-cpp-python is not built in this virtualenv")
    lm = make_lm("local:smollm2", max_tokens=64, engine=name)
    engine = lm._engine_spec
    assert isinstance(engine, TransformersEngine if name == "transformers" else LlamaCppEngine)
    generated = []
    real = engine.complete
    monkeypatch.setattr(engine, "complete", lambda request: generated.append(1) or real(request))
    dspy.configure(lm=lm, adapter=spec_adapter("local:smollm2"))
    predict = dspy.Predict(AnswerFromPassages)
    passages = [
        "My Fair Lady: The film stars Audrey Hepburn as Eliza Doolittle and Rex Harrison as Henry Higgins.",
        "Audrey Hepburn: She won a Tony Award for Best Performance by a Leading Actress in a Play for Ondine.",
    ]
    question = "Who plays Eliza Doolittle in My Fair Lady?"
    with dspy.track_usage() as usage:
        first = predict(passages=passages, question=question)
        second = predict(passages=passages, question=question)
    assert isinstance(first.answer, str) and first.answer.strip()  # an answer, not necessarily a right one
    assert second.answer == first.answer
    assert len(generated) == 1  # the identical request was served from DSPy's cache
    tokens = usage.get_total_tokens()[lm.model]
    assert tokens["prompt_tokens"] > 50 and 0 < tokens["completion_tokens"] <= 64
