"""The llama.cpp engine: a GGUF file run by ``llama-cpp-python``, decoding under the request's JSON schema.

``llama-cpp-python`` is built from source by the Makefile's set-up (once per virtualenv); ``import multihop`` never
needs it, and :func:`llama_cpp_available` tells whether it is there (:func:`multihop.lm.backends.make_lm` falls back to
the ``transformers`` engine, with a warning, when it is not).

The engine decodes under the request's bounded JSON schema (:class:`~.base.LocalEngine`) with the grammar llama.cpp
derives from it. The model runs on the physical cores, with a context of :data:`MAX_CONTEXT` tokens (SmolLM2's
training context), greedily unless the request asks for a temperature, one call at a time (a lock). Consecutive
prompts that share a prefix (a stage's instructions and demos) reuse its KV state: llama-cpp-python evaluates only
the tokens after the longest common prefix with the previous prompt. A LoRA student runs from its GGUF conversion
(:mod:`~.lora`).

Asked for log-probabilities, the engine records each step of the decode (:class:`StepRecorder`) instead of building
the model with ``logits_all`` (llama-cpp-python's own way, which keeps the logits of every prompt token too: 1.6 GB
at SmolLM2's context): the logits the sampler starts from, before the grammar and the sampling cuts, and the token
sampled from them.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import random
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from dspy.lm15 import TokenLogprob

from .base import Generation, LocalEngine, reusable_prefix, spelling

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
    """A DSPy engine over a GGUF model with llama.cpp, with an optional LoRA adapter in GGUF. ``constrained=False``
    ignores response schemas (and declares none), for comparing with free decoding."""

    def __init__(self, gguf: str | Path, constrained: bool = True, n_threads: int | None = None, seed: int = 0,
                 lora: str | Path | None = None):
        super().__init__(Path(gguf).name, constrained)
        self.gguf, self.lora = Path(gguf), Path(lora) if lora else None
        self.n_threads, self.seed = n_threads, seed
        self._lock = threading.Lock()
        self._model = None

    def _load(self):
        from llama_cpp import Llama

        threads = self.n_threads or physical_cores()
        with plain_weight_buffers():
            self._model = Llama(model_path=str(self.gguf), n_ctx=MAX_CONTEXT, n_threads=threads,
                                n_threads_batch=threads, lora_path=str(self.lora) if self.lora else None,
                                verbose=False)

    def generate(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> Generation:
        options = completion_options(config, max_tokens, schema, self.seed)
        with self._lock:
            if self._model is None:
                self._load()
            previous = self._model.input_ids[: self._model.n_tokens].tolist()
            recorder = StepRecorder(self._model) if config.logprobs is not None else None
            if recorder is None:
                reply = self._model.create_chat_completion(messages=messages, **options)
            else:
                with recorder.recording():
                    reply = self._model.create_chat_completion(messages=messages, logits_processor=[recorder],
                                                               **options)
            prompt = self._model.input_ids[: reply["usage"]["prompt_tokens"]].tolist()
        choice, usage = reply["choices"][0], reply["usage"]
        text = choice["message"]["content"] or ""
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generation(text, finish, usage["prompt_tokens"], reusable_prefix(previous, prompt),
                          usage["completion_tokens"], spelling(recorder.tokens, text) if recorder else None)

    def forget_prefix(self) -> None:
        with self._lock:
            if self._model is not None:
                self._model.reset()

    def close(self) -> None:
        with self._lock:
            if self._model is not None:
                self._model.close()
            self._model = None

    def dump_state(self) -> dict:
        return {"gguf": str(self.gguf), "constrained": self.constrained, "n_threads": self.n_threads,
                "seed": self.seed, "lora": str(self.lora) if self.lora else None}

    @classmethod
    def load_state(cls, state: dict) -> LlamaCppEngine:
        return cls(state["gguf"], constrained=state.get("constrained", True), n_threads=state.get("n_threads"),
                   seed=state.get("seed", 0), lora=state.get("lora"))


class StepRecorder:
    """The log-probability of each token a llama.cpp decode samples: a logits processor keeps the step's logits (the
    sampler applies it first, so they are the model's, before the grammar and the sampling cuts), and the model's
    ``sample``, wrapped while :meth:`recording`, gives the token chosen from them — the one record that has every
    token: the decode does not evaluate its last token, so the model's ``input_ids`` lack it."""

    def __init__(self, model):
        self.model, self.tokens, self._logits = model, [], None

    def __call__(self, input_ids, logits):
        self._logits = np.array(logits, dtype=np.float64)
        return logits

    @contextmanager
    def recording(self):
        sample = self.model.sample

        def sampled(*args, **kwargs):
            token = sample(*args, **kwargs)
            logits, self._logits = self._logits, None
            piece = bytes(self.model.detokenize([token]))
            self.tokens.append(TokenLogprob(token=piece.decode("utf-8", errors="replace"), bytes=tuple(piece),
                                            token_id=int(token),
                                            logprob=float(logits[token] - np.logaddexp.reduce(logits))))
            return token

        self.model.sample = sampled
        try:
            yield self
        finally:
            del self.model.sample


def completion_options(config, max_tokens: int, schema: dict | None, seed: int = 0) -> dict:
    """llama-cpp-python's chat-completion options for a request's ``config``: greedy (the given ``seed``) unless a
    temperature is asked for (then the request's seed or a fresh one), no top-k or min-p cut unless asked, and the
    bounded ``schema`` as the ``response_format`` llama-cpp-python takes (``json_object`` with a ``schema``)."""
    temperature = config.temperature or 0.0
    seed = config.seed if config.seed is not None else seed if not temperature else random.getrandbits(31)
    options = {"max_tokens": max_tokens, "temperature": temperature, "top_p": config.top_p or 1.0,
               "top_k": config.top_k or 0, "min_p": 0.0, "stop": list(config.stop or ()) or None, "seed": seed}
    if schema is not None:
        options["response_format"] = {"type": "json_object", "schema": schema}
    return options


@contextmanager
def plain_weight_buffers():
    """Load a model with its weights in plain CPU buffers (``use_extra_bufts=False``): llama.cpp otherwise repacks
    quantised weights into AMX buffers on CPUs that have AMX, and its AMX matrix product segfaults on the first
    decode on some of them — this machine among them (ggml-org/llama.cpp#20824, open).
    ``Llama`` takes no such argument, so its default model parameters are replaced while it loads, under a lock. Q4_1
    weights (SmolLM2's) have no other repacked layout, so they lose nothing; Q4_0 or Q4_K models lose the AVX
    repacking on such CPUs. Elsewhere, a no-op."""
    if not cpu_has_amx():
        yield
        return
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
