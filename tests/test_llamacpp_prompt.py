import struct

import numpy as np
import pytest

from multihop.lm.engines.llamacpp_prompt import SEQUENCE_STATE_MAGIC, values_transposed

F16 = 1


def sequence_state(values: list[list[int]], value_type: int = F16, v_trans: int = 0, seqs_per_cell: int = 1,
                   magic: int = SEQUENCE_STATE_MAGIC) -> bytes:
    """A one-layer llama.cpp sequence state of len(values) cells: keys 2 elements a cell, ``values`` a row a cell."""
    cells, dims = len(values), len(values[0])
    state = struct.pack("<IiII", magic, 0, 1, cells)
    for pos in range(cells):
        state += struct.pack("<iI", pos, seqs_per_cell) + struct.pack("<i", 0) * seqs_per_cell
    state += struct.pack("<II", v_trans, 1)
    state += struct.pack("<iQ", F16, 4) + struct.pack(f"<{2 * cells}H", *range(100, 100 + 2 * cells))
    state += struct.pack("<iQ", value_type, 2 * dims) + struct.pack(f"<{cells * dims}H", *np.ravel(values))
    return state


def test_each_layers_values_become_a_row_a_dimension_and_the_rest_is_kept_byte_for_byte():
    state = sequence_state([[1, 2, 3], [4, 5, 6]])  # two cells (tokens), three value dimensions
    out = values_transposed(state)
    assert len(out) == len(state)
    values_at = len(state) - 12 - 12  # the value header (12 bytes) and two rows of three 2-byte elements
    flag_at = values_at - 12 - 8 - 8  # the key header and rows, then v_trans and the layer count
    assert out[:flag_at] == state[:flag_at]  # magic, sequence, cells
    assert struct.unpack_from("<II", out, flag_at) == (1, 1)  # transposed now; one layer
    assert out[flag_at + 8: values_at] == state[flag_at + 8: values_at]  # the keys
    assert struct.unpack_from("<iII", out, values_at) == (F16, 2, 3)  # type, element bytes, dimensions
    assert struct.unpack_from("<6H", out, values_at + 12) == (1, 4, 2, 5, 3, 6)  # each dimension across the tokens


@pytest.mark.parametrize("state, error", [
    (sequence_state([[1, 2]], magic=0x1234), "not a one-stream llama.cpp sequence state"),
    (sequence_state([[1, 2]], v_trans=1), "already transposed"),
    (sequence_state([[1, 2]], seqs_per_cell=2), "holds 2 sequences"),
    (sequence_state([[1, 2]], value_type=8), "ggml type 8"),  # Q8_0: no element to move on its own
    (sequence_state([[1, 2]]) + b"\0", "1 bytes after its values"),
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
