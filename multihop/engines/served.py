"""The served engine: a local model that ``multihop serve`` runs in another process (llama-cpp-python's
OpenAI-compatible server), reached over HTTP, with the in-process engines' bounded schema decoding.

DSPy's OpenAI wire sends a schema as ``{"type": "json_schema", ...}``, which llama-cpp-python's server refuses; this
engine sends each bounded schema the way that server takes it (``{"type": "json_object", "schema": ...}``), with the
in-process engine's sampling options, so a served model parses and ends its replies as the in-process llama.cpp
engine does. The server does not report the prompt tokens it reused, so served calls count none.
"""

from __future__ import annotations

import httpx
from dspy.utils.exceptions import (
    LMInvalidRequestError,
    LMRateLimitError,
    LMServerError,
    LMTimeoutError,
    LMTransportError,
)

from .base import Generation, LocalEngine
from .llamacpp import completion_options


def key_headers(api_key: str | None) -> dict:
    """The bearer header a keyed server (``multihop serve --api-key``) wants, or none."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def served_model(api_base: str, timeout: float = 10.0, api_key: str | None = None) -> str:
    """The name of the model a server at ``api_base`` runs (its first model); ``ValueError`` when none answers."""
    try:
        reply = httpx.get(f"{api_base.rstrip('/')}/models", timeout=timeout, headers=key_headers(api_key))
        reply.raise_for_status()
        return reply.json()["data"][0]["id"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"no model server answers at {api_base} ({exc}); start one with `multihop serve`") from exc


class ServedEngine(LocalEngine):
    """A DSPy engine over the model served at ``api_base`` (``http://127.0.0.1:8000/v1``); a request may take
    ``timeout`` seconds. Failures are DSPy's LM errors — a timeout, an unreachable server, HTTP 429 and 5xx being the
    ones DSPy retries."""

    def __init__(self, api_base: str, model: str, timeout: float, constrained: bool = True,
                 api_key: str | None = None):
        super().__init__(model, constrained)
        self.api_base, self.timeout = api_base.rstrip("/"), timeout
        self._client = httpx.Client(timeout=timeout, headers=key_headers(api_key))  # the key stays out of the state

    def generate(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> Generation:
        body = {"model": self.name, "messages": messages, **completion_options(config, max_tokens, schema)}
        try:
            response = self._client.post(f"{self.api_base}/chat/completions", json=body)
        except httpx.TimeoutException as exc:
            raise LMTimeoutError(f"the model server at {self.api_base} gave no reply in {self.timeout:g} s",
                                 model=self.name) from exc
        except httpx.TransportError as exc:
            raise LMTransportError(f"the model server at {self.api_base} is unreachable ({exc})",
                                   model=self.name) from exc
        if response.is_error:
            kind = LMRateLimitError if response.status_code == 429 else (
                LMServerError if response.status_code >= 500 else LMInvalidRequestError)
            raise kind(f"the model server at {self.api_base} answered {response.status_code}: {response.text[:500]}",
                       model=self.name)
        reply = response.json()
        choice, usage = reply["choices"][0], reply["usage"]
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        # the server reuses the prompt prefix too, but does not report how much
        return Generation(choice["message"]["content"] or "", finish, usage["prompt_tokens"], 0,
                          usage["completion_tokens"])

    def close(self) -> None:
        self._client.close()

    def dump_state(self) -> dict:
        return {"api_base": self.api_base, "model": self.name, "constrained": self.constrained,
                "timeout": self.timeout}

    @classmethod
    def load_state(cls, state: dict) -> ServedEngine:
        return cls(state["api_base"], state["model"], state["timeout"], constrained=state.get("constrained", True))
