"""A scripted LM for tests: a ``dspy.LM`` over an engine that answers from a function and reports token usage."""

from __future__ import annotations

from collections.abc import Callable

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage


class ScriptedEngine:
    """Answers ``respond(prompt_text) -> {field: value}`` in the ChatAdapter format; usage = words in / words out."""

    def __init__(self, respond: Callable[[str], dict]):
        self.respond, self.requests = respond, []

    def complete(self, request) -> Response:
        prompt = (request.system or "") + "\n".join(m.text or "" for m in request.messages)
        self.requests.append(prompt)
        fields = self.respond(prompt)
        text = "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in fields.items()) + "[[ ## completed ## ]]"
        return Response(id=None, model="scripted", message=Message.assistant((TextPart(text),)), finish_reason="stop",
                        usage=Usage(input_tokens=len(prompt.split()), output_tokens=len(text.split())))

    def close(self):
        pass


def scripted_lm(respond: Callable[[str], dict], name: str = "scripted", cache: bool = True
                ) -> tuple[dspy.LM, ScriptedEngine]:
    """``cache=False`` makes every call reach ``respond``, for scripts whose replies change between identical
    prompts (a verdict that fails, then passes)."""
    engine = ScriptedEngine(respond)
    return dspy.LM(f"local/{name}", engine=engine, cache=cache), engine
