"""What the local engines share: the chat messages of a DSPy request, the response they return, and streaming."""

from __future__ import annotations

from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

LOCAL_MAX_TOKENS = 128  # a local engine's generation cap when neither the LM nor the request sets one


def chat_messages(request) -> list[dict]:
    """The request as chat messages (``role``, ``content``): its system text first, then its turns."""
    messages = []
    if request.system:
        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
        messages.append({"role": "system", "content": system})
    messages.extend({"role": m.role, "content": m.text or ""} for m in request.messages)
    return messages


def make_response(text: str, model: str, finish: str, prompt_tokens: int, completion_tokens: int) -> Response:
    """A DSPy response carrying ``text`` and its token usage."""
    return Response(id=None, model=model, message=Message.assistant((TextPart(text),)), finish_reason=finish,
                    usage=Usage(input_tokens=int(prompt_tokens), output_tokens=int(completion_tokens)))


class LocalEngine:
    """The base of the local engines: a subclass defines ``complete(request) -> Response``; streaming replays it."""

    def complete(self, request) -> Response:
        raise NotImplementedError

    def stream(self, request):
        return response_to_events(self.complete(request))
