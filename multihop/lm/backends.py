"""Language-model backends (docs/design.md, "LM backends").

``make_lm(spec)`` returns a ``dspy.LM``:

- ``local:smollm2`` (the embedded default), ``local:<HF folder | .gguf file>`` or ``local:<org/name[@revision]>`` (a
  Hugging Face Hub model, when no such path exists: an HF folder in huggingface_hub's cache, downloaded there when
  online, :func:`multihop.lm.models.hub_snapshot`), optionally with a LoRA ``adapter`` folder: a local engine behind
  ``dspy.LM(engine=...)`` (:mod:`multihop.lm.engines`). Both engines decode under each signature's bounded JSON schema
  (``constrained``, the default), so every reply parses and ends when its fields are written, and both reuse the KV
  state of a prompt prefix shared with the previous call. ``engine="auto"`` runs a GGUF model on llama.cpp
  (:class:`~multihop.lm.engines.LlamaCppEngine`, the faster decoder; a PEFT adapter is converted to a GGUF LoRA once)
  when ``llama-cpp-python`` is installed, and on ``transformers`` otherwise
  (:class:`~multihop.lm.engines.TransformersEngine`: HF folders, Hub models among them, GPUs). DSPy's outer LM layer
  owns the request cache (an identical request is never generated twice), retries, history, callbacks and usage
  tracking; the model string ``local/<name>[@<commit>][-llamacpp]-<checksum>[-lora<checksum>][-json<policy>]`` keys the
  cache by the engine, the decoding and the exact weights (a Hub model's commit) and adapter. Generation is capped at
  :data:`~multihop.lm.defaults.LOCAL_MAX_TOKENS` (128) unless ``max_tokens`` is given.
- ``local:<name>`` with ``api_base``: that model as ``multihop serve`` runs it there (:mod:`multihop.lm.serving`; a
  server running another model is refused), decoded as the in-process llama.cpp engine decodes it
  (:class:`~multihop.lm.engines.served.ServedEngine`).
- anything else: a ``dspy.LM`` model string (``openai/gpt-4o-mini``, ``hosted_vllm/...``, ``ollama_chat/...``) with
  optional ``api_base`` / ``api_key`` for OpenAI-compatible servers. With structured outputs on (``structured``:
  ``auto`` turns them on for ``hosted_vllm/`` and for ``openai/`` with an ``api_base``), the model is reached over
  the OpenAI chat API by :class:`~multihop.lm.engines.served.ServedEngine`, which sends every stage's bounded JSON
  schema (``json_schema``, the form vLLM and SGLang take; ``json_object``, llama-cpp-python's), so served replies
  parse and end within their budget as local ones do; the model string ``<spec>-<form><policy>`` keys DSPy's cache
  by the decoding. Without them, DSPy's own LiteLLM/native engine decodes freely. Generation is capped at
  :data:`~multihop.lm.defaults.DEFAULT_MAX_TOKENS` (384) unless ``max_tokens`` is given.

The same decoding without ``make_lm``: any ``dspy.LM`` on an OpenAI-compatible server under
``multihop.BoundedJSONAdapter`` (:mod:`multihop.lm.adapter`) sends the same bounded schemas from the adapter, with the
same caps, retry and raised budgets; ``make_lm``/``configure_lm`` are the conveniences that pick the engine, the
model string that keys the cache, the timeout and retries, and the adapter
(:func:`multihop.lm.adapter.default_adapter`; :func:`spec_adapter` tells it from a spec without building the LM). An
LM on one of our engines configured without an adapter still runs a program's stages under that adapter
(``MultihopProgram.run_stage``); a stage reaching a constrained engine in the ChatAdapter's format anyway warns once.
The defaults (the LM, the caps, the engine, the decoding, the timeout) are :mod:`multihop.lm.defaults`'.

Every LM built on one of our engines also has its async twin (``async_engine``), so ``await lm.acall(...)`` and
``await program.acall(...)`` reach the same engine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import NamedTuple

import dspy
from dspy.lm15 import Config, Message, Request

from multihop.data.folders import verify_inventory
from multihop.lm import models
from multihop.lm.adapter import choose_adapter, default_adapter
from multihop.lm.defaults import (
    DEFAULT_ENGINE,
    DEFAULT_LM,
    DEFAULT_LM_TIMEOUT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_STRUCTURED,
    LM_TIMEOUT_ENV,
    LOCAL_ENGINES,
    LOCAL_MAX_TOKENS,
    STRUCTURED,
)
from multihop.lm.engines import LlamaCppEngine, ServedEngine, TransformersEngine, llama_cpp_available
from multihop.lm.engines.local_engine import AsyncEngine, LocalEngine
from multihop.lm.engines.lora import gguf_lora
from multihop.lm.engines.schema import POLICY
from multihop.lm.engines.served import served_model

RETRIES = 2  # retries of a served LM's request that timed out or got HTTP 429/5xx (DSPy backs off between them)
CONFIG_FIELDS = frozenset(field.name for field in dataclasses.fields(Config))
WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "multihop.json")
STUDENT_MANIFEST = "distill.json"  # what `multihop distill` writes beside its adapter
SCHEMA_PROVIDERS = ("hosted_vllm",)  # providers `auto` sends schemas to (and openai/ given an api_base)
OPENAI_API_BASE = "https://api.openai.com/v1"

logger = logging.getLogger(__name__)


def _fingerprint(*folders: Path | None) -> str:
    """A short checksum of the weights of HF and adapter folders that keys DSPy's cache: each weight file's name, size
    and first MiB."""
    digest = hashlib.sha256()
    for folder in filter(None, folders):
        for file in [folder / name for name in WEIGHT_FILES]:
            if file.exists():
                digest.update(f"{file.name}:{file.stat().st_size}".encode())
                with open(file, "rb") as fh:
                    digest.update(fh.read(1 << 20))
    return digest.hexdigest()[:12]


def local_gguf(target: str) -> Path | None:
    """The GGUF file of a local target (a registry LM shipped as GGUF, or a ``.gguf`` path), or None (an HF folder, a
    Hub model among them: a Hub repository of GGUF files is not run from the Hub)."""
    if target in models.REGISTRY and models.REGISTRY[target].layout == "gguf":
        return models.resolve(target)
    path = Path(target).expanduser()
    return path if path.suffix == ".gguf" else None


def local_name(target: str) -> str:
    """A local target's short name: a registry name as it is, a Hub model's name (without its organisation and
    revision), a path's file or folder name without its suffix."""
    if target in models.REGISTRY:
        return target
    return target.partition("@")[0].rpartition("/")[2] if models.is_hub_id(target) else Path(target).stem


class LlamaCppWeights(NamedTuple):
    """What llama.cpp runs for a local GGUF target: the GGUF it decodes with (and evaluates prompts with, unless
    ``prompt_gguf``), the GGUF a second context evaluates prompts with, or None, the adapter converted to a GGUF LoRA
    (or None), and the name that identifies them, which keys DSPy's cache and names a served model."""

    gguf: Path
    prompt_gguf: Path | None
    lora: Path | None
    identity: str


def llamacpp_weights(target: str, adapter: Path | None = None, split_prompts: bool = False) -> LlamaCppWeights:
    """The GGUF files llama.cpp runs for a local GGUF target: a registry model's
    :func:`~multihop.lm.models.llamacpp_gguf` (with ``split_prompts``, when that is a conversion: the shipped file
    decodes and the conversion evaluates the prompts, :mod:`multihop.lm.engines.llamacpp_prompt`), a path's own file.
    The identity is ``<name>-llamacpp-<checksum>[-<type>[prompts]][-lora<checksum>]``, the type the registry model runs
    as (its prompts only) when not the shipped one."""
    spec = models.REGISTRY.get(target)
    gguf = models.llamacpp_gguf(target) if spec else local_gguf(target)
    sha = spec.sha256 if spec else models.sha256_file(gguf)
    lora = gguf_lora(adapter, gguf, sha) if adapter is not None else None
    converted = spec is not None and bool(spec.llamacpp_type)
    weights = f"-{spec.llamacpp_type}{'prompts' if split_prompts else ''}" if converted else ""
    identity = f"{local_name(target)}-llamacpp-{sha[:12]}{weights}{f'-lora{lora.stem[:12]}' if lora else ''}"
    if converted and split_prompts:
        return LlamaCppWeights(local_gguf(target), gguf, lora, identity)
    return LlamaCppWeights(gguf, None, lora, identity)


def resolve_local(target: str) -> Path:
    """A registry name, a path (HF folder or ``.gguf``) or a Hub id (``org/name[@revision]``, when no such path
    exists) → a Hugging Face folder (a Hub model's: its snapshot in huggingface_hub's cache)."""
    if target in models.REGISTRY:
        return models.hf_folder(target)
    if models.is_hub_id(target):
        path = models.hub_snapshot(target)[0]
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"the Hub model {target!r} has no config.json: local: runs transformers models "
                                    "from the Hub (for a GGUF repository, download its .gguf file and give its path)")
        return path
    path = Path(target).expanduser()
    if path.suffix == ".gguf":
        return models.hf_folder(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{target!r} is neither a known model ({', '.join(models.REGISTRY)}), an HF folder "
                                "nor a Hugging Face Hub model (org/name)")
    return path


def base_checksum(target: str) -> str:
    """The sha256 that identifies a local target's weights: a registry model's published checksum, a ``.gguf``
    file's, an HF folder's (a Hub model's) ``model.safetensors``' ("" when it has none). A student's manifest records
    its base's."""
    if target in models.REGISTRY:
        return models.REGISTRY[target].sha256
    path = models.hub_snapshot(target)[0] if models.is_hub_id(target) else Path(target).expanduser()
    weights = path if path.suffix == ".gguf" else path / "model.safetensors"
    return models.sha256_file(weights) if weights.is_file() else ""


def base_revision(target: str) -> str | None:
    """The commit a Hub model target resolves to (what a student's manifest records beside its base's checksum), or
    None for any other target."""
    return models.hub_snapshot(target)[1] if models.is_hub_id(target) else None


def check_adapter_base(adapter: Path, target: str) -> None:
    """Refuse a student (an adapter with ``multihop distill``'s manifest) trained on another base model than
    ``target``."""
    manifest = adapter / STUDENT_MANIFEST
    if not manifest.exists():
        return
    try:
        trained = json.loads(manifest.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{manifest} is not a distillation manifest ({exc})") from None
    expected = trained.get("base_sha256") or ""
    if expected and expected != base_checksum(target):
        raise ValueError(f"the adapter {adapter} was trained on {trained.get('base')!r}, not local:{target} (other "
                         f"weights): run it with --lm local:{trained.get('base')}")


def make_lm(
    spec: str = DEFAULT_LM,
    *,
    adapter: str | Path | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    cache: bool = True,
    engine: str = DEFAULT_ENGINE,
    constrained: bool = True,
    timeout: float | None = None,
    structured: str = DEFAULT_STRUCTURED,
    **kwargs,
) -> dspy.LM:
    """Build an LM from a spec: ``local:smollm2``, ``local:<path>``, or any ``dspy.LM`` model string. ``engine``
    (``auto``, ``llamacpp``, ``transformers``) and ``constrained`` (decode under the signature's JSON schema) apply to
    local models. ``structured`` says how replies are constrained (:func:`schema_form`): ``auto``, ``json_schema``,
    ``json_object`` or ``off`` (free decoding, also for a local model). A served LM's request may take ``timeout``
    seconds (default ``$MULTIHOP_LM_TIMEOUT`` or :data:`~multihop.lm.defaults.DEFAULT_LM_TIMEOUT`) and is retried
    :data:`RETRIES` times on a timeout, HTTP 429 or 5xx, so one call gives up within about
    ``timeout × (RETRIES + 1)`` plus DSPy's backoff."""
    if timeout is None:
        try:
            timeout = float(os.environ.get(LM_TIMEOUT_ENV) or DEFAULT_LM_TIMEOUT)
        except ValueError:
            raise ValueError(f"{LM_TIMEOUT_ENV} should be a number of seconds, not {os.environ[LM_TIMEOUT_ENV]!r}"
                             ) from None
    if timeout <= 0:
        raise ValueError(f"an LM timeout is a positive number of seconds, not {timeout}")
    if engine not in LOCAL_ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(LOCAL_ENGINES)}")
    form = schema_form(spec, api_base, structured)
    if spec.startswith("local:"):
        settings = {"max_tokens": max_tokens or LOCAL_MAX_TOKENS, "temperature": temperature, "cache": cache, **kwargs}
        constrained = constrained and form is not None
        if api_base:
            if adapter:
                raise ValueError("a served model's adapter is the server's: pass --adapter to `multihop serve`")
            return _served_lm(spec.removeprefix("local:"), api_base, form or "json_object", constrained, timeout,
                              settings, api_key)
        return _local_lm(spec.removeprefix("local:"), Path(adapter) if adapter else None, engine, constrained,
                         settings)
    if adapter:
        raise ValueError("adapter= applies to local models only")
    if engine != DEFAULT_ENGINE:
        raise ValueError(f"engine={engine!r} applies to local models only")
    settings = {"max_tokens": max_tokens or DEFAULT_MAX_TOKENS, "temperature": temperature, "cache": cache, **kwargs}
    if form is not None:
        return _schema_lm(spec, api_base, api_key, form, timeout, settings)
    extra = {k: v for k, v in (("api_base", api_base), ("api_key", api_key)) if v}
    return dspy.LM(spec, timeout=timeout, num_retries=RETRIES, **extra, **settings)


def schema_form(spec: str, api_base: str | None, structured: str = DEFAULT_STRUCTURED) -> str | None:
    """The form in which ``spec``'s calls send each stage's bounded schema (``json_schema`` or ``json_object``), or
    None for free decoding. ``auto``: a local model's own (``json_object``, what ``multihop serve`` takes; the
    in-process engines decode under the schema itself), ``json_schema`` for ``hosted_vllm/`` and for ``openai/``
    with an ``api_base`` (vLLM, SGLang, an OpenAI-compatible server), none for hosted providers, which may refuse
    schemas (DSPy's own adapters send what LiteLLM says they take)."""
    if structured not in STRUCTURED:
        raise ValueError(f"--structured {structured!r}: choose one of {', '.join(STRUCTURED)}")
    if structured != "auto":
        return None if structured == "off" else structured
    if spec.startswith("local:"):
        return "json_object"
    provider = spec.partition("/")[0]
    served = api_base or os.environ.get(f"{provider.upper()}_API_BASE")  # where _schema_lm would send it
    return "json_schema" if provider in SCHEMA_PROVIDERS or (provider == "openai" and served) else None


def _schema_lm(spec: str, api_base: str | None, api_key: str | None, form: str, timeout: float, settings: dict
               ) -> dspy.LM:
    """``spec`` (``provider/model``) over the OpenAI chat API of its server, every call sending its bounded schema in
    ``form``; the server and key default to LiteLLM's variables (``HOSTED_VLLM_API_BASE``, ``OPENAI_API_KEY``...),
    and OpenAI's own API for ``openai/``."""
    provider, _, model = spec.partition("/")
    if not model:
        raise ValueError(f"--structured {form} needs a provider/model spec (hosted_vllm/<model>), not {spec!r}")
    variable = provider.upper()
    api_base = api_base or os.environ.get(f"{variable}_API_BASE") or (OPENAI_API_BASE if provider == "openai" else None)
    if not api_base:
        raise ValueError(f"{spec} with structured outputs is reached at its server: give --api-base (or set "
                         f"{variable}_API_BASE), or --structured off")
    api_key = api_key or os.environ.get(f"{variable}_API_KEY")
    engine = shared_engine(ServedEngine, api_base, model, timeout, api_key=api_key, schema_form=form)
    return engine_lm(f"{spec}-{form}{POLICY}", engine, num_retries=RETRIES, **settings)


def check_adapter(adapter: Path, target: str) -> None:
    """Refuse, before any question, an adapter folder that lacks ``adapter_config.json`` or
    ``adapter_model.safetensors`` (a pickled ``adapter_model.bin`` is never loaded), whose files differ from its
    inventory, or that a student manifest says was trained on another base."""
    required = ("adapter_config.json", "adapter_model.safetensors")
    missing = [name for name in required if not (adapter / name).exists()]
    if missing:
        raise FileNotFoundError(f"{adapter} is not a LoRA adapter folder: it lacks {' and '.join(missing)} (an "
                                "adapter is loaded from safetensors only; save it with safe_serialization=True)")
    verify_inventory(adapter)
    check_adapter_base(adapter, target)


def _local_lm(target: str, adapter: Path | None, engine: str, constrained: bool, settings: dict) -> dspy.LM:
    if adapter is not None:
        check_adapter(adapter, target)
    name = local_name(target)
    gguf = local_gguf(target)  # checked after the adapter: resolving verifies the weights first
    if engine == "auto":
        engine = "llamacpp" if gguf is not None and llama_cpp_available() else "transformers"
        if gguf is not None and engine == "transformers":
            logger.warning("llama-cpp-python is not installed: %s runs on transformers (`make setup` builds "
                           "llama-cpp-python)", name)
    decoding = f"-json{POLICY}" if constrained else ""
    if engine == "llamacpp":
        if gguf is None:
            raise ValueError(f"the llama.cpp engine runs GGUF files; {target!r} is an HF folder (use the transformers "
                             "engine)")
        if not llama_cpp_available():
            raise ValueError("the llama.cpp engine needs llama-cpp-python: `make setup` builds it, or `pip install "
                             "llama-cpp-python`; engine='transformers' runs without it")
        weights = llamacpp_weights(target, adapter, split_prompts=True)
        engine = shared_engine(LlamaCppEngine, weights.gguf, constrained=constrained, lora=weights.lora,
                               prompt_gguf=weights.prompt_gguf)
        return engine_lm(f"local/{weights.identity}{decoding}", engine, **settings)
    path = resolve_local(target)
    revision = models.snapshot_revision(path)  # a Hub model's commit: its weights may be sharded, unfingerprinted
    model = f"local/{name}{f'@{revision}' if revision else ''}-{_fingerprint(path, adapter)}{decoding}"
    return engine_lm(model, shared_engine(TransformersEngine, path, adapter, constrained=constrained), **settings)


def _served_lm(target: str, api_base: str, form: str, constrained: bool, timeout: float, settings: dict,
               api_key: str | None = None) -> dspy.LM:
    """The local model ``multihop serve`` runs at ``api_base`` (sending ``api_key`` to a keyed one); its name there
    identifies its weights. Its schemas go in ``form`` (llama-cpp-python's server takes ``json_object``)."""
    name = served_model(api_base, api_key=api_key)
    if not name.startswith(f"{local_name(target)}-llamacpp-"):
        raise ValueError(f"the server at {api_base} runs {name!r}, not local:{target} (`multihop serve --lm "
                         f"local:{target}` serves it)")
    decoding = (f"-json{POLICY}" if form == "json_object" else f"-{form}{POLICY}") if constrained else ""
    engine = shared_engine(ServedEngine, api_base, name, timeout, constrained=constrained, api_key=api_key,
                           schema_form=form)
    return engine_lm(f"local/{name}{decoding}", engine, num_retries=RETRIES, **settings)


def engine_lm(model: str, engine: LocalEngine, **settings) -> dspy.LM:
    """A ``dspy.LM`` over one of our engines, with its async twin."""
    return dspy.LM(model, engine=engine, async_engine=AsyncEngine(engine), **settings)


_ENGINES: dict[tuple, object] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(cls: type, *args, **kwargs):
    """One engine per model and setting in a process: LMs that differ only in their call settings (a generation cap,
    a temperature) share its weights, its lock and, on llama.cpp, its prompt prefix."""
    key = (cls, *map(str, args), *sorted(kwargs.items()))
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = cls(*args, **kwargs)
        return _ENGINES[key]


def chat_request(lm: dspy.LM, messages: list[dict], **config) -> Request:
    """OpenAI-style chat messages (``role``, ``content``), e.g. an adapter's formatted prompt or a trajectory row, as
    the ``dspy.lm15.Request`` that ``lm`` takes (``lm(request)`` returns a ``Response``); ``config`` sets its
    generation settings (``max_tokens``, ``temperature``...) over the LM's own, which DSPy does not merge into an
    explicit request."""
    settings = {key: value for key, value in lm.kwargs.items() if key in CONFIG_FIELDS}
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system") or None
    turns = tuple(Message.user(m["content"]) if m["role"] == "user" else Message.assistant(m["content"])
                  for m in messages if m["role"] != "system")
    return Request(model=lm.model, system=system, messages=turns, config=Config(**{**settings, **config}))


def spec_adapter(spec: str, api_base: str | None = None, structured: str = DEFAULT_STRUCTURED) -> dspy.Adapter:
    """The adapter :func:`multihop.lm.adapter.default_adapter` gives the LM that ``make_lm(spec, api_base=api_base,
    structured=structured)`` builds, told from the spec without building it (no weights load, no server is asked):
    :func:`~multihop.lm.adapter.choose_adapter` for a local model (``local:``) or one whose calls send schemas
    (:func:`schema_form`)."""
    return choose_adapter(local_model=spec.startswith("local:"),
                          decodes_schemas=schema_form(spec, api_base, structured) is not None)


def lm_api_base(lm: dspy.BaseLM | None) -> str | None:
    """The server an LM is reached at: its ``api_base`` setting (an LM LiteLLM calls), else its engine's (a served
    LM of :func:`make_lm`: :class:`~multihop.lm.engines.served.ServedEngine`), else None (a local or hosted LM)."""
    if lm is None:
        return None
    return getattr(lm, "kwargs", {}).get("api_base") or getattr(getattr(lm, "engine", None), "api_base", None)


def configure_lm(spec: str = DEFAULT_LM, **kwargs) -> dspy.LM:
    """``make_lm(spec, **kwargs)`` and ``dspy.configure`` it with its default adapter
    (:func:`multihop.lm.adapter.default_adapter`)."""
    lm = make_lm(spec, **kwargs)
    dspy.configure(lm=lm, adapter=default_adapter(lm))
    return lm
