"""Language-model backends (DESIGN.md, "LM backends").

``make_lm(spec)`` returns a ``dspy.LM``:

- ``local:smollm2`` (the embedded default) or ``local:<HF folder | .gguf file>``, optionally with a LoRA ``adapter``
  folder: a :class:`TransformersEngine` behind ``dspy.LM(engine=...)``. DSPy's outer LM layer then owns the request
  cache (an identical request is never generated twice), retries, history, callbacks and usage tracking; the model
  string ``local/<name>-<checksum>`` keys the cache by the exact weights and adapter. Generation is capped at
  ``LOCAL_MAX_TOKENS`` (128) unless ``max_tokens`` is given: on two CPU cores SmolLM2 decodes ~9 tokens/s.
- anything else: a ``dspy.LM`` model string (``openai/gpt-4o-mini``, ``hosted_vllm/...``, ``ollama_chat/...``) with
  optional ``api_base`` / ``api_key`` for OpenAI-compatible servers.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage

from multihop import models
from multihop.models import DEFAULT_LM

DEFAULT_MAX_TOKENS = 384
LOCAL_MAX_TOKENS = 128


def _fingerprint(path: Path, adapter: Path | None) -> str:
    """A short checksum of the weights (and adapter) that keys DSPy's cache."""
    digest = hashlib.sha256()
    for folder in filter(None, (path, adapter)):
        for name in ("model.safetensors", "adapter_model.safetensors", "multihop.json"):
            file = folder / name
            if file.exists():
                stat = file.stat()
                digest.update(f"{name}:{stat.st_size}".encode())
                with open(file, "rb") as fh:
                    digest.update(fh.read(1 << 20))
    return digest.hexdigest()[:12]


class TransformersEngine:
    """A DSPy engine (``complete(Request) -> Response``) over a local ``transformers`` causal LM.

    Applies the model's chat template, decodes greedily unless a positive temperature is asked for, honours
    ``max_tokens`` and stop strings, and reports token usage. Generation holds a lock: one model, one call at a time,
    so threads may share the engine safely. Runs on CUDA when present.
    """

    def __init__(self, path: str | Path, adapter: str | Path | None = None, device: str | None = None):
        self.path = Path(path)
        self.adapter = Path(adapter) if adapter else None
        self.device = device
        self._lock = threading.Lock()
        self._model = None
        self._tokenizer = None

    def _load(self):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        tokenizer = AutoTokenizer.from_pretrained(self.path)
        model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32 if device == "cpu" else "auto")
        if self.adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, self.adapter)
        model.to(device).eval()
        self._tokenizer, self._model, self.device = tokenizer, model, device

    def complete(self, request) -> Response:
        import torch

        messages = []
        if request.system:
            system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
            messages.append({"role": "system", "content": system})
        messages.extend({"role": m.role, "content": m.text or ""} for m in request.messages)
        config = request.config
        with self._lock:
            if self._model is None:
                self._load()
            tok, model = self._tokenizer, self._model
            inputs = tok.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
            inputs = {k: v.to(model.device) for k, v in inputs.items()}
            sample = bool(config.temperature and config.temperature > 0)
            generation = dict(
                max_new_tokens=config.max_tokens or DEFAULT_MAX_TOKENS,
                do_sample=sample,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
            if sample:
                generation.update(temperature=config.temperature, top_p=config.top_p or 1.0)
            else:
                generation.update(temperature=None, top_p=None, top_k=None)
            if config.stop:
                generation.update(stop_strings=list(config.stop), tokenizer=tok)
            with torch.inference_mode():
                output = model.generate(**inputs, **generation)
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = output[0][prompt_len:]
        text = tok.decode(new_tokens, skip_special_tokens=True)
        finish = "stop"
        for stop in config.stop or ():
            if stop in text:
                text = text[: text.index(stop)]
        if len(new_tokens) >= generation["max_new_tokens"]:
            finish = "length"
        return Response(
            id=None,
            model=str(self.path.name),
            message=Message.assistant((TextPart(text),)),
            finish_reason=finish,
            usage=Usage(input_tokens=int(prompt_len), output_tokens=int(len(new_tokens))),
        )

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        self._model = self._tokenizer = None

    def dump_state(self) -> dict:
        return {"path": str(self.path), "adapter": str(self.adapter) if self.adapter else None}

    @classmethod
    def load_state(cls, state: dict) -> TransformersEngine:
        return cls(state["path"], state.get("adapter"))


def resolve_local(target: str) -> Path:
    """A registry name or a path (HF folder or ``.gguf``) → a Hugging Face folder."""
    if target in models.REGISTRY:
        return models.hf_folder(target)
    path = Path(target).expanduser()
    if path.suffix == ".gguf":
        return models.hf_folder(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{target!r} is neither a known model ({', '.join(models.REGISTRY)}) nor an HF folder")
    return path


def make_lm(
    spec: str = DEFAULT_LM,
    *,
    adapter: str | Path | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    cache: bool = True,
    **kwargs,
) -> dspy.LM:
    """Build an LM from a spec: ``local:smollm2``, ``local:<path>``, or any ``dspy.LM`` model string."""
    if spec.startswith("local:"):
        target = spec.removeprefix("local:")
        adapter_path = Path(adapter) if adapter else None
        if adapter_path is not None and not (adapter_path / "adapter_config.json").exists():
            raise FileNotFoundError(f"{adapter_path} is not a LoRA adapter folder (no adapter_config.json)")
        path = resolve_local(target)  # checked after the adapter: resolving may convert a GGUF first
        name = Path(target).stem if target not in models.REGISTRY else target
        model = f"local/{name}-{_fingerprint(path, adapter_path)}"
        engine = TransformersEngine(path, adapter_path)
        max_tokens = max_tokens or LOCAL_MAX_TOKENS
        return dspy.LM(model, engine=engine, max_tokens=max_tokens, temperature=temperature, cache=cache, **kwargs)
    if adapter:
        raise ValueError("adapter= applies to local models only")
    extra = {k: v for k, v in (("api_base", api_base), ("api_key", api_key)) if v}
    max_tokens = max_tokens or DEFAULT_MAX_TOKENS
    return dspy.LM(spec, max_tokens=max_tokens, temperature=temperature, cache=cache, **extra, **kwargs)


def default_adapter(spec: str) -> dspy.Adapter:
    """The adapter a spec runs best with. Local models get DSPy's ``JSONAdapter``: SmolLM2-135M degenerates on the
    ChatAdapter's ``[[ ## field ## ]]`` markers (measured: it repeats the header line until ``max_tokens``) but
    writes JSON objects, so the ChatAdapter's first attempt would be a wasted generation on every call."""
    return dspy.JSONAdapter() if spec.startswith("local:") else dspy.ChatAdapter()


def configure_lm(spec: str = DEFAULT_LM, **kwargs) -> dspy.LM:
    """``make_lm(spec, **kwargs)`` and ``dspy.configure`` it with its default adapter."""
    lm = make_lm(spec, **kwargs)
    dspy.configure(lm=lm, adapter=default_adapter(spec))
    return lm
