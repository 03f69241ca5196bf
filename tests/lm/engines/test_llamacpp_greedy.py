import numpy as np
import pytest

from multihop.lm.engines.llamacpp_greedy import CheckedGreedy, checked_greedy_applies


def greedy_over(allowed: set[int], top: int = 4) -> CheckedGreedy:
    """A CheckedGreedy whose grammar allows the token ids in ``allowed`` (no model, no llama.cpp grammar)."""
    sampler = object.__new__(CheckedGreedy)
    sampler.top, sampler._grammar = top, None
    sampler._allowed = lambda ids, logits: np.where(np.isin(ids, list(allowed)), logits[ids], -np.inf)
    return sampler


def test_the_top_tokens_settle_the_step_when_one_is_allowed_and_only_then():
    logits = np.array([0.0, 5.0, 1.0, 4.0, 3.0, 2.0, 0.5])  # likeliest first: 1 3 4 5 | 2 6 0
    assert greedy_over({1, 3})._from_top(logits) == 1
    assert greedy_over({0, 4, 2})._from_top(logits) == 4  # the third likeliest, the first allowed
    assert greedy_over({2, 6})._from_top(logits) is None  # none of the four likeliest: the whole vocabulary decides


def test_a_tie_goes_to_the_lower_id_and_a_tie_with_a_token_outside_the_top_falls_back():
    assert greedy_over({1, 3})._from_top(np.array([0.0, 5.0, 1.0, 5.0, 3.0, 2.0])) == 1
    # the allowed token's logit equals the fourth likeliest's: a token left out (id 0, also 2.0) might tie lower
    assert greedy_over({5}, top=4)._from_top(np.array([2.0, 5.0, 1.0, 4.0, 3.0, 2.0])) is None
    # ... unless it is the likeliest of all, which no token left out can beat or tie at a lower id
    assert greedy_over({0}, top=2)._from_top(np.array([5.0, 5.0, 1.0])) == 0


def test_only_plain_greedy_decoding_under_a_grammar_takes_the_checked_path():
    greedy = {"temp": 0.0, "grammar": object(), "repeat_penalty": 1.0, "frequency_penalty": 0.0,
              "presence_penalty": 0.0, "logits_processor": None}
    assert checked_greedy_applies(greedy)
    for change in ({"temp": 0.7}, {"grammar": None}, {"repeat_penalty": 1.1}, {"presence_penalty": 0.5},
                   {"logits_processor": [lambda ids, logits: logits]}):
        assert not checked_greedy_applies(greedy | change)


@pytest.mark.slow
def test_smollm2_writes_under_a_schema_what_llama_cpps_sampler_chain_writes():
    from dspy.lm15 import Config

    from multihop.lm.backends import llamacpp_weights
    from multihop.lm.engines.llamacpp import completion_options, plain_weight_buffers
    from multihop.lm.engines.llamacpp_greedy import checked_llama_class

    schema = {"type": "object", "required": ["reasoning", "answer", "hops"], "additionalProperties": False,
              "properties": {"reasoning": {"type": "string", "maxLength": 120}, "answer": {"type": "string",
                                                                                      "maxLength": 40},
                             "hops": {"type": "integer"}}}
    messages = [{"role": "user", "content": "Who wrote the novel on which the film Blade Runner is based, and where "
                                            "was that author born? Reply in JSON."}]
    with plain_weight_buffers():
        model = checked_llama_class()(model_path=str(llamacpp_weights("smollm2")[0]), n_ctx=512, n_threads=2,
                                      verbose=False)
    samplers = []
    init = model._init_sampler
    model._init_sampler = lambda **options: samplers.append(init(**options)) or samplers[-1]
    options = completion_options(Config(), 96, schema)
    checked = model.create_chat_completion(messages=messages, **options)
    model.reset()  # the same prompt evaluated again whole: the same logits for both
    chain = model.create_chat_completion(messages=messages, logits_processor=[lambda ids, logits: logits], **options)
    assert isinstance(samplers[0], CheckedGreedy) and not isinstance(samplers[1], CheckedGreedy)
    assert checked["choices"][0]["message"]["content"] == chain["choices"][0]["message"]["content"]
    assert checked["usage"] == chain["usage"]
    assert 0 < samplers[0].fallbacks < samplers[0].steps  # both paths taken: the top tokens and the whole vocabulary
