"""Prompts evaluated by a second llama.cpp context, replies decoded by the engine's own
(:class:`~.llamacpp.LlamaCppEngine`'s ``prompt_gguf``).

llama.cpp evaluates a prompt fastest and decodes a token fastest with different settings. A prompt goes fastest from
weights its tiled matrix products take (float32 on x86: it multiplies Q4_1 matrices a row and a column at a time) and
with flash attention in large batches; a token goes fastest from the smallest weights (each token reads all of them)
without flash attention (its CPU kernel is slow on one query row). For SmolLM2 on 2 cores (docs: measurements, "Local
engines"): 1,167 prompt tokens in 2.3 s from float32 with flash attention in batches of 2,048, against 3.5 s without
it in batches of 512; at ~1,880 tokens of context, a token decoded in 18 ms from the shipped Q4_1 file, against 32–37
ms from float32 and 45 ms from Q4_1 with flash attention.

So a :class:`PromptLlama` evaluates the prompt and hands its KV state to the decoding model
(:func:`prompted_llama_class`), which evaluates the prompt's last token itself (its logits start the reply) and
decodes. The prompt context keeps the per-stage prefix cache: each prompt's state is saved once evaluated, keyed by its
tokens, and a prompt starts from the state sharing its longest prefix. It evaluates at least :data:`FLASH_TILE` tokens
a call (a shorter prompt: whole, and not saved), in batches of at least as many, so a prompt's KV state is the same
whichever states the cache held. With flash attention llama.cpp keeps the values of the KV cache a row per token;
without it, transposed — and it refuses a state of the other layout, so :func:`values_transposed` rewrites the state's
values (the layout is llama.cpp's sequence state, pinned with llama-cpp-python; a state it does not recognise is an
error, not a silent mismatch).
"""

from __future__ import annotations

import ctypes
import functools
import struct

import numpy as np

from .llamacpp_sampler import guided_llama_class

PROMPT_BATCH = 2048  # tokens evaluated at once by the prompt context (its n_batch and n_ubatch)
# ggml's GGML_FA_TILE_Q: llama.cpp's CPU flash attention takes a batch of fewer queries through another kernel, whose
# rounding differs, so a prompt's KV state would depend on how it was split; in batches of at least this many tokens it
# does not (checked byte for byte), and the replies do not depend on which states the cache held
FLASH_TILE = 64
SEQUENCE_STATE_MAGIC = 0xAF143CD8  # llama.cpp's sequence state starts with it (llama-context.cpp, io_magic)
VALUE_TYPE_SIZES = {0: 4, 1: 2, 30: 2}  # ggml type → bytes an element: F32, F16, BF16 (the KV cache types it takes)


def values_transposed(state: bytes) -> bytearray:
    """One sequence's llama.cpp KV state (``llama_state_seq_get_data``) with its values a row per token, as a context
    with flash attention writes it, rewritten as a context without flash attention keeps them: for each layer, each
    value dimension's elements across the tokens. Everything else (magic, cells, keys) is kept byte for byte; the value
    headers keep their size (type, row bytes → type, element bytes, dimensions).

    Raises ``ValueError`` for a state not in that layout (another llama.cpp version's, several sequences or streams,
    values already transposed, a quantised value cache, cells with data of their own such as M-RoPE models')."""
    try:
        return _values_transposed(state)
    except struct.error as exc:  # a count read from misaligned bytes runs past the end
        raise ValueError(f"not a llama.cpp sequence state in the layout expected ({exc})") from None


def _values_transposed(state: bytes) -> bytearray:
    view = memoryview(state)
    offset = 0

    def read(fmt: str):
        nonlocal offset
        values = struct.unpack_from(fmt, view, offset)
        offset += struct.calcsize(fmt)
        return values

    magic, _seq, streams, cells = read("<IiII")
    if magic != SEQUENCE_STATE_MAGIC or streams != 1:
        raise ValueError(f"not a one-stream llama.cpp sequence state (magic {magic:#x}, {streams} streams)")
    for _ in range(cells):  # position, sequence count, sequence ids
        _pos, n_seq = read("<iI")
        if n_seq != 1:
            raise ValueError(f"a cell of the state holds {n_seq} sequences, not one")
        offset += 4
    flag = offset
    v_trans, layers = read("<II")
    if v_trans:
        raise ValueError("the state's values are already transposed")
    for _ in range(layers):  # keys: type, row bytes, a row per cell
        _type, row = read("<iQ")
        offset += row * cells
    out = bytearray(state)
    struct.pack_into("<I", out, flag, 1)
    for _ in range(layers):  # values: type, row bytes, a row per cell → type, element bytes, dimensions, a row each
        header = offset
        value_type, row = read("<iQ")
        size = VALUE_TYPE_SIZES.get(value_type)
        if size is None or row % size:
            raise ValueError(f"the state's value cache has ggml type {value_type}: only F32, F16 and BF16 transpose")
        rows = np.frombuffer(view, dtype=np.dtype(f"V{size}"), count=cells * (row // size), offset=offset)
        struct.pack_into("<iII", out, header, value_type, size, row // size)
        out[offset: offset + row * cells] = rows.reshape(cells, row // size).T.tobytes()
        offset += row * cells
    if offset != len(state):
        raise ValueError(f"the state holds {len(state) - offset} bytes after its values")
    return out


def batch_sizes(tokens: int, most: int, least: int) -> list[int]:
    """``tokens`` split into batches of at most ``most`` and, where ``tokens`` allows, at least ``least``."""
    sizes = []
    while tokens > most:
        sizes.append(most if tokens - most >= least else tokens - least)
        tokens -= sizes[-1]
    return sizes + [tokens] if tokens else sizes


@functools.cache
def prompt_llama_class() -> type:
    """``llama_cpp.Llama`` evaluating prompts for another model (built with flash attention and batches of
    :data:`PROMPT_BATCH`) and keeping their KV states in its ``cache`` (a ``LlamaRAMCache``, or None)."""
    import llama_cpp
    import llama_cpp.llama_cpp as bindings

    class PromptLlama(llama_cpp.Llama):
        reused = 0  # the tokens of the last prompt evaluated that were not evaluated again

        def evaluate(self, tokens: list[int]) -> bytes:
            """Evaluate ``tokens`` from the longest prefix this context or its cache holds, at least a tile of them;
            the sequence's KV state, which the cache keeps under ``tokens`` (unless they are fewer than a tile)."""
            limit = max(len(tokens) - FLASH_TILE, 0)  # at least a tile evaluated (a shorter prompt: whole)
            # a state of fewer tokens than a tile was evaluated in one smaller batch: it is not started from
            start = min(self.longest_token_prefix(self.input_ids[: self.n_tokens].tolist(), tokens), limit) \
                if self.n_tokens >= FLASH_TILE else 0
            key = self.cache._find_longest_prefix_key(tuple(tokens)) if self.cache is not None else None
            if key is not None and min(self.longest_token_prefix(key, tokens), limit) > start:
                self.cache.cache_state.move_to_end(key)  # the least recently used state goes first
                set_sequence(self, self.cache.cache_state[key].llama_state)
                self.input_ids[: len(key)] = key
                start = min(self.longest_token_prefix(key, tokens), limit)
            self.reused = self.n_tokens = start  # eval drops the KV state past it first
            # each batch one llama.cpp decode of at least a tile
            for size in batch_sizes(len(tokens) - start, min(self.n_batch, self.context_params.n_ubatch), FLASH_TILE):
                self.eval(tokens[self.n_tokens: self.n_tokens + size])
            size = bindings.llama_state_seq_get_size(self._ctx.ctx, 0)
            buffer = (ctypes.c_uint8 * size)()
            state = bytes(memoryview(buffer)[: bindings.llama_state_seq_get_data(self._ctx.ctx, buffer, size, 0)])
            if self.cache is not None and len(tokens) >= FLASH_TILE:
                self.cache[tokens] = llama_cpp.llama.LlamaState(np.asarray(tokens, dtype=np.intc), np.zeros((1, 1)),
                                                                len(tokens), state, len(state), self._seed)
            return state

    return PromptLlama


def set_sequence(model, state: bytes | bytearray) -> None:
    """Load a sequence's KV state (``llama_state_seq_get_data``'s) into ``model``'s context as its only sequence.
    ``model`` counts no tokens until its caller sets them, so a state llama.cpp refuses leaves no stale sequence."""
    import llama_cpp.llama_cpp as bindings

    model.n_tokens = 0
    array = ctypes.c_uint8 * len(state)
    data = array.from_buffer(state) if isinstance(state, bytearray) else array.from_buffer_copy(state)
    if bindings.llama_state_seq_set_data(model._ctx.ctx, data, len(state), 0) != len(state):
        raise RuntimeError("llama.cpp refused a prompt's KV state (the prompt and decoding contexts' models differ?)")


@functools.cache
def prompted_llama_class() -> type:
    """:func:`~.llamacpp_sampler.guided_llama_class` whose prompts its ``prompts`` model (a :func:`prompt_llama_class`
    model of the same architecture, or None: its own) evaluates: all but the last token, whose KV state it takes
    over; it evaluates the last token itself and decodes."""

    class PromptedLlama(guided_llama_class()):
        prompts = None

        def generate(self, tokens, *args, **kwargs):
            head = list(tokens[:-1])
            if self.prompts is not None and head:
                set_sequence(self, values_transposed(self.prompts.evaluate(head)))
                self.input_ids[: len(head)] = head
                self.n_tokens = len(head)  # llama-cpp-python's generate finds them all and evaluates the last token
            return super().generate(tokens, *args, **kwargs)

    return PromptedLlama
