"""The local engine every in-process and served engine is (:class:`LocalEngine`, with :class:`AsyncEngine` over it)
and what the engines share: the chat messages of a DSPy request, decoding under its bounded JSON schema, the response
with its token usage and, when the request asks for them (``Config.logprobs``), its tokens' log-probabilities, and
streaming."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

from dspy.lm15 import Message, Response, TextPart, TokenLogprob, Usage, response_to_events
from dspy.utils.exceptions import LMUnsupportedFeatureError

from multihop.lm.defaults import LOCAL_MAX_TOKENS

from .schema import decoding_plan

# KV states a local engine keeps for its stages' prompt prefixes: SmolLM2-135M's take ~23 kB a token on llama.cpp
# (~40 prompts of 1k tokens), ~46 kB in fp32 on transformers
PREFIX_CACHE_BYTES = 1 << 30
CHAT_ADAPTER_MARK = "[[ ## completed ## ]]"  # in every prompt DSPy's ChatAdapter writes
logger = logging.getLogger(__name__)
REQUEST_PARAMS = frozenset({"temperature", "max_tokens", "top_p", "top_k", "stop", "seed", "logprobs"})


class LogprobsUnavailable(LMUnsupportedFeatureError):
    """An LM gives no token log-probabilities where a program needs them: the message says what to run instead."""


def chat_messages(request) -> list[dict]:
    """The request as chat messages (``role``, ``content``): its system text first, then its turns."""
    messages = []
    if request.system:
        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
        messages.append({"role": "system", "content": system})
    messages.extend({"role": m.role, "content": m.text or ""} for m in request.messages)
    return messages


def text_pieces(decode: Callable[[Sequence[int]], str], ids: Sequence[int]) -> list[str]:
    """Each token's share of the text ``decode`` makes of ``ids``: what decoding the tokens through it adds to the
    tokens before it. A character whose bytes span several tokens belongs to the token that completes it (until then
    the decoded text ends in a replacement character), so the pieces join to the decoded text."""
    pieces, done = [], ""
    for end in range(1, len(ids) + 1):
        text = decode(ids[:end])
        if text.endswith("\ufffd") and end < len(ids):
            pieces.append("")
            continue
        pieces.append(text[len(done):])
        done = text
    return pieces


def spelling(tokens: Sequence[TokenLogprob], text: str) -> tuple[TokenLogprob, ...]:
    """The tokens that write ``text``: those that start before its end (a reply cut at a stop string keeps the token
    the cut falls in; an end-of-sequence token, which writes nothing, is none)."""
    end, start, kept = len(text.encode()), 0, []
    for token in tokens:
        if start >= end:
            break
        kept.append(token)
        start += len(bytes(token.bytes) if token.bytes is not None else token.token.encode())
    return tuple(kept)


def reusable_prefix(previous: Sequence[int], prompt: Sequence[int]) -> int:
    """The prompt tokens whose KV state an engine takes from the ``previous`` sequence's: their common prefix, less
    the prompt's last token, which is always evaluated (its logits start the reply)."""
    return min(len(os.path.commonprefix([list(previous), list(prompt)])), max(len(prompt) - 1, 0))


class Generation(NamedTuple):
    """One decode: its text, why it ended (``stop`` or ``length``), its tokens — the prompt's, those of the prompt
    read from the engine's prefix cache instead of evaluated, and the new ones — and, when the request asked for
    them, the log-probabilities of the tokens that write the text (None: not asked, or the server gave none)."""

    text: str
    finish: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    logprobs: tuple[TokenLogprob, ...] | None = None


class LocalEngine:
    """The base of the local engines (DSPy's engine protocol, ``complete(Request) -> Response``).

    A subclass defines ``generate(messages, config, max_tokens, schema) -> Generation``: one decode of the chat
    ``messages`` under the request's ``config``, constrained to the JSON ``schema`` when one is given. With
    ``constrained`` the engine declares structured outputs (``supports_response_schema``), so DSPy's
    ``JSONAdapter`` sends each signature's JSON schema; every string and list in it is bounded so that the longest
    reply fits ``max_tokens`` (:func:`~.schema.bounded`), and a reply that still reaches the cap is decoded once more
    under caps of a character a token; a schema whose smallest caps need more tokens than ``max_tokens`` gets them
    (:func:`~.schema.decoding_plan`). A reply then parses into the declared
    fields and types and ends when its closing brace is written. The prompt counts once in the usage, and the tokens
    the engine reused from its prefix cache are reported as DSPy's ``cache_read_tokens``.

    A request with ``Config.logprobs`` set (``predictor(..., config={"logprobs": True})``, or ``logprobs=True``
    among the LM's settings) gets the log-probability of each token of the reply under the model's own distribution
    (before the schema's grammar and the sampling settings cut it) as ``Response.logprobs``, which DSPy hands on as
    the prediction's ``logprobs`` (``{"content": [{"token", "logprob", "bytes", ...}]}``). They are the tokens of
    the whole reply, its JSON structure included: a program that judges one field reads that field's tokens out of
    them. An in-process engine gives the chosen tokens only: a request for ranked alternatives (``logprobs`` > 0) is
    refused with :class:`~dspy.utils.exceptions.LMUnsupportedFeatureError`.
    """

    in_process = True  # runs the model here, one call at a time (an HTTP engine overrides it)
    ranked_alternatives = False  # gives the top-n alternatives of each token (``Config.logprobs`` > 0)

    _warned_chat = False  # warned once that a stage came in the ChatAdapter's format (no schema)

    def __init__(self, name: str, constrained: bool = True):
        self.name, self.constrained = name, constrained
        self.supports_response_schema = constrained
        self.supported_params = REQUEST_PARAMS | ({"response_format"} if constrained else set())

    def generate(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> Generation:
        raise NotImplementedError

    def __reduce__(self):
        """Pickled (DSPy's ``save_program=True``) as its ``dump_state()`` — what it runs, never its weights, locks,
        clients or KV state — and rebuilt with ``load_state`` on unpickling."""
        return _restore_engine, (type(self), self.dump_state())

    def __copy__(self) -> LocalEngine:
        return self  # one engine per model in a process (its weights, lock, prefix): copies of an LM share it

    def __deepcopy__(self, memo) -> LocalEngine:
        return self

    def forget_prefix(self) -> None:
        """Drop the KV state kept from the last call, so the next prompt is evaluated whole (for measuring)."""

    def plan(self, request) -> list[tuple[dict | None, int]]:
        """The ``(schema, token budget)`` decodes a request may take (:func:`~.schema.decoding_plan`). A constrained
        engine sent a stage in DSPy's ChatAdapter format (no schema to decode under) warns once, in one line."""
        max_tokens = request.config.max_tokens or LOCAL_MAX_TOKENS
        if self.constrained and request.config.response_format is None and not self._warned_chat:
            if any(CHAT_ADAPTER_MARK in message["content"] for message in chat_messages(request)):
                self._warned_chat = True
                logger.warning("%s: a stage arrived in DSPy's ChatAdapter format, decoded without its JSON schema; "
                               "configure adapter=dspy.JSONAdapter() (or multihop.configure_lm) to decode it under "
                               "the schema", self.name)
        return decoding_plan(request.config.response_format, max_tokens) if self.constrained else [(None, max_tokens)]

    def complete(self, request) -> Response:
        self.check_logprobs(request.config)
        messages, generations = chat_messages(request), []
        for schema, budget in self.plan(request):
            generations.append(self.generate(messages, request.config, budget, schema))
            if generations[-1].finish != "length":
                break
        return self.response(generations)

    async def acomplete(self, request) -> Response:
        """:meth:`complete` awaited: in a worker thread (an in-process engine computes; an HTTP engine awaits)."""
        return await asyncio.to_thread(self.complete, request)

    def check_logprobs(self, config) -> None:
        """Refuse a request for ranked alternatives of each token where the engine gives the chosen ones only."""
        if (config.logprobs or 0) > 0 and not self.ranked_alternatives:
            raise LMUnsupportedFeatureError(
                f"{type(self).__name__} gives the chosen tokens' log-probabilities only, not the top "
                f"{config.logprobs} alternatives: ask for logprobs=True (or 0)", model=self.name)

    def response(self, generations: list[Generation]) -> Response:
        """The response of a request's decodes: the last one's text and token log-probabilities, the first one's
        prompt (counted once)."""
        first, last = generations[0], generations[-1]
        usage = Usage(input_tokens=first.prompt_tokens, output_tokens=sum(g.completion_tokens for g in generations),
                      cache_read_tokens=first.cached_tokens)
        return Response(id=None, model=self.name, message=Message.assistant((TextPart(last.text),)),
                        finish_reason=last.finish, usage=usage, logprobs=last.logprobs)

    def stream(self, request):
        return response_to_events(self.complete(request))


def _restore_engine(cls: type, state: dict) -> LocalEngine:
    return cls.load_state(state)


class AsyncEngine:
    """DSPy's async engine protocol (``async complete(Request) -> Response``) over one of our engines, which DSPy
    takes as ``async_engine=``: ``await program.acall(...)`` then reaches the same engine (its weights, its lock, its
    server) without blocking the event loop."""

    def __init__(self, engine: LocalEngine):
        self.engine = engine
        self.supports_response_schema = engine.supports_response_schema
        self.supported_params = engine.supported_params

    async def complete(self, request) -> Response:
        return await self.engine.acomplete(request)

    def dump_state(self) -> dict:
        engine = type(self.engine)
        return {"class": f"{engine.__module__}:{engine.__qualname__}", "state": self.engine.dump_state()}

    @classmethod
    def load_state(cls, state: dict) -> AsyncEngine:
        module, _, name = state["class"].partition(":")
        if not module.startswith("multihop.lm.engines."):
            raise ValueError(f"{state['class']} is not one of multihop's engines")
        return cls(getattr(importlib.import_module(module), name).load_state(state["state"]))
