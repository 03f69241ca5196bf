"""The ``transformers`` engine: any Hugging Face causal-LM folder, with an optional PEFT LoRA adapter, on CPU or
CUDA, decoding under the request's JSON schema."""

from __future__ import annotations

import copy
import threading
from pathlib import Path

from dspy.lm15 import TokenLogprob

from .local_engine import PREFIX_CACHE_BYTES, Generation, LocalEngine, reusable_prefix, spelling, text_pieces


class TransformersEngine(LocalEngine):
    """A DSPy engine over a local ``transformers`` causal LM, with an optional PEFT LoRA adapter.

    Applies the model's chat template, decodes greedily unless a positive temperature is asked for, honours
    ``max_tokens`` and stop strings, reports token usage, and with ``constrained`` decodes under the request's bounded
    JSON schema (:class:`~.local_engine.LocalEngine`, :mod:`~.grammar`). The KV caches of its recent calls are kept (at
    most ``prefix_cache_bytes`` of them, the least recently used dropped first; 0: the last call's only), and a prompt
    continues the one with which it shares the longest prefix (a stage's instructions and demos, whichever stage ran
    last), evaluating only the tokens after it; that cache is cut back to the prefix, extended by the call and kept
    again under the call's tokens, so a changed prompt never reads a stale state. Generation holds a lock: one model,
    one call at a time, so threads may share the engine safely. Runs on CUDA when present. Asked for log-probabilities,
    it reports each reply token's under the model's raw logits at its step (those before the grammar, the temperature
    and the top-p cut), its text the piece of the reply it adds (:func:`~.local_engine.text_pieces`).
    """

    def __init__(self, path: str | Path, adapter: str | Path | None = None, device: str | None = None,
                 constrained: bool = True, prefix_cache_bytes: int = PREFIX_CACHE_BYTES):
        super().__init__(Path(path).name, constrained)
        self.path = Path(path)
        self.adapter = Path(adapter) if adapter else None
        self.device, self.prefix_cache_bytes = device, prefix_cache_bytes
        self._lock = threading.Lock()
        self._model = self._tokenizer = self._grammars = None
        self._kept: list[tuple[list[int], object]] = []  # (tokens, their KV cache), the most recently used last

    def _load(self):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from .grammar import SchemaGrammars

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        tokenizer = AutoTokenizer.from_pretrained(self.path)
        model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.float32 if device == "cpu" else "auto")
        if self.adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, self.adapter)
        model.to(device).eval()
        self._tokenizer, self._model, self.device = tokenizer, model, device
        self._grammars = SchemaGrammars.for_hf(tokenizer, model.generation_config.eos_token_id) \
            if self.constrained else None

    def generate(self, messages: list[dict], config, max_tokens: int, schema: dict | None) -> Generation:
        import torch
        from transformers import LogitsProcessorList

        with self._lock:
            if self._model is None:
                self._load()
            tok, model = self._tokenizer, self._model
            inputs = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                             return_dict=True)
            inputs = {k: v.to(model.device) for k, v in inputs.items()}
            sample = bool(config.temperature and config.temperature > 0)
            generation = dict(
                max_new_tokens=max_tokens,
                do_sample=sample,
                num_beams=1,
                num_return_sequences=1,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
            if sample:
                generation.update(temperature=config.temperature, top_p=config.top_p or 1.0)
                if config.top_k:
                    generation["top_k"] = config.top_k
                if config.seed is not None:
                    torch.manual_seed(config.seed)
            else:
                generation.update(temperature=None, top_p=None, top_k=None)
            if config.stop:
                generation.update(stop_strings=list(config.stop), tokenizer=tok)
            if schema is not None:
                generation["logits_processor"] = LogitsProcessorList([self._grammars.processor(schema)])
            past, cached = self._reusable_past(inputs["input_ids"][0].tolist())
            scored = config.logprobs is not None
            with torch.inference_mode():
                output = model.generate(**inputs, **generation, past_key_values=past, return_dict_in_generate=True,
                                        output_logits=scored)
            self._keep(output.sequences[0][: past.get_seq_length()].tolist(), past)  # kept only when it succeeded
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = output.sequences[0][prompt_len:]
        text = tok.decode(new_tokens, skip_special_tokens=True)
        for stop in config.stop or ():
            if stop in text:
                text = text[: text.index(stop)]
        finish = "length" if len(new_tokens) >= max_tokens else "stop"
        logprobs = spelling(token_logprobs(tok, new_tokens.tolist(), output.logits), text) if scored else None
        return Generation(text, finish, prompt_len, cached, len(new_tokens), logprobs)

    def _reusable_past(self, ids: list[int]):
        """A KV cache of the longest prefix ``ids`` shares with a kept one (leaving at least one token to evaluate) and
        that prefix's length, or a new cache and 0: the kept cache itself when all of it is shared (it is extended in
        place and kept again), else a copy of it cut to the prefix."""
        from transformers import DynamicCache

        shared, best = 0, None
        for index, (held, _) in enumerate(self._kept):
            length = reusable_prefix(held, ids)
            if length > shared:
                shared, best = length, index
        if best is None or any(layer.is_sliding for layer in self._kept[best][1].layers):  # a window cannot be cut
            return DynamicCache(config=self._model.config), 0
        held, past = self._kept.pop(best)
        if shared < past.get_seq_length():  # it holds more than is shared: kept whole for the prompts that share it
            self._kept.append((held, past))
            past = copy.deepcopy(past)
        past.crop(shared - past.get_seq_length())  # a negative count: the tokens to drop
        return past, shared

    def _keep(self, ids: list[int], past) -> None:
        """Keep ``past`` (holding ``ids``), dropping the least recently used caches beyond ``prefix_cache_bytes``
        (the newest is always kept)."""
        self._kept.append((ids, past))
        while len(self._kept) > 1 and sum(kv_bytes(held) for _, held in self._kept) > self.prefix_cache_bytes:
            self._kept.pop(0)

    def forget_prefix(self) -> None:
        with self._lock:
            self._kept = []

    def close(self) -> None:
        with self._lock:
            self._model = self._tokenizer = self._grammars = None
            self._kept = []

    def dump_state(self) -> dict:
        return {"path": str(self.path), "adapter": str(self.adapter) if self.adapter else None,
                "constrained": self.constrained, "prefix_cache_bytes": self.prefix_cache_bytes}

    @classmethod
    def load_state(cls, state: dict) -> TransformersEngine:
        return cls(state["path"], state.get("adapter"), constrained=state.get("constrained", True),
                   prefix_cache_bytes=state.get("prefix_cache_bytes", PREFIX_CACHE_BYTES))


def kv_bytes(past) -> int:
    """The bytes of a KV cache's keys and values."""
    return sum(tensor.nbytes for layer in past.layers for tensor in (layer.keys, layer.values) if tensor is not None)


def token_logprobs(tokenizer, ids: list[int], logits) -> tuple[TokenLogprob, ...]:
    """Each new token's log-probability under its step's raw logits (``generate``'s ``output_logits``), with the piece
    of the decoded reply it writes."""
    import torch

    chosen = [torch.log_softmax(step[0].float(), dim=-1)[token].item() for token, step in zip(ids, logits, strict=True)]
    pieces = text_pieces(lambda prefix: tokenizer.decode(prefix, skip_special_tokens=True), ids)
    return tuple(TokenLogprob(token=piece, logprob=logprob, token_id=token)
                 for token, piece, logprob in zip(ids, pieces, chosen, strict=True))
