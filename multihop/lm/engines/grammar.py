"""JSON-schema grammars enforced token by token with ``llguidance``, for both local engines.

``llguidance`` compiles a JSON schema to a grammar (a lexer of regular expressions under an Earley parser) and, for a
decode under it, computes the mask of the whole vocabulary's next tokens from a trie of the tokenizer's tokens (tenths
of a millisecond for SmolLM2's 49,152). :class:`SchemaGrammars` compiles each schema once per tokenizer;
:class:`TokenMask` turns a matcher's bit mask into the allowed token ids. The ``transformers`` engine applies the mask
with :class:`SchemaLogitsProcessor`, the llama.cpp engine with :mod:`~.llamacpp_sampler`.

The library was chosen for the ``transformers`` engine by measurement (SmolLM2-135M, four MuSiQue questions, a bounded
three-field schema, 2 cores, greedy): with llguidance and with xgrammar every reply parsed (4/4, against 0/4
unconstrained); a generated token took 32.6 ms with xgrammar's transformers processor against 31.6 ms unconstrained,
and xgrammar installs Triton (286 MB) for its GPU kernels; llguidance's grammar mask costs 0.07 ms a token and masking
the scores from its bit array with NumPy 0.07 ms, while its masking compiled with ``torch.compile`` took 66 ms a token
on CPU (46.6 ms a generated token in all), so the mask is applied here from the bit array. lm-format-enforcer 0.11 does
not import under transformers 5.

Whitespace: :data:`COMPACT` JSON has none outside strings (the ``transformers`` engine's replies);
:data:`SPACED` allows one optional space between any two JSON tokens, as the grammar llama.cpp derives from a schema
does (its ``space ::= " "?`` rule, which also allows one after the closing brace; the llama.cpp engine's replies keep
the spacing SmolLM2 chose under it, that last space aside).
"""

from __future__ import annotations

import json

import numpy as np

COMPACT = {"whitespace_flexible": False}  # llguidance's JSON options: no whitespace outside strings
SPACED = {"whitespace_pattern": " ?"}  # at most one space between JSON tokens (llama.cpp's grammar's)
# an integer without bounds gets these: at most 16 digits and a sign, as llama.cpp's grammar writes them (schema.py's
# worst case counts 20 characters); llguidance's own integers have no length: a sampled reply could run on in digits.
# 2**53 - 1: llguidance reads a bound as a double, which rounds 10**16 - 1 up to 10**16 (17 digits)
INTEGER_BOUND = 2**53 - 1
_VALUES = ("enum", "const", "default", "examples")  # keywords whose values are data, not schemas


class SchemaGrammars:
    """The llguidance grammars of JSON schemas for one tokenizer, each compiled once; a schema llguidance cannot turn
    into a grammar raises ``ValueError`` with its reason.

    Args:
        tokenizer: llguidance's ``LLTokenizer`` of the model's vocabulary (:meth:`for_hf` builds one from a Hugging
            Face tokenizer; ``llguidance.llamacpp`` from a llama.cpp vocabulary). Its end-of-sequence token(s) are the
            only ones allowed once a reply is complete.
        options: llguidance's JSON compile options (:data:`COMPACT` or :data:`SPACED`).
    """

    def __init__(self, tokenizer, options: dict = COMPACT):
        self.tokenizer, self.options = tokenizer, dict(options)
        self._grammars: dict[str, str] = {}

    @classmethod
    def for_hf(cls, hf_tokenizer, eos_token: int | list[int] | None = None, options: dict = COMPACT) -> SchemaGrammars:
        """The grammars for a Hugging Face tokenizer; ``eos_token``: the token(s) that end generation (a model's
        generation config may name others than its tokenizer)."""
        import llguidance.hf

        return cls(llguidance.hf.from_tokenizer(hf_tokenizer, eos_token=eos_token), options)

    def grammar(self, schema: dict) -> str:
        from llguidance import LLMatcher

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            try:
                grammar = LLMatcher.grammar_from_json_schema(integers_bounded(schema), defaults=self.options)
            except ValueError as exc:
                raise ValueError(f"the response schema has no decoding grammar: {exc}") from None
            error = LLMatcher.validate_grammar(grammar, self.tokenizer)
            if error:
                raise ValueError(f"the response schema has no decoding grammar: {error}")
            self._grammars[key] = grammar
        return self._grammars[key]

    def matcher(self, schema: dict):
        """A fresh ``LLMatcher`` for one decode under ``schema``."""
        from llguidance import LLMatcher

        return LLMatcher(self.tokenizer, self.grammar(schema))

    def processor(self, schema: dict) -> SchemaLogitsProcessor:
        """A fresh ``transformers`` logits processor for one generation under ``schema``."""
        return SchemaLogitsProcessor(self.matcher(schema), self.tokenizer.vocab_size)


def integers_bounded(node):
    """A copy of a JSON schema in which every integer without a bound of its own is bounded by :data:`INTEGER_BOUND`
    either way."""
    if isinstance(node, list):
        return [integers_bounded(item) for item in node]
    if not isinstance(node, dict):
        return node
    bounded = {key: value if key in _VALUES else integers_bounded(value) for key, value in node.items()}
    kinds = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
    if "integer" in kinds and not node.keys() & {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}:
        bounded.update(minimum=-INTEGER_BOUND, maximum=INTEGER_BOUND)
    return bounded


class TokenMask:
    """The tokens a matcher allows next, over a vocabulary of ``vocab_size``: llguidance's bit mask, one buffer that
    :meth:`fill` writes at each step. A matcher in an error state raises ``RuntimeError`` with its reason.

    Args:
        vocab_size: The tokenizer's vocabulary size (the mask's bits).
    """

    def __init__(self, vocab_size: int):
        import llguidance.numpy

        self.vocab_size = vocab_size
        self.bits = llguidance.numpy.allocate_token_bitmask(1, vocab_size)

    def fill(self, matcher) -> TokenMask:
        """The mask of the tokens ``matcher`` allows next (this object, filled)."""
        import llguidance.numpy

        if matcher.is_error():
            raise RuntimeError(f"constrained decoding failed: {matcher.get_error()}")
        llguidance.numpy.fill_next_token_bitmask(matcher, self.bits, 0)
        return self

    def allows(self, token: int) -> bool:
        return 0 <= token < self.vocab_size and bool((self.bits[0, token >> 5] >> (token & 31)) & 1)

    def allowed(self, size: int | None = None) -> np.ndarray:
        """A boolean array of ``size`` (default: the vocabulary's) that is True where the mask allows the token; a
        model's rows past the tokenizer's vocabulary (padding) are never allowed."""
        size = self.vocab_size if size is None else size
        bits = np.unpackbits(self.bits.view(np.uint8), bitorder="little")[: min(self.vocab_size, size)]
        if len(bits) == size:
            return bits.view(bool)
        allowed = np.zeros(size, dtype=bool)
        allowed[: len(bits)] = bits
        return allowed

    def likeliest(self, logits: np.ndarray) -> int:
        """The allowed token of the highest logit (ties to the lower id); the likeliest token of all is checked
        first, the whole mask only when it is not allowed."""
        best = int(np.argmax(logits))
        if self.allows(best):
            return best
        allowed = self.allowed(len(logits))
        if not allowed.any():
            raise RuntimeError("constrained decoding failed: the grammar allows no token")
        return int(np.argmax(np.where(allowed, logits, -np.inf)))


class SchemaLogitsProcessor:
    """A ``transformers`` logits processor (a callable its ``LogitsProcessorList`` applies) that sets to -inf the score
    of every token the grammar does not allow next (one sequence: no beams, one return sequence); once the reply is
    complete, only the end-of-sequence token remains. The scores it is given stay as they are (the masked ones are a
    new tensor): ``generate`` keeps them as the raw logits its token log-probabilities are read from.

    Args:
        matcher: The ``LLMatcher`` of this generation's grammar.
        vocab_size: The tokenizer's vocabulary size.
    """

    def __init__(self, matcher, vocab_size: int):
        self.matcher, self.mask = matcher, TokenMask(vocab_size)
        self.started = False  # the first call sees the prompt; each later one, the token chosen last

    def __call__(self, input_ids, scores):
        import torch

        if input_ids.shape[0] != 1:
            raise ValueError("grammar-constrained decoding runs one sequence at a time (no beams)")
        if self.started:
            self.matcher.consume_token(int(input_ids[0, -1]))
        self.started = True
        allowed = self.mask.fill(self.matcher).allowed(scores.shape[-1])
        return scores.masked_fill(torch.from_numpy(~allowed).to(scores.device), float("-inf"))
