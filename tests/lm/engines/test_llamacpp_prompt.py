import struct

import numpy as np
import pytest

from multihop.lm.engines.llamacpp_prompt import FLASH_TILE, SEQUENCE_STATE_MAGIC, batch_sizes, values_transposed

F16 = 1


def sequence_state(layers: list[list[list[int]]], value_type: int = F16, v_trans: int = 0, seqs_per_cell: int = 1,
                   magic: int = SEQUENCE_STATE_MAGIC) -> bytes:
    """A llama.cpp sequence state: keys 2 elements a cell, each layer's values a row a cell (``layers[l][cell]``)."""
    cells = len(layers[0])
    state = struct.pack("<IiII", magic, 0, 1, cells)
    for pos in range(cells):
        state += struct.pack("<iI", pos, seqs_per_cell) + struct.pack("<i", 0) * seqs_per_cell
    state += struct.pack("<II", v_trans, len(layers))
    for layer in range(len(layers)):
        state += struct.pack("<iQ", F16, 4) + struct.pack(f"<{2 * cells}H", *range(10 * layer, 10 * layer + 2 * cells))
    for values in layers:
        state += struct.pack("<iQ", value_type, 2 * len(values[0])) + struct.pack(f"<{np.size(values)}H",
                                                                                  *np.ravel(values))
    return state


def test_each_layers_values_become_a_row_a_dimension_and_the_rest_is_kept_byte_for_byte():
    # two cells (tokens); layer 0 has three value dimensions, layer 1 two
    state = sequence_state([[[1, 2, 3], [4, 5, 6]], [[7, 8], [9, 10]]])
    out = values_transposed(state)
    assert len(out) == len(state)
    second = len(state) - 12 - 8  # the second layer's value header, then two rows of two 2-byte elements
    first = second - 12 - 12  # the first layer's: two rows of three
    flag_at = first - 2 * (12 + 8) - 8  # two layers of keys (header, two rows of 4 bytes), after v_trans and layers
    assert out[:flag_at] == state[:flag_at]  # magic, sequence, cells
    assert struct.unpack_from("<II", out, flag_at) == (1, 2)  # transposed now; two layers
    assert out[flag_at + 8: first] == state[flag_at + 8: first]  # the keys
    assert struct.unpack_from("<iII", out, first) == (F16, 2, 3)  # type, element bytes, dimensions
    assert struct.unpack_from("<6H", out, first + 12) == (1, 4, 2, 5, 3, 6)  # each dimension across the tokens
    assert struct.unpack_from("<iII4H", out, second) == (F16, 2, 2, 7, 9, 8, 10)


def test_batches_hold_at_most_the_context_batch_and_at_least_a_tile_where_the_tokens_allow():
    assert batch_sizes(100, 2048, 64) == [100]
    assert batch_sizes(40, 2048, 64) == [40]  # fewer tokens than a tile: one batch
    assert batch_sizes(2100, 2048, 64) == [2036, 64]  # not 2048 + 52
    assert batch_sizes(4200, 2048, 64) == [2048, 2048, 104]
    assert batch_sizes(0, 2048, 64) == []


@pytest.mark.parametrize("state, error", [
    (sequence_state([[[1, 2]]], magic=0x1234), "not a one-stream llama.cpp sequence state"),
    (sequence_state([[[1, 2]]], v_trans=1), "already transposed"),
    (sequence_state([[[1, 2]]], seqs_per_cell=2), "holds 2 sequences"),
    (sequence_state([[[1, 2]]], value_type=8), "ggml type 8"),  # Q8_0: no element to move on its own
    (sequence_state([[[1, 2]]]) + b"\0", "1 bytes after its values"),
])
def test_a_state_in_another_layout_is_refused(state, error):
    with pytest.raises(ValueError, match=error):
        values_transposed(state)


@pytest.mark.slow
def test_a_model_continues_from_a_flash_attention_contexts_state_as_from_its_own():
    import llama_cpp

    from multihop.lm.backends import llamacpp_weights
    from multihop.lm.engines.llamacpp import plain_weight_buffers
    from multihop.lm.engines.llamacpp_prompt import prompt_llama_class, set_sequence

    gguf = str(llamacpp_weights("smollm2").gguf)  # both contexts the same weights: only the hand-over differs
    with plain_weight_buffers():
        prompts = prompt_llama_class()(model_path=gguf, n_ctx=1024, n_batch=512, n_ubatch=512, flash_attn=True,
                                       n_threads=2, verbose=False)
        decoder = llama_cpp.Llama(model_path=gguf, n_ctx=1024, n_threads=2, verbose=False)
    tokens = decoder.tokenize(b"Audrey Hepburn starred as Eliza Doolittle in My Fair Lady (1964), directed by George"
                              b" Cukor. The film was produced by Jack L. Warner and won eight Academy Awards.")

    def next_logits(model, evaluated: list[int]) -> np.ndarray:
        model.n_tokens = len(evaluated)
        model.eval(tokens[len(evaluated):])
        return np.ctypeslib.as_array(model._ctx.get_logits(), shape=(model._n_vocab,)).copy()

    own = next_logits(decoder, [])
    decoder.reset()
    set_sequence(decoder, values_transposed(prompts.evaluate(tokens[:-1])))
    decoder.input_ids[: len(tokens) - 1] = tokens[:-1]
    handed_over = next_logits(decoder, tokens[:-1])
    assert handed_over.argmax() == own.argmax()
    assert np.abs(handed_over - own).max() < 0.05 * np.abs(own).max()  # flash attention's rounding, not other tokens
    decoder.reset()
    set_sequence(decoder, values_transposed(prompts.evaluate(tokens[:5])))  # a prefix handed over, the rest its own
    decoder.input_ids[:5] = tokens[:5]
    continued = next_logits(decoder, tokens[:5])
    assert continued.argmax() == own.argmax() and np.abs(continued - own).max() < 0.05 * np.abs(own).max()


@pytest.mark.slow
def test_the_split_engine_replies_alike_to_a_repeated_prompt_from_its_cache_and_after_forgetting_it():
    from dspy.lm15 import Config, Message, Request

    from multihop.lm.backends import llamacpp_weights
    from multihop.lm.engines import LlamaCppEngine

    weights = llamacpp_weights("smollm2", split_prompts=True)
    engine = LlamaCppEngine(weights.gguf, prompt_gguf=weights.prompt_gguf)
    passage = "Audrey Hepburn starred as Eliza Doolittle in My Fair Lady (1964), directed by George Cukor. "
    request = Request(model="m", system="Answer in one short phrase. " + passage * 4,
                      messages=(Message.user("Who directed it?"),), config=Config(max_tokens=16, temperature=0.0))
    other = Request(model="m", system="Answer in one word. " + passage * 4, messages=request.messages,
                    config=request.config)
    first = engine.complete(request)
    engine.complete(other)  # the context now holds another prompt: the repeated one starts from its cached state
    again = engine.complete(request)
    engine.forget_prefix()
    fresh = engine.complete(request)
    assert first.text == again.text == fresh.text and first.text
    prompt = first.usage.input_tokens  # the last token the decoding model's; a tile evaluated again
    reused = [r.usage.cache_read_tokens for r in (first, again, fresh)]
    assert prompt > 100 and reused == [0, prompt - 1 - FLASH_TILE, 0]


@pytest.mark.slow
def test_a_prompts_state_is_the_same_however_its_tokens_were_split_between_calls():
    from multihop.lm.backends import llamacpp_weights
    from multihop.lm.engines.llamacpp import plain_weight_buffers, prefix_cache_class
    from multihop.lm.engines.llamacpp_prompt import prompt_llama_class

    with plain_weight_buffers():
        prompts = prompt_llama_class()(model_path=str(llamacpp_weights("smollm2").gguf), n_ctx=1024, n_batch=256,
                                       n_ubatch=256, flash_attn=True, n_threads=2, verbose=False)
    tokens = prompts.tokenize(b" ".join(b"Rule %d: answer briefly and plainly." % i for i in range(60)))[:400]
    other = prompts.tokenize(b"Another stage's instructions, " * 20)
    whole = prompts.evaluate(tokens)
    for first in (7, 100, 390):  # a batch of 7 or 10 tokens would take flash attention's other kernel
        prompts.reset()
        prompts.evaluate(tokens[:first])  # 7 tokens: one batch of 7, a state not started from
        reused = min(first, len(tokens) - FLASH_TILE) if first >= FLASH_TILE else 0
        assert prompts.evaluate(tokens) == whole and prompts.reused == reused
    prompts.set_cache(prefix_cache_class()(1 << 30))  # a state loaded from the cache, then cut back to the floor
    prompts.reset()
    prompts.evaluate(tokens[:390])
    prompts.evaluate(other)
    assert prompts.evaluate(tokens) == whole and prompts.reused == len(tokens) - FLASH_TILE
