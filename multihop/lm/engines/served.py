"""The served engine: a model another process serves over the OpenAI chat API — ``multihop serve`` (llama-cpp-python's
server), vLLM, SGLang or any OpenAI-compatible endpoint — reached over HTTP, with the in-process engines' bounded schema
decoding (:class:`~.local_engine.LocalEngine`: every stage's schema bounded to its budget, one retry under tighter caps,
the budget raised to what the schema needs).

Servers take a schema in one of two forms (``schema_form``):

- ``json_schema``: ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``, the OpenAI form that vLLM
  and SGLang take (guided decoding); with the OpenAI sampling options only. OpenAI's own strict mode may refuse the
  caps (``maxLength``) the bounded schema adds: that refusal is the line below, and ``--structured off`` runs it
  through DSPy's own structured outputs.
- ``json_object``: ``{"type": "json_object", "schema": ...}``, the form llama-cpp-python's server takes (it refuses
  the other), with the in-process llama.cpp engine's sampling options, so a model ``multihop serve`` runs parses and
  ends its replies as the in-process engine does.

A server that refuses the schema (HTTP 400, 422 or 500 naming the response format or the grammar) raises
:class:`StructuredOutputRefused`, one line naming ``--structured off``. A request that asks for token log-probabilities
(``Config.logprobs``) sends the OpenAI ``logprobs`` (and ``top_logprobs``) options and hands on the ``logprobs.content``
the server answers (vLLM and SGLang give them; a server that refuses them raises
:class:`~.local_engine.LogprobsUnavailable`, one that ignores them gives a response without them). Servers do not report
the prompt tokens they reused, so served calls count none. Calls are safe from many threads (one ``httpx`` client,
pooled) and from asyncio (:meth:`ServedEngine.acomplete`, one async client per event loop).
"""

from __future__ import annotations

import asyncio
import threading
import weakref

import httpx
from dspy.clients._http import retry_after_seconds as dspy_retry_after
from dspy.lm15 import TokenLogprob, TopLogprob
from dspy.utils.exceptions import (
    LMInvalidRequestError,
    LMRateLimitError,
    LMServerError,
    LMTimeoutError,
    LMTransportError,
    LMUnsupportedFeatureError,
)

from .llamacpp import completion_options
from .local_engine import Generation, LocalEngine, LogprobsUnavailable, chat_messages
from .schema import SCHEMA_FORMS, wire_response_format

OTHER_FORM = {"json_schema": " or --structured json_object (llama-cpp-python's form)",
              "json_object": " or --structured json_schema (vLLM's and SGLang's form)"}
POOL = httpx.Limits(max_connections=256, max_keepalive_connections=256)  # many questions and their fan-outs at once
_REFUSAL_WORDS = ("response_format", "json_schema", "grammar", "guided")  # not "schema": a prompt echo has it


class StructuredOutputRefused(LMUnsupportedFeatureError):
    """The server does not take the schema a stage sent: the run stops with one line saying what to change."""


def key_headers(api_key: str | None) -> dict:
    """The bearer header a keyed server (``multihop serve --api-key``, vLLM ``--api-key``) wants, or none."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def served_model(api_base: str, timeout: float = 10.0, api_key: str | None = None) -> str:
    """The name of the model a server at ``api_base`` runs (its first model); ``ValueError`` when none answers."""
    try:
        reply = httpx.get(f"{api_base.rstrip('/')}/models", timeout=timeout, headers=key_headers(api_key))
        reply.raise_for_status()
        return reply.json()["data"][0]["id"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"no model server answers at {api_base} ({exc}); start one with `multihop serve`") from exc


RETRY_AFTER_LIMIT = 60.0  # seconds: the longest wait a Retry-After gets (DSPy's own backoff stops growing there too)


def retry_after_seconds(header: str | None) -> float | None:
    """The seconds a ``Retry-After`` header asks a client to wait (seconds or an HTTP date, read as DSPy reads it),
    at most :data:`RETRY_AFTER_LIMIT`; DSPy's retry then waits that long instead of its own backoff. None when it is
    absent or unreadable."""
    seconds = dspy_retry_after(header)
    return None if seconds is None else min(seconds, RETRY_AFTER_LIMIT)


def openai_options(config, max_tokens: int, schema: dict | None) -> dict:
    """The OpenAI chat-completion options of a request's ``config`` (greedy unless it asks for a temperature; no
    option a plain OpenAI endpoint would refuse unless the request set it), with the bounded ``schema`` in the
    ``json_schema`` form."""
    options = {"max_tokens": max_tokens, "temperature": config.temperature or 0.0}
    for name in ("top_p", "top_k", "seed"):
        if getattr(config, name) is not None:
            options[name] = getattr(config, name)
    if config.stop:
        options["stop"] = list(config.stop)
    if schema is not None:
        options["response_format"] = wire_response_format(schema, "json_schema")
    return options


def token_logprob(entry: dict) -> TokenLogprob:
    """One entry of an OpenAI ``logprobs.content`` list (token, logprob, bytes, top_logprobs) as DSPy's type."""
    def raw(item: dict):
        return tuple(item["bytes"]) if item.get("bytes") is not None else None

    top = tuple(TopLogprob(token=alt["token"], logprob=float(alt["logprob"]), bytes=raw(alt))
                for alt in entry.get("top_logprobs") or ())
    return TokenLogprob(token=entry["token"], logprob=float(entry["logprob"]), bytes=raw(entry), top=top)


class ServedEngine(LocalEngine):
    """A DSPy engine over the model ``model`` served at ``api_base`` (``http://127.0.0.1:8000/v1``), sending each
    bounded schema in ``schema_form`` (``json_object``: ``multihop serve``; ``json_schema``: vLLM, SGLang); a
    request may take ``timeout`` seconds. Failures are DSPy's LM errors — a timeout, an unreachable server, HTTP 429
    and 5xx being the ones DSPy retries — and :class:`StructuredOutputRefused`."""

    in_process = False
    ranked_alternatives = True

    def __init__(self, api_base: str, model: str, timeout: float, constrained: bool = True,
                 api_key: str | None = None, schema_form: str = "json_object"):
        if schema_form not in SCHEMA_FORMS:
            raise ValueError(f"unknown schema form {schema_form!r}; choose one of {', '.join(SCHEMA_FORMS)}")
        super().__init__(model, constrained)
        self.api_base, self.timeout, self.schema_form = api_base.rstrip("/"), timeout, schema_form
        self._headers = key_headers(api_key)  # the key stays out of the state
        self._client = httpx.Client(timeout=timeout, headers=self._headers, limits=POOL)
        weakref.finalize(self, self._client.close)  # its pooled connections close with it, or at exit
        self._async_clients: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}
        self._lock = threading.Lock()

    def body(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> dict:
        options = (openai_options if self.schema_form == "json_schema" else completion_options)(
            config, max_tokens, schema)
        if config.logprobs is not None:
            # top_logprobs always, 0 included: llama-cpp-python's server returns logprobs only when it is given
            options.update(logprobs=True, top_logprobs=config.logprobs)
        return {"model": self.name, "messages": messages, **options}

    def generate(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> Generation:
        try:
            response = self._client.post(f"{self.api_base}/chat/completions",
                                         json=self.body(messages, config, max_tokens, schema))
        except httpx.HTTPError as exc:
            raise self.transport_error(exc) from exc
        return self.generation(response, schema, config.logprobs is not None)

    async def acomplete(self, request):
        messages, generations = chat_messages(request), []
        client = self._async_client()
        for schema, budget in self.plan(request):
            try:
                response = await client.post(f"{self.api_base}/chat/completions",
                                             json=self.body(messages, request.config, budget, schema))
            except httpx.HTTPError as exc:
                raise self.transport_error(exc) from exc
            generations.append(self.generation(response, schema, request.config.logprobs is not None))
            if generations[-1].finish != "length":
                break
        return self.response(generations)

    def _async_client(self) -> httpx.AsyncClient:
        """The async client of the running event loop (an httpx client is bound to the loop that opened it)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for key in [key for key, (owner, _) in self._async_clients.items() if owner.is_closed()]:
                del self._async_clients[key]
            if id(loop) not in self._async_clients:
                client = httpx.AsyncClient(timeout=self.timeout, headers=self._headers, limits=POOL)
                self._async_clients[id(loop)] = (loop, client)
            return self._async_clients[id(loop)][1]

    def transport_error(self, exc: httpx.HTTPError) -> Exception:
        if isinstance(exc, httpx.TimeoutException):
            return LMTimeoutError(f"the model server at {self.api_base} gave no reply in {self.timeout:g} s",
                                  model=self.name)
        return LMTransportError(f"the model server at {self.api_base} is unreachable ({exc})", model=self.name)

    def generation(self, response: httpx.Response, schema: dict | None, logprobs: bool = False) -> Generation:
        """A server's answer as a :class:`~.local_engine.Generation` (with the token log-probabilities it gives when
        they were asked for), or the LM error it means."""
        if response.is_error:
            text = response.text[:500]
            if logprobs and response.status_code in (400, 422, 500) and "logprobs" in text.lower():
                raise LogprobsUnavailable(
                    f"the model server at {self.api_base} does not return token log-probabilities (HTTP "
                    f"{response.status_code}: {' '.join(text.split())[:200]}): serve the model with vLLM or SGLang, "
                    "or run it in-process (--lm local:<model> without --api-base)", model=self.name)
            # llama-cpp-python's server answers a form it does not take with a 500 naming the response format
            if schema is not None and response.status_code in (400, 422, 500) and any(
                    word in text.lower() for word in _REFUSAL_WORDS):
                raise StructuredOutputRefused(
                    f"the model server at {self.api_base} refused the stage's JSON schema in the {self.schema_form} "
                    f"form (HTTP {response.status_code}: {' '.join(text.split())[:200]}): run with --structured off "
                    f"(free decoding){OTHER_FORM[self.schema_form]}", model=self.name)
            kind = LMRateLimitError if response.status_code == 429 else (
                LMServerError if response.status_code >= 500 else LMInvalidRequestError)
            raise kind(f"the model server at {self.api_base} answered {response.status_code}: {text}",
                       model=self.name, status=response.status_code,
                       retry_after=retry_after_seconds(response.headers.get("retry-after")))
        reply = response.json()
        choice, usage = reply["choices"][0], reply.get("usage") or {}
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        scored = (choice.get("logprobs") or {}).get("content") if logprobs else None
        return Generation(choice["message"].get("content") or "", finish, usage.get("prompt_tokens", 0), 0,
                          usage.get("completion_tokens", 0), tuple(map(token_logprob, scored)) if scored else None)

    def close(self) -> None:
        self._client.close()

    def dump_state(self) -> dict:
        return {"api_base": self.api_base, "model": self.name, "constrained": self.constrained,
                "timeout": self.timeout, "schema_form": self.schema_form}

    @classmethod
    def load_state(cls, state: dict) -> ServedEngine:
        return cls(state["api_base"], state["model"], state["timeout"], constrained=state.get("constrained", True),
                   schema_form=state.get("schema_form", "json_object"))
