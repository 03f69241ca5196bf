"""The transformers engine's grammar: which tokens it allows, on SmolLM2's real tokenizer."""

import json

import pytest
import torch
from transformers import AutoTokenizer

from multihop.lm.backends import resolve_local
from multihop.lm.engines.grammar import SchemaGrammars

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 8},
                                           "valid": {"type": "boolean"}},
          "required": ["answer", "valid"], "additionalProperties": False}


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_local("smollm2"))


def allowed(processor, ids: list[int], vocab: int) -> set[int]:
    scores = processor(torch.tensor([ids]), torch.zeros(1, vocab))
    return set(torch.nonzero(scores[0] > float("-inf")).flatten().tolist())


def test_only_tokens_the_schema_allows_survive_until_only_the_end_remains(tokenizer):
    grammars = SchemaGrammars.for_hf(tokenizer)
    processor = grammars.processor(SCHEMA)
    vocab = len(tokenizer) + 64  # a model's vocabulary may be padded past the tokenizer's
    prompt = tokenizer.encode("Reply in JSON.")
    reply = tokenizer.encode('{"answer":"Paris","valid":true}')
    masks = steps(processor, prompt, reply, vocab)
    assert len(masks) == len(reply) + 1  # every token of a valid reply was allowed
    assert all(tokenizer.decode([t]).startswith("{") for t in masks[0])
    assert not set().union(*masks) & set(range(len(tokenizer), vocab))  # padding tokens are never allowed
    assert masks[-1] == {tokenizer.eos_token_id}  # the reply is complete: only the end remains
    too_long = tokenizer.encode('{"answer":"Paris is big"')  # past the 8-character cap
    assert len(steps(grammars.processor(SCHEMA), prompt, too_long, vocab)) < len(too_long) + 1  # a token refused
    assert list(grammars._grammars) == [json.dumps(SCHEMA, sort_keys=True)]  # compiled once


def steps(processor, prompt: list[int], reply: list[int], vocab: int) -> list[set[int]]:
    """Feeds ``reply`` a token at a time while the grammar allows it: the allowed tokens at each step reached."""
    ids = list(prompt)
    masks = [allowed(processor, ids, vocab)]
    for token in reply:
        if token not in masks[-1]:
            break
        ids.append(token)
        masks.append(allowed(processor, ids, vocab))
    return masks


def test_a_schema_without_a_grammar_is_a_clear_error(tokenizer):
    with pytest.raises(ValueError, match="the response schema has no decoding grammar"):
        SchemaGrammars.for_hf(tokenizer).grammar({"type": "object", "properties": {"n": {"type": "strin"}}})


def test_an_integer_without_bounds_takes_at_most_sixteen_digits_as_in_llama_cpps_grammar(tokenizer):
    grammars = SchemaGrammars.for_hf(tokenizer)
    schema = {"type": "object", "required": ["hops", "year"], "additionalProperties": False,
              "properties": {"hops": {"type": "integer"}, "year": {"type": "integer", "minimum": 1000}}}

    def accepted(text: str) -> bool:
        matcher = grammars.matcher(schema)
        return matcher.consume_tokens(tokenizer.encode(text)) and matcher.is_accepting()

    assert accepted('{"hops":-9007199254740991,"year":' + "9" * 30 + "}")  # a bound of its own is kept
    assert not accepted('{"hops":1' + "0" * 16 + ',"year":1999}')
    assert schema["properties"]["hops"] == {"type": "integer"}  # the schema given is not changed
