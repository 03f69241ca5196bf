import dspy
import pytest

from multihop.lms import TransformersEngine, make_lm


def test_unknown_local_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a known model"):
        make_lm(f"local:{tmp_path}")
    with pytest.raises(FileNotFoundError, match="not a LoRA adapter"):
        make_lm("local:smollm2", adapter=tmp_path)


def test_remote_spec_builds_a_plain_dspy_lm():
    lm = make_lm("openai/some-model", api_base="http://127.0.0.1:9/v1", api_key="x")
    assert isinstance(lm, dspy.LM) and lm.model == "openai/some-model"
    assert lm.kwargs["temperature"] == 0.0


@pytest.mark.slow
def test_smollm2_answers_counts_tokens_and_caches(monkeypatch):
    lm = make_lm("local:smollm2", max_tokens=64)
    engine = lm._engine_spec
    assert isinstance(engine, TransformersEngine)
    generated = []
    real = engine.complete
    monkeypatch.setattr(engine, "complete", lambda request: generated.append(1) or real(request))
    dspy.configure(lm=lm)
    predict = dspy.Predict("passages: list[str], question -> answer")
    passages = ["Paris is the capital and largest city of France.", "Berlin is the capital of Germany."]
    with dspy.track_usage() as usage:
        first = predict(passages=passages, question="What is the capital of France?")
        second = predict(passages=passages, question="What is the capital of France?")
    assert "paris" in first.answer.lower()
    assert second.answer == first.answer
    assert len(generated) == 1  # the identical request was served from DSPy's cache
    tokens = usage.get_total_tokens()[lm.model]
    assert tokens["prompt_tokens"] > 50 and 0 < tokens["completion_tokens"] <= 64
