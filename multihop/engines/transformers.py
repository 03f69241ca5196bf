"""The ``transformers`` engine: any Hugging Face causal-LM folder, with an optional PEFT LoRA adapter, on CPU or
CUDA."""

from __future__ import annotations

import threading
from pathlib import Path

from dspy.lm15 import Response

from .base import LOCAL_MAX_TOKENS, LocalEngine, chat_messages, make_response


class TransformersEngine(LocalEngine):
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

        messages = chat_messages(request)
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
                max_new_tokens=config.max_tokens or LOCAL_MAX_TOKENS,
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
        return make_response(text, self.path.name, finish, prompt_len, len(new_tokens))

    def close(self) -> None:
        self._model = self._tokenizer = None

    def dump_state(self) -> dict:
        return {"path": str(self.path), "adapter": str(self.adapter) if self.adapter else None}

    @classmethod
    def load_state(cls, state: dict) -> TransformersEngine:
        return cls(state["path"], state.get("adapter"))
