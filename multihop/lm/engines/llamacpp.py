"""The llama.cpp engine: a GGUF file run by ``llama-cpp-python``, decoding under the request's JSON schema.

``llama-cpp-python`` is built from source by the Makefile's set-up (once per virtualenv); ``import multihop`` never
needs it, and :func:`llama_cpp_available` tells whether it is there (:func:`multihop.lm.backends.make_lm` falls back to
the ``transformers`` engine, with a warning, when it is not).

The engine decodes under the request's bounded JSON schema (:class:`~.local_engine.LocalEngine`) with llguidance's
token masks (:mod:`~.llamacpp_sampler`, which says why not llama.cpp's own grammar, and when that is the fallback):
greedily unless the request asks for a temperature, then sampling from the masked distribution. The model runs on the
physical cores, with a context of :data:`MAX_CONTEXT` tokens (SmolLM2's training context), one call at a time (a lock).
A LoRA student runs from its GGUF conversion (:mod:`~.lora`).

Each stage's fixed part — its instructions, field descriptions and demos, which DSPy's adapters write before the
question's own inputs — is evaluated once, not once a call: the engine keeps the KV state after each of its last calls
in a prefix cache (:func:`prefix_cache_class`: llama-cpp-python's ``LlamaRAMCache``, keyed by the tokens evaluated: a
completion's, or with ``prompt_gguf`` a prompt's, :mod:`~.llamacpp_prompt`), and a prompt starts from the state with
which it shares the longest prefix, whichever stage ran last. A program whose stages alternate evaluates each call's own
suffix only. The key is the tokens themselves, so a changed prompt (other demos or instructions after compiling) never
reuses a stale state; the cache holds at most ``prefix_cache_bytes`` of KV states (default
:data:`~.local_engine.PREFIX_CACHE_BYTES`), the least recently used dropped first.

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

from .local_engine import PREFIX_CACHE_BYTES, Generation, LocalEngine, reusable_prefix, spelling

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
    ignores response schemas (and declares none), for comparing with free decoding; ``prefix_cache_bytes`` bounds the
    KV states kept for the stages' prompts (0: only the last call's, as llama-cpp-python keeps it); ``prompt_gguf``,
    the same model in weights a second context evaluates the prompts with (:mod:`~.llamacpp_prompt`)."""

    def __init__(self, gguf: str | Path, constrained: bool = True, n_threads: int | None = None, seed: int = 0,
                 lora: str | Path | None = None, prefix_cache_bytes: int = PREFIX_CACHE_BYTES,
                 prompt_gguf: str | Path | None = None):
        super().__init__(Path(gguf).name, constrained)
        self.gguf, self.lora = Path(gguf), Path(lora) if lora else None
        self.prompt_gguf = Path(prompt_gguf) if prompt_gguf else None
        self.n_threads, self.seed, self.prefix_cache_bytes = n_threads, seed, prefix_cache_bytes
        self._lock = threading.Lock()
        self._model = None

    def _load(self):
        from .llamacpp_prompt import PROMPT_BATCH, prompt_llama_class, prompted_llama_class

        threads, lora = self.n_threads or physical_cores(), str(self.lora) if self.lora else None
        with plain_weight_buffers():  # both built before either is kept: a failure leaves no model half set up
            model = prompted_llama_class()(model_path=str(self.gguf), n_ctx=MAX_CONTEXT, n_threads=threads,
                                           n_threads_batch=threads, lora_path=lora, verbose=False)
            if self.prompt_gguf:
                model.prompts = prompt_llama_class()(
                    model_path=str(self.prompt_gguf), n_ctx=MAX_CONTEXT, n_threads=threads, n_threads_batch=threads,
                    n_batch=PROMPT_BATCH, n_ubatch=PROMPT_BATCH, flash_attn=True, lora_path=lora, verbose=False)
        if self.prefix_cache_bytes:
            (model if model.prompts is None else model.prompts).set_cache(prefix_cache_class()(self.prefix_cache_bytes))
        self._model = model

    def generate(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> Generation:
        options = completion_options(config, max_tokens, schema, self.seed)
        with self._lock:
            if self._model is None:
                self._load()
            prompts = self._model.prompts
            if prompts is None:  # the sequences the prompt may start from: the last call's, every state cached
                starts = [self._model.input_ids[: self._model.n_tokens].tolist(), *self._cached_sequences()]
            else:  # the prompt context counts what it reuses (a one-token prompt is the decoding model's alone)
                prompts.reused = 0
            recorder = StepRecorder(self._model) if config.logprobs is not None else None
            if recorder is None:
                reply = self._model.create_chat_completion(messages=messages, **options)
            else:
                with recorder.recording():
                    reply = self._model.create_chat_completion(messages=messages, logits_processor=[recorder],
                                                               **options)
            if prompts is None:
                prompt = self._model.input_ids[: reply["usage"]["prompt_tokens"]].tolist()
                reused = max(reusable_prefix(start, prompt) for start in starts)
            else:
                reused = prompts.reused
        choice, usage = reply["choices"][0], reply["usage"]
        text = choice["message"]["content"] or ""
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Generation(text, finish, usage["prompt_tokens"], reused, usage["completion_tokens"],
                          spelling(recorder.tokens, text) if recorder else None)

    def _cached_sequences(self) -> list[tuple[int, ...]]:
        cache = self._model.cache
        return list(cache.cache_state) if cache is not None else []

    def forget_prefix(self) -> None:
        with self._lock:
            for model in (self._model, self._model.prompts) if self._model is not None else ():
                if model is not None:
                    model.reset()
                    if model.cache is not None:
                        model.cache.cache_state.clear()

    def close(self) -> None:
        with self._lock:
            if self._model is not None:
                if self._model.prompts is not None:
                    self._model.prompts.close()
                self._model.close()
            self._model = None

    def dump_state(self) -> dict:
        return {"gguf": str(self.gguf), "constrained": self.constrained, "n_threads": self.n_threads,
                "seed": self.seed, "lora": str(self.lora) if self.lora else None,
                "prefix_cache_bytes": self.prefix_cache_bytes,
                "prompt_gguf": str(self.prompt_gguf) if self.prompt_gguf else None}

    @classmethod
    def load_state(cls, state: dict) -> LlamaCppEngine:
        return cls(state["gguf"], constrained=state.get("constrained", True), n_threads=state.get("n_threads"),
                   seed=state.get("seed", 0), lora=state.get("lora"),
                   prefix_cache_bytes=state.get("prefix_cache_bytes", PREFIX_CACHE_BYTES),
                   prompt_gguf=state.get("prompt_gguf"))


@functools.cache
def prefix_cache_class() -> type:
    """The class of the engine's prefix cache, defined on first use (llama-cpp-python is imported by a local LM only):
    llama-cpp-python's RAM cache of KV states, keyed by the tokens each holds — llama-cpp-python saves one after every
    completion and, for a new prompt, loads the one sharing the longest prefix with it when that is longer than what
    the model's current state shares (a :mod:`~.llamacpp_prompt` context: one a prompt) — bounded by the bytes of the
    states kept. A state is kept without the logits llama-cpp-python copies into it (an ``n_batch`` × vocabulary
    array, 100 MB for SmolLM2, which a model built without ``logits_all`` never writes): a prompt started from a state
    evaluates at least its last token, which gives the logits the reply starts from."""
    from llama_cpp import LlamaRAMCache

    class PrefixCache(LlamaRAMCache):
        def __setitem__(self, key, value):
            value.scores = np.zeros_like(value.scores[:1])  # load_state broadcasts the row over the rows it fills
            super().__setitem__(key, value)

    return PrefixCache


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
    ``Llama`` takes no such argument, so its default model parameters are replaced while it loads, under a lock.
    Float32 and Q4_1 weights (SmolLM2's as it runs and as it ships) have no repacked layout, so they lose nothing;
    Q4_0 or Q4_K models lose the AVX repacking on such CPUs. Elsewhere, a no-op."""
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
