"""The served engine: a local model that ``multihop serve`` runs in another process (llama-cpp-python's
OpenAI-compatible server), reached over HTTP, with the in-process engines' bounded schema decoding.

DSPy's OpenAI wire sends a schema as ``{"type": "json_schema", ...}``, which llama-cpp-python's server refuses; this
engine sends each bounded schema the way that server takes it (``{"type": "json_object", "schema": ...}``), so a
served model parses and ends its replies exactly as the in-process llama.cpp engine does.
"""

from __future__ import annotations

import httpx

from .base import Generation, LocalEngine

SERVED_TIMEOUT = 600.0  # seconds for one generation: a long prompt on a busy 2-core server


def served_model(api_base: str, timeout: float = 10.0) -> str:
    """The name of the model a server at ``api_base`` runs (its first model); ``ValueError`` when none answers."""
    try:
        reply = httpx.get(f"{api_base.rstrip('/')}/models", timeout=timeout)
        reply.raise_for_status()
        return reply.json()["data"][0]["id"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"no model server answers at {api_base} ({exc}); start one with `multihop serve`") from exc


class ServedEngine(LocalEngine):
    """A DSPy engine over the model served at ``api_base`` (``http://127.0.0.1:8000/v1``)."""

    def __init__(self, api_base: str, model: str, constrained: bool = True, timeout: float = SERVED_TIMEOUT):
        super().__init__(model, constrained)
        self.api_base, self.timeout = api_base.rstrip("/"), timeout
        self._client = httpx.Client(timeout=timeout)

    def generate(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> Generation:
        body = {"model": self.name, "messages": messages, "max_tokens": max_tokens,
                "temperature": config.temperature or 0.0, "top_p": config.top_p or 1.0, "top_k": config.top_k or 0,
                "min_p": 0.0, "stop": list(config.stop or ()) or None, "seed": config.seed}
        if schema is not None:
            body["response_format"] = {"type": "json_object", "schema": schema}
        response = self._client.post(f"{self.api_base}/chat/completions", json=body)
        response.raise_for_status()
        reply = response.json()
        choice, usage = reply["choices"][0], reply["usage"]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generation(choice["message"]["content"] or "", finish, usage["prompt_tokens"], cached,
                          usage["completion_tokens"])

    def close(self) -> None:
        self._client.close()

    def dump_state(self) -> dict:
        return {"api_base": self.api_base, "model": self.name, "constrained": self.constrained,
                "timeout": self.timeout}

    @classmethod
    def load_state(cls, state: dict) -> ServedEngine:
        return cls(state["api_base"], state["model"], constrained=state.get("constrained", True),
                   timeout=state.get("timeout", SERVED_TIMEOUT))
