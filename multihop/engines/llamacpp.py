"""The llama.cpp engine: a GGUF file run by ``llama-cpp-python``, decoding under the request's JSON schema.

``llama-cpp-python`` is built from source by the Makefile's set-up (once per virtualenv); ``import multihop`` never
needs it, and :func:`llama_cpp_available` tells whether it is there (:func:`multihop.lms.make_lm` falls back to the
``transformers`` engine, with a warning, when it is not).

The engine declares structured outputs (``supports_response_schema``), so DSPy's ``JSONAdapter`` sends each
signature's JSON schema with the request; the engine bounds every string and list in it so that the longest reply
fits ``max_tokens`` (:func:`~.schema.bounded`) and decodes under the grammar llama.cpp derives from it. A reply then
parses into the declared fields and types and ends when its closing brace is written, not at ``max_tokens``; the
caps assume three characters a token, and a reply that still reaches the cap (a run of one-character tokens, such as
digits) is decoded once more under caps of one character a token, which it cannot outrun unless the schema's smallest
caps (:data:`~.schema.MIN_STRING`, :data:`~.schema.MIN_LIST`) are already longer than the budget. The
model runs on the physical cores, with a context of :data:`MAX_CONTEXT` tokens (SmolLM2's training context),
greedily unless the request asks for a temperature, one call at a time (a lock). Consecutive prompts that share a
prefix (a stage's instructions and demos) reuse its KV state: llama-cpp-python evaluates only the tokens after the
longest common prefix with the previous prompt.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import random
import threading
from contextlib import contextmanager
from pathlib import Path

from dspy.lm15 import Response

from .base import LOCAL_MAX_TOKENS, LocalEngine, chat_messages, make_response
from .schema import CHARS_PER_TOKEN, bounded

logger = logging.getLogger(__name__)
_LOADING = threading.Lock()
MAX_CONTEXT = 8192  # tokens: a stage prompt with five passages and demos is ~2k


@functools.cache
def llama_cpp_available() -> bool:
    """Whether ``llama-cpp-python`` is installed and its library loads (imported once, on the first local LM)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        import llama_cpp  # noqa: F401 - loads libllama
    except (ImportError, OSError) as exc:
        logger.warning("llama-cpp-python is installed but does not load (%s)", exc)
        return False
    return True


def physical_cores() -> int:
    """Physical cores this process may use (its CPU affinity bounds them)."""
    import psutil

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(psutil.cpu_count(logical=False) or usable, usable))


@functools.cache
def cpu_has_amx() -> bool:
    """Whether the CPU has AMX (Linux reports ``amx_int8`` in ``/proc/cpuinfo``)."""
    try:
        return "amx_int8" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


class LlamaCppEngine(LocalEngine):
    """A DSPy engine over a GGUF model with llama.cpp. ``constrained=False`` ignores response schemas (and declares
    none), for comparing with free decoding."""

    supported_params = frozenset({"temperature", "max_tokens", "top_p", "top_k", "stop", "seed", "response_format"})

    def __init__(self, gguf: str | Path, constrained: bool = True, n_threads: int | None = None, seed: int = 0):
        self.gguf = Path(gguf)
        self.constrained, self.n_threads, self.seed = constrained, n_threads, seed
        self.supports_response_schema = constrained
        if not constrained:
            self.supported_params = self.supported_params - {"response_format"}
        self._lock = threading.Lock()
        self._model = None

    def _load(self):
        from llama_cpp import Llama

        threads = self.n_threads or physical_cores()
        with plain_weight_buffers() if cpu_has_amx() else contextlib.nullcontext():
            self._model = Llama(model_path=str(self.gguf), n_ctx=MAX_CONTEXT, n_threads=threads,
                                n_threads_batch=threads, verbose=False)

    def complete(self, request) -> Response:
        config = request.config
        max_tokens = config.max_tokens or LOCAL_MAX_TOKENS
        temperature = config.temperature or 0.0
        seed = config.seed if config.seed is not None else self.seed if not temperature else random.getrandbits(31)
        options = {"max_tokens": max_tokens, "temperature": temperature, "top_p": config.top_p or 1.0,
                   "top_k": config.top_k or 0, "min_p": 0.0, "stop": list(config.stop or ()) or None, "seed": seed}
        schema = response_schema(config.response_format) if self.constrained else None
        formats = [] if schema is None else [bounded(schema, budget)
                                             for budget in (max_tokens, max_tokens // CHARS_PER_TOKEN)]
        if formats and formats[0] == formats[1]:
            formats.pop()  # the smallest caps already: a second decode would be the same
        prompt_tokens = completion_tokens = None
        for format_ in formats or [None]:  # a reply cut at the cap is decoded again under caps of a character a token
            if format_ is not None:
                options["response_format"] = {"type": "json_object", "schema": format_}
            reply = self._generate(chat_messages(request), options)
            choice, usage = reply["choices"][0], reply["usage"]
            prompt_tokens = prompt_tokens or usage["prompt_tokens"]  # the prompt counts once
            completion_tokens = (completion_tokens or 0) + usage["completion_tokens"]
            if choice.get("finish_reason") != "length":
                break
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return make_response(choice["message"]["content"] or "", self.gguf.name, finish, prompt_tokens,
                             completion_tokens)

    def _generate(self, messages: list[dict], options: dict) -> dict:
        with self._lock:
            if self._model is None:
                self._load()
            return self._model.create_chat_completion(messages=messages, **options)

    def close(self) -> None:
        with self._lock:
            if self._model is not None:
                self._model.close()
            self._model = None

    def dump_state(self) -> dict:
        return {"gguf": str(self.gguf), "constrained": self.constrained, "n_threads": self.n_threads,
                "seed": self.seed}

    @classmethod
    def load_state(cls, state: dict) -> LlamaCppEngine:
        return cls(state["gguf"], constrained=state.get("constrained", True), n_threads=state.get("n_threads"),
                   seed=state.get("seed", 0))


@contextmanager
def plain_weight_buffers():
    """Load a model with its weights in plain CPU buffers (``use_extra_bufts=False``): llama.cpp otherwise repacks
    quantised weights into AMX buffers on CPUs that have AMX, and its AMX matrix product segfaults on the first
    decode on some of them — this machine among them (ggml-org/llama.cpp#20824, open). Used only on CPUs with AMX.
    ``Llama`` takes no such argument, so its default model parameters are replaced while it loads, under a lock. Q4_1
    weights (SmolLM2's) have no other repacked layout, so they lose nothing; Q4_0 or Q4_K models lose the AVX
    repacking on such CPUs."""
    import llama_cpp.llama_cpp as bindings

    defaults = bindings.llama_model_default_params

    def plain():
        params = defaults()
        params.use_extra_bufts = False
        return params

    with _LOADING:
        bindings.llama_model_default_params = plain
        try:
            yield
        finally:
            bindings.llama_model_default_params = defaults


def response_schema(response_format: dict | None) -> dict | None:
    """The JSON schema a request's ``response_format`` asks for (``{"type": "json_schema", "schema": ...}``), or None
    for free text or plain JSON mode."""
    if not response_format or response_format.get("type") != "json_schema":
        return None
    return response_format.get("schema")
