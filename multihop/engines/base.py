"""What the local engines share: the chat messages of a DSPy request, decoding under its bounded JSON schema, the
response with its token usage, and streaming."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from .schema import decoding_plan

LOCAL_MAX_TOKENS = 128  # a local engine's generation cap when neither the LM nor the request sets one
REQUEST_PARAMS = frozenset({"temperature", "max_tokens", "top_p", "top_k", "stop", "seed"})


def chat_messages(request) -> list[dict]:
    """The request as chat messages (``role``, ``content``): its system text first, then its turns."""
    messages = []
    if request.system:
        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
        messages.append({"role": "system", "content": system})
    messages.extend({"role": m.role, "content": m.text or ""} for m in request.messages)
    return messages


def reusable_prefix(previous: Sequence[int], prompt: Sequence[int]) -> int:
    """The prompt tokens whose KV state an engine takes from the ``previous`` sequence's: their common prefix, less
    the prompt's last token, which is always evaluated (its logits start the reply)."""
    return min(len(os.path.commonprefix([list(previous), list(prompt)])), max(len(prompt) - 1, 0))


class Generation(NamedTuple):
    """One decode: its text, why it ended (``stop`` or ``length``), and its tokens — the prompt's, those of the
    prompt read from the engine's prefix cache instead of evaluated, and the new ones."""

    text: str
    finish: str
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


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
    """

    def __init__(self, name: str, constrained: bool = True):
        self.name, self.constrained = name, constrained
        self.supports_response_schema = constrained
        self.supported_params = REQUEST_PARAMS | ({"response_format"} if constrained else set())

    def generate(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> Generation:
        raise NotImplementedError

    def forget_prefix(self) -> None:
        """Drop the KV state kept from the last call, so the next prompt is evaluated whole (for measuring)."""

    def complete(self, request) -> Response:
        config = request.config
        max_tokens = config.max_tokens or LOCAL_MAX_TOKENS
        plan = decoding_plan(config.response_format, max_tokens) if self.constrained else [(None, max_tokens)]
        messages, first, completion_tokens = chat_messages(request), None, 0
        for schema, budget in plan:
            generation = self.generate(messages, config, budget, schema)
            if first is None:
                first = generation
            completion_tokens += generation.completion_tokens
            if generation.finish != "length":
                break
        usage = Usage(input_tokens=first.prompt_tokens, output_tokens=completion_tokens,
                      cache_read_tokens=first.cached_tokens)
        return Response(id=None, model=self.name, message=Message.assistant((TextPart(generation.text),)),
                        finish_reason=generation.finish, usage=usage)

    def stream(self, request):
        return response_to_events(self.complete(request))
