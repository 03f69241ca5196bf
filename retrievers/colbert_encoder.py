"""ColBERT checkpoints as encoders: queries and passages encoded as ColBERT encodes them (Khattab & Zaharia, 2020, §3;
Santhanam et al., 2022, ColBERTv2).

A ColBERT checkpoint, in the format its authors publish on the Hugging Face Hub (``colbert-ir/colbertv2.0``) and the
``colbert-ai`` package writes, is a folder with a BERT ``config.json``, weights with ``bert.*`` and ``linear.weight``
keys (``model.safetensors`` or ``pytorch_model.bin``), the tokenizer and ``artifact.metadata`` (JSON: ``query_maxlen``,
``doc_maxlen``, ``dim``, the marker tokens ``query_token_id``/``doc_token_id``, ``mask_punctuation``,
``attend_to_mask_tokens``). ``Encoder(folder_or_hub_id)`` gives a :class:`ColBERTEncoder` for such a folder (the
encoder recognises it by its ``artifact.metadata``); the model is loaded with transformers (``BertModel`` and the
checkpoint's linear layer), not sentence-transformers.

What is the papers': a query is ``[CLS] [Q] tokens [SEP]`` padded with ``[MASK]`` to ``query_maxlen`` (query
augmentation; the ``[MASK]`` positions are not attended to unless the checkpoint says so, and their output vectors
are kept), a passage ``[CLS] [D] tokens [SEP]`` cut at ``doc_maxlen`` with its punctuation tokens left out; the markers
(``[unused0]``/``[unused1]``) follow ``[CLS]``; every kept token's last hidden state goes through the model's own
linear projection (``dim``, 128 for ColBERTv2) and is L2-normalised. As the authors' ``colbert-ai`` release
encodes them (its ``ColBERT.query``/``ColBERT.doc``, ``QueryTokenizer`` and ``DocTokenizer``): a query keeps all
``query_maxlen`` vectors, ``[CLS]``, ``[SEP]`` and ``[MASK]`` included; a passage keeps every attended token but the
first token id of each ASCII punctuation symbol (the authors' skiplist), ``[CLS]``, the marker and ``[SEP]`` included.

What differs from the authors' code: only BERT-based checkpoints are read (the authors' ``class_factory`` also loads
other model types, e.g. XLM-RoBERTa; such a checkpoint is refused in one line); the query's context (``context=``)
and ``full_length_search`` are not offered; a punctuation symbol the tokenizer encodes to nothing is left out of the
skiplist (the authors' code fails on it).

What is ours, so that the encoder serves everything an :class:`~.encoder.Encoder` serves: :meth:`states` and
:meth:`encode` encode queries (what the first stages and rerankers encode queries with), :meth:`passage_states` and
:meth:`candidate_states` passages (an index build, a reranker's candidates); the ``[CLS]`` state of every layer and any
premature layer's token states are that layer's hidden states through the same projection, normalised; the pooled
embedding is the normalised mean of the kept token vectors (``mean``) or the projected ``[CLS]`` vector (``cls``) —
ColBERT itself has no single-vector embedding. Markers a method writes into its queries (``special_tokens``) are added
to the tokenizer as the encoder adds them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import string
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from multihop.data.folders import verify_inventory
from multihop.lm import models

from .encoder import PRECISIONS, TORCH_DTYPES, EncodedStates, Encoder
from .encoder import _add_special_tokens as add_special_tokens

METADATA = "artifact.metadata"
WEIGHTS = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class ColBERTSettings:
    """What a checkpoint's ``artifact.metadata`` says of its encoding (defaults: ``colbert-ai``'s).

    Args:
        query_maxlen: tokens a query is cut at and padded with ``[MASK]`` to.
        doc_maxlen: tokens a passage is cut at.
        dim: the linear projection's output size.
        query_marker: the token after ``[CLS]`` in a query.
        doc_marker: the token after ``[CLS]`` in a passage.
        mask_punctuation: whether a passage's punctuation tokens are left out.
        attend_to_mask_tokens: whether the query's ``[MASK]`` padding is attended to.
    """

    query_maxlen: int = 32
    doc_maxlen: int = 220
    dim: int = 128
    query_marker: str = "[unused0]"
    doc_marker: str = "[unused1]"
    mask_punctuation: bool = True
    attend_to_mask_tokens: bool = False

    @classmethod
    def read(cls, folder: Path) -> ColBERTSettings:
        """The settings of ``folder``'s ``artifact.metadata``: its keys at the top level, or under ``"config"`` (both
        forms the authors' ``ColBERTConfig.from_path`` reads)."""
        meta = json.loads((Path(folder) / METADATA).read_text())
        meta = meta.get("config", meta) if isinstance(meta.get("config"), dict) else meta
        default = cls()
        return cls(query_maxlen=int(meta.get("query_maxlen", default.query_maxlen)),
                   doc_maxlen=int(meta.get("doc_maxlen", default.doc_maxlen)), dim=int(meta.get("dim", default.dim)),
                   query_marker=meta.get("query_token_id", default.query_marker),
                   doc_marker=meta.get("doc_token_id", default.doc_marker),
                   mask_punctuation=bool(meta.get("mask_punctuation", default.mask_punctuation)),
                   attend_to_mask_tokens=bool(meta.get("attend_to_mask_tokens", default.attend_to_mask_tokens)))


def colbert_folder(name: str | Path, revision: str | None = None) -> Path | None:
    """The checkpoint folder ``name`` (a folder, or a Hub id at ``revision`` found in or fetched to huggingface_hub's
    cache) when it holds a ColBERT checkpoint (an ``artifact.metadata``), else None; a registry name is never one, and
    a Hub id that cannot be had is left to the encoder's own error."""
    text = str(name)
    if text in models.REGISTRY:
        return None
    if models.is_hub_id(text):
        repo = text.partition("@")[0]
        try:
            folder = models.hub_snapshot(f"{repo}@{revision}" if revision else text)[0]
        except Exception:  # noqa: BLE001 - the encoder's resolution raises the one-line error
            return None
    else:
        folder = Path(text)
    return folder if (folder / METADATA).is_file() else None


@functools.cache
def _checkpoint_class():
    """The checkpoint's model as transformers loads it: ``bert`` (a ``BertModel`` without its pooler) and ``linear``,
    the keys the authors' checkpoints hold."""
    import torch.nn as nn
    from transformers import BertModel, BertPreTrainedModel

    class ColBERTCheckpoint(BertPreTrainedModel):
        _keys_to_ignore_on_load_unexpected = [r"bert\.pooler\..*"]  # a checkpoint saved with BERT's pooler

        def __init__(self, config):
            super().__init__(config)
            self.bert = BertModel(config, add_pooling_layer=False)
            self.linear = nn.Linear(config.hidden_size, config.colbert_dim, bias=False)
            self.post_init()

    return ColBERTCheckpoint


class _Loaded:
    """The tokenizer, the model and what encoding needs of the tokenizer's ids."""

    def __init__(self, path: Path, settings: ColBERTSettings, special_tokens: tuple[str, ...], device: str,
                 dtype: str | None):
        import torch
        from transformers import AutoTokenizer, BertConfig

        model_type = json.loads((Path(path) / "config.json").read_text()).get("model_type", "bert")
        if model_type != "bert":
            raise ValueError(f"{path} is a ColBERT checkpoint of a {model_type!r} model; only BERT-based ones "
                             "(colbert-ir/colbertv2.0's kind) are read here")
        config = BertConfig.from_pretrained(str(path))
        config.colbert_dim = settings.dim
        model, info = _checkpoint_class().from_pretrained(str(path), config=config, output_loading_info=True)
        missing = info.get("missing_keys", ())
        if "linear.weight" in missing:
            raise ValueError(f"{path} holds no ColBERT projection (linear.weight); it is not a ColBERT checkpoint")
        if any(key.startswith("bert.") for key in missing):
            raise ValueError(f"{path} lacks BERT weights under bert.* (its encoder would run on random weights); it is "
                             "not a BERT-based ColBERT checkpoint")
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        add_special_tokens(SimpleNamespace(tokenizer=tokenizer, auto_model=model.bert), special_tokens)
        if dtype is not None:
            model.to(getattr(torch, dtype))
        self.model, self.tokenizer = model.to(device).eval(), tokenizer
        self.markers = {"query": tokenizer.convert_tokens_to_ids(settings.query_marker),
                        "doc": tokenizer.convert_tokens_to_ids(settings.doc_marker)}
        self.skip = {tokenizer.encode(symbol, add_special_tokens=False)[0] for symbol in string.punctuation
                     if tokenizer.encode(symbol, add_special_tokens=False)} if settings.mask_punctuation else set()

    @property
    def device(self):
        return self.model.device


class ColBERTEncoder(Encoder):
    """An :class:`~.encoder.Encoder` over a ColBERT checkpoint (what ``Encoder(name)`` returns for one).

    Args:
        name: a checkpoint folder or a Hugging Face Hub id (``colbert-ir/colbertv2.0``, ``org/name@revision``).
        device: the torch device (default: CUDA when present).
        batch_size: texts a forward pass (default: as the encoder sizes it).
        special_tokens: markers added to the tokenizer, kept whole in queries.
        sha256: the weights' checksum an index recorded; other weights are refused.
        pooling: the pooled embedding, ``mean`` of the token vectors or the ``cls`` vector.
        precision: ``auto`` (fp16 on a GPU), ``fp32``, ``fp16`` or ``bf16``.
        revision: a Hub model's commit to load.
        batching: how concurrent calls are gathered into batches, as :class:`~.encoder.Encoder` takes it.
    """

    @staticmethod
    def recognises(name: str | Path, revision: str | None = None) -> bool:
        """Whether ``name`` (at ``revision``) is a ColBERT checkpoint (:func:`colbert_folder`)."""
        return colbert_folder(name, revision) is not None

    def __init__(self, name: str = "colbert-ir/colbertv2.0", device: str | None = None, batch_size: int | None = None,
                 special_tokens: Sequence[str] = (), sha256: str | None = None, pooling: str = "mean",
                 precision: str = "auto", revision: str | None = None, **batching: float):
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be one of mean, cls, not {pooling!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        self.name, self.pooling, self.requested_precision = str(name), pooling, precision
        folder = colbert_folder(self.name, revision)
        if folder is None:
            raise FileNotFoundError(f"{self.name!r} holds no ColBERT checkpoint ({METADATA} missing)")
        self.path, self.revision = folder, models.snapshot_revision(folder)
        verify_inventory(self.path)
        self.settings = ColBERTSettings.read(self.path)
        self.special_tokens = tuple(dict.fromkeys(special_tokens))
        self._batch_size, self._device = batch_size, device
        self.truncated = 0
        self._model = None
        self._lock = threading.RLock()
        self._checksum: str | None = None
        self.configure_batching(**batching)
        if sha256 is not None and self.checksum() != sha256:
            raise models.ChecksumMismatchError(
                f"encoder {self.name} has weights with sha256 {self.checksum()}, not the {sha256} recorded with the "
                "index; rebuild the index")

    @property
    def model(self) -> _Loaded:
        """The tokenizer and the checkpoint's model, loaded on first use."""
        with self._lock:
            if self._model is None:
                import torch

                device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
                precision = self._resolved_precision(torch.device(device).type)
                self._model = _Loaded(self.path, self.settings, self.special_tokens, device,
                                      TORCH_DTYPES.get(precision))
            return self._model

    def colbert_config(self) -> dict:
        """What an index records of the checkpoint's encoding besides its name and checksum (the dimension, markers
        and lengths), and refuses a query encoder that differs in."""
        return asdict(self.settings)

    @property
    def dimension(self) -> int:
        return self.settings.dim

    @property
    def transformer_config(self):
        return self.model.model.config

    def checksum(self) -> str:
        """sha256 of the checkpoint's weights file (``model.safetensors``, else ``pytorch_model.bin``) and its
        ``artifact.metadata``."""
        if self._checksum is None:
            weights = next((self.path / name for name in WEIGHTS if (self.path / name).exists()), None)
            digest = hashlib.sha256(models.sha256_file(weights).encode() if weights else str(self.path).encode())
            digest.update((self.path / METADATA).read_bytes())
            self._checksum = digest.hexdigest()
        return self._checksum

    def _encode_batch(self, texts: list[str], progress: bool = False) -> np.ndarray:
        return self._states_batch(list(texts), ()).pooled

    def forward(self, texts: list[str], token_layers: tuple[int, ...] = (), side: str = "query") -> dict:
        """One forward pass over ``texts`` as ColBERT encodes a query (``side="query"``) or a passage (``"doc"``):
        the same keys as :meth:`Encoder.forward`, ``mask`` marking the token vectors ColBERT keeps."""
        import torch
        import torch.nn.functional as F

        loaded = self.model
        ids, attention = self._tokenize(loaded, texts, side)
        with self._lock:
            out = loaded.model.bert(input_ids=ids, attention_mask=attention, output_hidden_states=True)
        hidden = out.hidden_states
        projected = {layer: F.normalize(loaded.model.linear(hidden[layer]).float(), dim=-1)
                     for layer in {len(hidden) - 1, *token_layers}}
        tokens = projected[len(hidden) - 1]
        if side == "query":
            keep = torch.ones_like(ids, dtype=torch.bool)
        else:
            keep = attention.bool()
            for token in loaded.skip:
                keep &= ids != token
        mean = F.normalize((tokens * keep[..., None]).sum(dim=1), dim=-1)
        cls = torch.stack([F.normalize(loaded.model.linear(h[:, 0]).float(), dim=-1) for h in hidden], dim=1)
        return {"pooled": tokens[:, 0] if self.pooling == "cls" else mean, "mean": mean, "tokens": tokens,
                "mask": keep, "cls": cls, "layer_tokens": {layer: projected[layer] for layer in token_layers}}

    def _tokenize(self, loaded: _Loaded, texts: list[str], side: str):
        """Input ids and attention mask: the marker after ``[CLS]``; a query padded with ``[MASK]`` to its length."""
        import torch

        tokenizer, settings = loaded.tokenizer, self.settings
        query = side == "query"
        limit = settings.query_maxlen if query else settings.doc_maxlen
        with self._lock:  # a fast tokenizer refuses concurrent calls that change its truncation
            encoded = tokenizer(list(texts), padding="max_length" if query else "longest", truncation=True,
                                max_length=limit - 1, return_tensors="pt")
        ids, attention = encoded["input_ids"], encoded["attention_mask"]
        marker = torch.full((len(texts), 1), loaded.markers[side], dtype=ids.dtype)
        ids = torch.cat([ids[:, :1], marker, ids[:, 1:]], dim=1)
        attention = torch.cat([attention[:, :1], torch.ones_like(marker), attention[:, 1:]], dim=1)
        if query:
            ids = ids.masked_fill(attention == 0, tokenizer.mask_token_id)
            if settings.attend_to_mask_tokens:
                attention = torch.ones_like(attention)
        return ids.to(loaded.device), attention.to(loaded.device)

    def passage_states(self, texts: list[str], token_layers: tuple[int, ...] | None = None) -> EncodedStates:
        """The states of passages, encoded as ColBERT encodes documents (an index build's and a reranker's
        candidates'): their punctuation left out of the token states, cut at ``doc_maxlen``."""
        with self._lock:
            self._count_truncated(texts)
        return self._states_batch(list(texts), tuple(token_layers or ()), side="doc",
                                  keep_tokens=token_layers is not None)

    def candidate_states(self, texts: list[str], token_layers: tuple[int, ...] = ()) -> EncodedStates:
        """A reranker's candidates, encoded as passages (:meth:`passage_states`)."""
        return self.passage_states(list(texts), tuple(token_layers))

    def _states_batch(self, texts: list[str], token_layers: tuple[int, ...], keep_tokens: bool = True,
                      side: str = "query") -> EncodedStates:
        import torch

        order = np.argsort([-len(text) for text in texts])
        pooled = np.zeros((len(texts), self.dimension), dtype=np.float32)
        mean = np.zeros_like(pooled)
        cls = np.zeros((len(texts), self.num_layers + 1, self.dimension), dtype=np.float32)
        tokens: list = [None] * len(texts) if keep_tokens else []
        layer_tokens: dict[int, list] = {layer: [None] * len(texts) for layer in token_layers}
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                rows = order[start : start + self.batch_size]
                out = self.forward([texts[i] for i in rows], token_layers, side=side)
                pooled[rows] = out["pooled"].cpu().numpy()
                mean[rows] = out["mean"].cpu().numpy()
                cls[rows] = out["cls"].cpu().numpy()
                if not keep_tokens:
                    continue
                for j, row in enumerate(rows):
                    keep = out["mask"][j]
                    tokens[row] = out["tokens"][j][keep].cpu().numpy()
                    for layer in token_layers:
                        layer_tokens[layer][row] = out["layer_tokens"][layer][j][keep].cpu().numpy()
        return EncodedStates(pooled, tokens, cls, layer_tokens, mean)

    def _count_truncated(self, texts: list[str]) -> None:
        lengths = [len(ids) for ids in self.model.tokenizer(list(texts), truncation=False, verbose=False)["input_ids"]]
        self.truncated += sum(length + 1 > self.settings.doc_maxlen for length in lengths)
