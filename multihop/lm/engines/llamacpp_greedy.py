"""Greedy decoding under a llama.cpp grammar that asks the grammar about the likeliest tokens before the vocabulary.

llama-cpp-python samples under a grammar with a chain that applies the grammar to every token of the vocabulary at
every step (49,152 for SmolLM2: ~13 ms a token on 2 cores) and then takes the likeliest token left. Greedy decoding
needs less: the likeliest allowed token is the first allowed one in the order of the logits, so
:class:`CheckedGreedy` asks the grammar about the :data:`TOP` likeliest tokens only and falls back to the whole
vocabulary when none of them is allowed — the check llama.cpp's own ``common_sampler`` makes for its command-line
tools. Ties go to the lower token id, as llama.cpp's greedy sampler breaks them, so the tokens chosen are the chain's,
step for step (tested against it). Loaded with ``llama-cpp-python`` only (a local LM's first call).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from contextlib import contextmanager

import llama_cpp
import numpy as np

TOP = 16  # the likeliest tokens the grammar is asked about before the whole vocabulary
_SWAPPING = threading.Lock()
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)  # llama_token_data


def checked_greedy_applies(options: dict) -> bool:
    """Whether ``Llama._init_sampler``'s ``options`` ask for plain greedy decoding under a grammar: temperature 0, a
    grammar, no logits processor and no repetition penalties (the cases :class:`CheckedGreedy` decodes as the chain
    does)."""
    return (options.get("temp") == 0.0 and options.get("grammar") is not None
            and not options.get("logits_processor") and options.get("repeat_penalty", 1.0) == 1.0
            and not options.get("frequency_penalty") and not options.get("presence_penalty"))


class CheckedGreedy:
    """The likeliest token a grammar allows, asking it about the ``top`` likeliest tokens first.

    Stands where llama-cpp-python keeps its sampler chain (``Llama._sampler``): ``sample(ctx, idx)`` picks the token
    from the logits of the batch's row ``idx`` and advances the grammar with it.

    Args:
        model: The ``llama_cpp.Llama`` whose vocabulary the grammar is compiled against.
        grammar: The ``llama_cpp.LlamaGrammar`` to decode under.
        top: How many of the likeliest tokens the grammar is asked about before the whole vocabulary.
    """

    def __init__(self, model, grammar, top: int = TOP):
        self.n_vocab, self.top = model.n_vocab(), top
        self._grammar = llama_cpp.llama_sampler_init_grammar(model._model.vocab, grammar._grammar.encode("utf-8"),
                                                             grammar._root.encode("utf-8"))
        if not self._grammar:
            raise ValueError(f"llama.cpp could not parse the grammar (root {grammar._root!r})")
        self._vocab = np.zeros(self.n_vocab, dtype=TOKEN_DATA)
        self._vocab["id"] = np.arange(self.n_vocab)
        self.steps = self.fallbacks = 0  # tokens sampled, and those the top ones did not settle

    def sample(self, ctx, idx: int = -1) -> int:
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        token = self._from_top(logits)
        if token is None:
            self.fallbacks += 1
            token = int(np.argmax(self._allowed(np.arange(self.n_vocab, dtype=np.int32), logits)))
        llama_cpp.llama_sampler_accept(self._grammar, token)
        self.steps += 1
        return token

    def _from_top(self, logits: np.ndarray) -> int | None:
        """The likeliest allowed token when it is among the ``top`` likeliest and no token outside them could tie
        with it at a lower id; else None."""
        ids = np.argpartition(logits, -self.top)[-self.top:].astype(np.int32)
        ids = ids[np.lexsort((ids, -logits[ids]))]  # likeliest first, ties by id
        allowed = np.flatnonzero(self._allowed(ids, logits) > -np.inf)
        if not len(allowed):
            return None
        best = ids[allowed[0]]
        return int(best) if logits[best] > logits[ids[-1]] or best == np.argmax(logits) else None

    def _allowed(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        """The logits of ``ids`` after the grammar: those it rejects at -inf."""
        data = self._vocab if len(ids) == self.n_vocab else np.zeros(len(ids), dtype=TOKEN_DATA)
        data["id"], data["logit"] = ids, logits[ids]
        array = llama_cpp.llama_token_data_array(data=data.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
                                                 size=len(ids), selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(array))
        return data["logit"].copy()

    def __del__(self):
        if getattr(self, "_grammar", None) is not None:
            llama_cpp.llama_sampler_free(self._grammar)
            self._grammar = None


@functools.cache
def checked_llama_class() -> type:
    """``llama_cpp.Llama`` decoding greedily under a grammar with :class:`CheckedGreedy` (its other samplings as
    llama-cpp-python's chain does them)."""

    class CheckedLlama(llama_cpp.Llama):
        def _init_sampler(self, **options):
            if checked_greedy_applies(options):
                return CheckedGreedy(self, options["grammar"])
            return super()._init_sampler(**options)

    return CheckedLlama


@contextmanager
def models_built_checked():
    """``llama_cpp.Llama`` is :func:`checked_llama_class` while the block runs (under a lock), for code that builds its
    models through that name: llama-cpp-python's server."""
    with _SWAPPING:
        original, llama_cpp.Llama = llama_cpp.Llama, checked_llama_class()
        try:
            yield
        finally:
            llama_cpp.Llama = original
