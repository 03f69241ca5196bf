"""Sampling under a JSON schema in llama.cpp with ``llguidance``'s token masks.

What llama.cpp's grammar does: llama-cpp-python turns a ``response_format`` schema into a GBNF grammar (a string of at
most n characters as n nested optional characters) and its sampler chain applies the grammar to every token of the
vocabulary at every step (49,152 for SmolLM2: ~13 ms a token on 2 cores); asking the grammar about the 16 likeliest
tokens first (llama.cpp's own ``common_sampler`` check) brings greedy steps to 1.1–1.8 ms, not the steps where none of
them is allowed, nor sampling at a temperature. ``llguidance`` computes the whole vocabulary's mask in about 0.1 ms (a
lexer and an Earley parser walking a trie of the tokens), and a greedy step under it took 0.5–1.0 ms on the demo's
programs, with the same replies but for a trailing space (docs: measurements, "Sampling under the schema with
llguidance"), so the engine decodes under the schema with it, and llama.cpp's grammar is the fallback:

- :func:`guided_llama_class`'s ``create_chat_completion`` takes the schema out of a ``json_object`` response format
  and hands llama-cpp-python a :class:`SchemaGrammar` as its ``grammar`` instead: the schema's llguidance grammar
  (:class:`~.grammar.SchemaGrammars`, compiled once per schema against the model's own vocabulary,
  ``llguidance.llamacpp``), whose whitespace is llama.cpp's grammar's (:data:`~.grammar.SPACED`: at most one space
  between JSON tokens);
- its ``_init_sampler`` answers such a grammar with a :class:`GuidedSampler`: at each step the request's logits
  processors see the model's logits (the engine's log-probabilities are the raw ones) and llguidance's mask says
  which tokens are allowed. Greedy decoding (temperature 0, no penalties) takes the likeliest allowed token, ties to
  the lower id as llama.cpp's greedy sampler breaks them (the likeliest token of all checked first, the whole mask
  read only when it is refused); otherwise llama-cpp-python's own chain for the request's options, built without a
  grammar, picks among the allowed tokens only — its penalties, top-k / top-p / min-p cuts, temperature and seeded
  draw, i.e. sampling from the masked distribution. The matcher consumes each token chosen; once the reply is complete
  only the end-of-generation tokens are allowed, and llama-cpp-python stops at the first;
- a schema llguidance cannot compile (its reason logged once per schema) keeps its ``response_format``: llama.cpp's
  grammar and sampler chain decode under it, as llama-cpp-python does without this class (and where llama-cpp-python
  cannot derive a grammar from the schema either, it decodes under its grammar of any JSON).

Loaded with ``llama-cpp-python`` only (a local LM's first call).
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import threading
import warnings
from contextlib import contextmanager

import llama_cpp
import numpy as np

from .grammar import SPACED, SchemaGrammars, TokenMask

logger = logging.getLogger(__name__)
_SWAPPING = threading.Lock()
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)  # llama_token_data


def vocab_tokenizer(model):
    """llguidance's tokenizer of a ``llama_cpp.Llama``'s vocabulary, every end-of-generation token ending a reply."""
    import llguidance.llamacpp

    vocab, size = model._model.vocab, model.n_vocab()
    ends = [token for token in range(size) if llama_cpp.llama_vocab_is_eog(vocab, token)]
    with warnings.catch_warnings():  # it reads each token's attributes with a binding llama-cpp-python deprecates
        warnings.simplefilter("ignore", DeprecationWarning)
        return llguidance.llamacpp.lltokenizer_from_vocab(vocab, n_vocab=size, eos_token=ends or None)


class SchemaGrammar:
    """A JSON schema's llguidance grammar, passed through llama-cpp-python as its ``grammar`` argument (which it
    hands, untouched, to the model's ``_init_sampler``).

    Args:
        grammars: The model's compiled grammars (the schema's already among them).
        schema: The JSON schema the reply follows.
    """

    def __init__(self, grammars: SchemaGrammars, schema: dict):
        self.grammars, self.schema = grammars, schema

    def matcher(self):
        return self.grammars.matcher(self.schema)


class GuidedSampler:
    """Picks each token among those a schema's grammar allows and advances the grammar with it.

    Stands where llama-cpp-python keeps its sampler chain (``Llama._sampler``): ``sample(ctx, idx)`` picks the token
    from the logits of the batch's row ``idx``.

    Args:
        model: The ``llama_cpp.Llama`` decoding (its ``_input_ids`` go to the logits processors).
        matcher: A fresh llguidance ``LLMatcher`` of the reply's grammar.
        chain: llama-cpp-python's sampler chain (``LlamaSampler``) for the request's options, built without a grammar;
            None for plain greedy decoding (temperature 0, no penalties): the likeliest allowed token, ties to the
            lower id, as llama.cpp's greedy sampler picks it.
        logits_processor: The request's logits processors, applied to the model's logits first.
    """

    def __init__(self, model, matcher, chain=None, logits_processor=None):
        self.model, self.matcher, self.chain = model, matcher, chain
        self.processors = list(logits_processor or ())
        self.n_vocab = model.n_vocab()
        self.mask = TokenMask(self.n_vocab)
        self.steps = 0

    def sample(self, ctx, idx: int = -1) -> int:
        return self.choose(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,)))

    def choose(self, logits: np.ndarray) -> int:
        """The token chosen from one step's ``logits`` (the model's, one a vocabulary token), the matcher advanced
        with it."""
        if self.processors:
            logits = logits.copy()
            for processor in self.processors:
                logits[:] = processor(self.model._input_ids, logits)
        self.mask.fill(self.matcher)
        token = self.mask.likeliest(logits) if self.chain is None else self.pick(logits)
        if not self.matcher.consume_token(token):
            raise RuntimeError(f"constrained decoding failed: {self.matcher.get_error()}")
        self.steps += 1
        return token

    def pick(self, logits: np.ndarray) -> int:
        """The token the chain picks among the allowed ones (in ascending id order); the chain accepts it."""
        ids = np.flatnonzero(self.mask.allowed()).astype(np.int32)
        if not len(ids):
            raise RuntimeError("constrained decoding failed: the grammar allows no token")
        data = np.zeros(len(ids), dtype=TOKEN_DATA)
        data["id"], data["logit"] = ids, logits[ids]
        array = llama_cpp.llama_token_data_array(data=data.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
                                                 size=len(ids), selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self.chain.sampler, ctypes.byref(array))
        token = int(array.data[array.selected].id)  # the chain's cuts may sort the array in place
        llama_cpp.llama_sampler_accept(self.chain.sampler, token)
        return token


def plain_greedy(options: dict) -> bool:
    """Whether ``Llama._init_sampler``'s ``options`` ask for plain greedy decoding: temperature 0 and no repetition
    penalties (llama-cpp-python's chain is then its greedy sampler alone)."""
    return (options.get("temp") == 0.0 and options.get("repeat_penalty", 1.0) == 1.0
            and not options.get("frequency_penalty") and not options.get("presence_penalty"))


@functools.cache
def guided_llama_class() -> type:
    """``llama_cpp.Llama`` decoding a ``json_object`` response format's schema with llguidance (:class:`GuidedSampler`;
    the module's docstring says how, and what falls back to llama.cpp's grammar)."""

    class GuidedLlama(llama_cpp.Llama):
        _grammars = None  # the model's SchemaGrammars, built on the first schema
        _refused: set | None = None  # the schemas llguidance could not compile, logged once each

        def create_chat_completion(self, *args, response_format=None, grammar=None, **kwargs):
            schema = response_format.get("schema") if response_format and response_format.get("type") == \
                "json_object" else None
            guided = self.schema_grammar(schema) if schema is not None and grammar is None else None
            if guided is not None:
                return super().create_chat_completion(*args, grammar=guided, **kwargs)
            return super().create_chat_completion(*args, response_format=response_format, grammar=grammar, **kwargs)

        def schema_grammar(self, schema: dict) -> SchemaGrammar | None:
            """The schema's llguidance grammar, or None when llguidance cannot compile it."""
            if self._grammars is None:
                self._grammars, self._refused = SchemaGrammars(vocab_tokenizer(self), SPACED), set()
            try:
                self._grammars.grammar(schema)
            except ValueError as exc:
                key = json.dumps(schema, sort_keys=True)
                if key not in self._refused:
                    self._refused.add(key)
                    logger.warning("%s; decoding under llama.cpp's grammar of it", exc)
                return None
            return SchemaGrammar(self._grammars, schema)

        def _init_sampler(self, **options):
            grammar = options.get("grammar")
            if not isinstance(grammar, SchemaGrammar):
                return super()._init_sampler(**options)
            chain = None if plain_greedy(options) else \
                super()._init_sampler(**{**options, "grammar": None, "logits_processor": None})
            return GuidedSampler(self, grammar.matcher(), chain, options.get("logits_processor"))

    return GuidedLlama


@contextmanager
def models_built_guided():
    """``llama_cpp.Llama`` is :func:`guided_llama_class` while the block runs (under a lock), for code that builds its
    models through that name: llama-cpp-python's server."""
    with _SWAPPING:
        original, llama_cpp.Llama = llama_cpp.Llama, guided_llama_class()
        try:
            yield
        finally:
            llama_cpp.Llama = original
