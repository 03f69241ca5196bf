"""The llama.cpp engine's sampling under a schema with llguidance: on a tiny byte vocabulary (fast) and on SmolLM2."""

import json
import logging
from contextlib import ExitStack
from types import SimpleNamespace

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not built in this virtualenv")

from llguidance import LLTokenizer  # noqa: E402
from llguidance._tokenizer import TokenizerWrapper  # noqa: E402

from multihop.lm.engines.grammar import SPACED, SchemaGrammars, TokenMask  # noqa: E402
from multihop.lm.engines.llamacpp_sampler import (  # noqa: E402
    GuidedSampler,
    SchemaGrammar,
    guided_llama_class,
    plain_greedy,
)

WORDS = [b'{"', b'":', b' "', b'",', b'"}', b"yes", b"no", b"answer", b"maybe"]
SCHEMA = {"type": "object", "required": ["answer"], "additionalProperties": False,
          "properties": {"answer": {"type": "string", "enum": ["yes", "no", "maybe"]}}}


class ByteTokens:
    """A vocabulary of an end token (0), the 256 bytes and :data:`WORDS`, tokenized longest match first."""

    eos_token_id, bos_token_id, special_token_ids = 0, None, [0]
    tokens = [b"<eos>", *(bytes([i]) for i in range(256)), *WORDS]

    def __call__(self, text: bytes) -> list[int]:
        ids, rest = [], bytes(text)
        while rest:
            word = max((w for w in WORDS if rest.startswith(w)), key=len, default=rest[:1])
            ids.append(self.tokens.index(word))
            rest = rest[len(word):]
        return ids


@pytest.fixture(scope="module")
def grammars() -> SchemaGrammars:
    return SchemaGrammars(LLTokenizer(TokenizerWrapper(ByteTokens())), SPACED)


def sampler(grammars, chain=None) -> GuidedSampler:
    model = SimpleNamespace(n_vocab=lambda: len(ByteTokens.tokens), _input_ids=np.zeros(0, dtype=np.intc))
    return GuidedSampler(model, grammars.matcher(SCHEMA), chain)


def test_greedy_takes_the_likeliest_token_the_grammar_allows_until_only_the_end_remains(grammars):
    guided, rng = sampler(grammars), np.random.default_rng(0)
    reference, chosen = TokenMask(guided.n_vocab), []
    while not chosen or chosen[-1] != 0:
        logits = rng.normal(size=guided.n_vocab).astype(np.float32)
        allowed = reference.fill(guided.matcher).allowed()
        logits[np.flatnonzero(allowed)[-1]] = logits[np.flatnonzero(allowed)[0]] = logits.max() + 1  # a tie
        chosen.append(guided.choose(logits))
        assert chosen[-1] == np.argmax(np.where(allowed, logits, -np.inf)) == np.flatnonzero(allowed)[0]
        assert len(chosen) < 20
    text = b"".join(ByteTokens.tokens[t] for t in chosen[:-1])
    assert json.loads(text)["answer"] in ("yes", "no", "maybe") and guided.steps == len(chosen)


def test_sampling_at_a_temperature_draws_from_the_masked_distribution(grammars):
    host = SimpleNamespace(_n_vocab=len(ByteTokens.tokens), last_n_tokens_size=64, _seed=7, _model=None)
    chain = llama_cpp.Llama._init_sampler(host, temp=1.0, top_k=0, top_p=1.0, min_p=0.0)  # llama-cpp-python's own
    guided = sampler(grammars, chain)
    for token in ByteTokens()(b'{"answer": "'):
        guided.matcher.consume_token(token)
    logits = np.random.default_rng(1).normal(size=guided.n_vocab).astype(np.float32)
    allowed = guided.mask.fill(guided.matcher).allowed()
    draws = np.bincount([guided.pick(logits) for _ in range(3000)], minlength=guided.n_vocab) / 3000
    masked = np.where(allowed, np.exp(logits - logits.max()), 0.0)
    assert 2 <= allowed.sum() < 10 and not draws[~allowed].any()  # y, n, m and the words starting with them
    assert np.abs(draws - masked / masked.sum()).max() < 0.04


def test_only_temperature_zero_without_penalties_skips_llama_cpps_chain():
    greedy = {"temp": 0.0, "repeat_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
    assert plain_greedy(greedy)
    for change in ({"temp": 0.7}, {"temp": -1.0}, {"repeat_penalty": 1.1}, {"frequency_penalty": 0.2},
                   {"presence_penalty": 0.2}):
        assert not plain_greedy(greedy | change)


def test_a_mask_past_the_vocabulary_allows_nothing_there_and_an_empty_one_is_an_error(grammars):
    guided = sampler(grammars)
    allowed = guided.mask.fill(guided.matcher).allowed(guided.n_vocab + 7)
    assert allowed.any() and not allowed[guided.n_vocab:].any()
    guided.mask.bits[:] = 0
    with pytest.raises(RuntimeError, match="the grammar allows no token"):
        guided.mask.likeliest(np.zeros(guided.n_vocab, dtype=np.float32))


def guided_model(grammars, monkeypatch) -> tuple[object, list[dict]]:
    """A :func:`guided_llama_class` model without weights (its grammars over the tiny vocabulary) whose
    llama-cpp-python ``create_chat_completion`` records the arguments it is given."""
    model, calls = object.__new__(guided_llama_class()), []
    model._grammars, model._refused, model._stack = grammars, set(), ExitStack()  # closes as a model
    monkeypatch.setattr(llama_cpp.Llama, "create_chat_completion", lambda self, *args, **kwargs: calls.append(kwargs))
    return model, calls


def test_a_schema_goes_to_llguidance_and_one_it_cannot_compile_to_llama_cpps_grammar(grammars, monkeypatch, caplog):
    model, calls = guided_model(grammars, monkeypatch)
    model.create_chat_completion(messages=[], response_format={"type": "json_object", "schema": SCHEMA})
    assert isinstance(calls[0]["grammar"], SchemaGrammar) and "response_format" not in calls[0]
    lookahead = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?!x)[a-z]+$"}}}
    refused = {"type": "json_object", "schema": lookahead}
    with caplog.at_level(logging.WARNING):
        model.create_chat_completion(messages=[], response_format=refused)
        model.create_chat_completion(messages=[], response_format=refused)
    assert [call["response_format"] for call in calls[1:]] == [refused, refused]  # llama-cpp-python derives its own
    assert all(call["grammar"] is None for call in calls[1:])
    assert len([r for r in caplog.records if "decoding under llama.cpp's grammar" in r.message]) == 1  # once a schema
    model.create_chat_completion(messages=[], response_format={"type": "json_object"})  # JSON of any shape
    assert calls[-1]["response_format"] == {"type": "json_object"}


@pytest.fixture(scope="module")
def smollm2():
    from multihop.lm.backends import llamacpp_weights
    from multihop.lm.engines.llamacpp import plain_weight_buffers

    with plain_weight_buffers():
        model = guided_llama_class()(model_path=str(llamacpp_weights("smollm2")[0]), n_ctx=1024, n_threads=2,
                                     verbose=False)
    yield model
    model.close()


STAGE_SCHEMA = {"type": "object", "required": ["reasoning", "answer", "hops"], "additionalProperties": False,
                "properties": {"reasoning": {"type": "string", "maxLength": 80},
                               "answer": {"type": "string", "maxLength": 30}, "hops": {"type": "integer"}}}
QUESTION = [{"role": "user", "content": "Who wrote the novel on which the film Blade Runner is based, and where was "
                                        "that author born? Reply in JSON."}]


@pytest.mark.slow
def test_smollm2_decodes_greedily_the_likeliest_allowed_token_at_each_step(smollm2, monkeypatch):
    from dspy.lm15 import Config

    from multihop.lm.engines.llamacpp import completion_options

    steps, choose = [], GuidedSampler.choose  # each step's logits (the model's) and the token chosen from them
    monkeypatch.setattr(GuidedSampler, "choose", lambda self, logits: steps.append((np.array(logits), choose(
        self, logits))) or steps[-1][1])
    reply = smollm2.create_chat_completion(messages=QUESTION, **completion_options(Config(), 96, STAGE_SCHEMA))
    assert isinstance(smollm2._sampler, GuidedSampler) and smollm2._sampler.chain is None
    json.loads(reply["choices"][0]["message"]["content"])
    matcher, mask = smollm2.schema_grammar(STAGE_SCHEMA).matcher(), TokenMask(smollm2.n_vocab())
    overruled = 0
    for logits, token in steps:  # replayed on a matcher of its own
        allowed = mask.fill(matcher).allowed()
        assert token == np.argmax(np.where(allowed, logits, -np.inf))
        overruled += token != np.argmax(logits)
        assert matcher.consume_token(token)
    assert overruled and steps[-1][1] == smollm2.token_eos()  # the grammar decided some steps; the end ended it
    assert len(steps) == reply["usage"]["completion_tokens"] + 1


@pytest.mark.slow
def test_the_engine_replies_under_the_schema_greedily_and_sampled_and_reuses_the_prefix():
    import jsonschema
    from dspy.lm15 import Config

    from multihop.lm.backends import llamacpp_weights
    from multihop.lm.engines import LlamaCppEngine

    weights = llamacpp_weights("smollm2", split_prompts=True)
    engine = LlamaCppEngine(weights.gguf, prompt_gguf=weights.prompt_gguf)
    system = [{"role": "system", "content": "Answer in JSON. " + "Read the question, then reason briefly. " * 40}]
    budget = 192  # the schema's longest reply, a token a character
    greedy = engine.generate(system + QUESTION, Config(), budget, STAGE_SCHEMA)
    sampled = engine.generate(system + QUESTION, Config(temperature=0.9, seed=3, logprobs=0), budget, STAGE_SCHEMA)
    other = engine.generate(system + [{"role": "user", "content": "Who directed Alien? Reply in JSON."}], Config(),
                            budget, STAGE_SCHEMA)
    for generation in (greedy, sampled, other):
        assert generation.finish == "stop"
        jsonschema.validate(json.loads(generation.text), STAGE_SCHEMA)
    assert len(sampled.logprobs) == sampled.completion_tokens and all(t.logprob <= 0 for t in sampled.logprobs)
    assert other.cached_tokens > 200  # the system prompt's state, from the prefix cache
    fresh = LlamaCppEngine(weights.gguf, prompt_gguf=weights.prompt_gguf)
    assert fresh.generate(system + QUESTION, Config(), budget, STAGE_SCHEMA).text == greedy.text
    engine.close()
    fresh.close()
