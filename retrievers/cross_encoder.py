"""The cross-encoder reranker (registered as ``cross-encoder``): each candidate scored by a sequence-pair classifier
reading the query and the candidate together, through sentence-transformers' ``CrossEncoder``.

The model is a model folder or a Hugging Face Hub id (``org/name``, ``org/name@revision``), found in or downloaded to
huggingface_hub's cache (:func:`multihop.lm.models.hub_snapshot`); the commit a Hub id resolved to is recorded in
:meth:`CrossEncoderReranker.config`, and a reranker rebuilt from that config loads that commit. No cross-encoder ships
as a package of the offline registry (:mod:`multihop.lm.models`), so there is no default model: a program's switch
names one as ``rerank="cross-encoder:MODEL"`` (:func:`~.rerankers.parse_rerank`), e.g.
``cross-encoder:BAAI/bge-reranker-v2-m3`` (DualRAG's reranker, Cheng et al., 2025, §4.3).

One model is loaded per process for each folder and length (on first use; on CUDA when there is one), and the
threads evaluating questions share it, one prediction at a time. The score of a pair is the model's logit: the
sigmoid sentence-transformers applies by default keeps the order but rounds confident scores to a tie at 1.0.

DualRAG's paper (Cheng et al., 2025, §4.3) names the model alone, bge-reranker-v2-m3, not how it ran it. What runs
here beside the usage its authors' ``FlagEmbedding`` package gives it (``FlagReranker``): the same raw logit (its
default, ``normalize=False``); a pair cut at the model's own limit (8,192 tokens for bge-reranker-v2-m3) unless
``max_length`` is given, where ``FlagReranker`` cuts at 512 by default (the same score for a pair of fewer tokens);
the weights in the dtype transformers loads them in (the model's own: float32 for bge-reranker-v2-m3), on CUDA too,
where ``FlagReranker`` may run fp16 (``use_fp16``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import dspy
import numpy as np

from multihop.lm import models

from .query import Hits, pick

NAME = "cross-encoder"

_MODELS: dict[tuple, tuple] = {}  # (folder, max_length, device) → (CrossEncoder, the lock its predictions take)
_LOADING = threading.Lock()


def resolve_cross_encoder(model: str, revision: str | None = None) -> tuple[Path, str | None]:
    """The folder of cross-encoder ``model`` and the Hub commit it is (None for a folder outside huggingface_hub's
    cache): a Hub id at ``revision`` when given (a config's record), else as written; else a folder on disk. A model
    that is neither is a one-line ``FileNotFoundError``; a Hub model that cannot be had, the Hub's
    :class:`~multihop.lm.models.HubModelError`."""
    if models.is_hub_id(model):
        repo = model.partition("@")[0]
        folder, commit = models.hub_snapshot(f"{repo}@{revision}" if revision else model)
        return folder, commit
    folder = Path(model).expanduser()
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"the cross-encoder {model!r} is neither a model folder (with config.json) nor a "
                                "Hugging Face Hub model (org/name, e.g. BAAI/bge-reranker-v2-m3)")
    return folder, models.snapshot_revision(folder)


class CrossEncoderReranker:
    """``rerank(query, candidates, k)``: the top ``k`` candidate texts by the cross-encoder's score of the pair
    (query, candidate), best first (the earlier on a tie), with the ids of every candidate; the pairs are scored
    ``batch_size`` at a time.

    Args:
        model: a model folder or a Hugging Face Hub id (``org/name[@revision]``); required (no cross-encoder ships
            offline).
        revision: the Hub commit to load (a config's record); None: the id's own revision, else the Hub's latest.
        max_length: the tokens a pair is cut to (None: the model's own limit).
        batch_size: pairs a forward pass.
        device: ``"cuda"``, ``"cpu"``, ...; None: CUDA when there is one.
    """

    name = NAME

    def __init__(self, model: str | None = None, revision: str | None = None, max_length: int | None = None,
                 batch_size: int = 32, device: str | None = None):
        if not model:
            raise ValueError("the cross-encoder reranker needs a model: rerank=cross-encoder:MODEL, a Hugging Face "
                             "Hub id (e.g. cross-encoder:BAAI/bge-reranker-v2-m3) or a model folder")
        if batch_size < 1:
            raise ValueError(f"the cross-encoder's batch_size must be at least 1, not {batch_size}")
        self.folder, self.revision = resolve_cross_encoder(model, revision)
        # a Hub id without its revision (recorded apart), a folder as an absolute path: a saved retriever loads it
        # from any working folder
        self.model_name = model.partition("@")[0] if models.is_hub_id(model) else str(self.folder.resolve())
        self.max_length, self.batch_size, self.device = max_length, batch_size, device

    def loaded(self) -> tuple:
        """The process's one ``CrossEncoder`` of this folder, length and device (loaded on first use), with the lock
        its predictions take."""
        key = (str(self.folder), self.max_length, self.device)
        with _LOADING:
            if key not in _MODELS:
                from sentence_transformers import CrossEncoder

                model = CrossEncoder(str(self.folder), device=self.device, max_length=self.max_length,
                                     local_files_only=True)
                if model.num_labels != 1:
                    raise ValueError(f"the cross-encoder {self.model_name!r} has {model.num_labels} labels; a reranker "
                                     "needs one relevance score a pair (num_labels=1)")
                _MODELS[key] = (model, threading.Lock())
            return _MODELS[key]

    def scores(self, query: str, texts: list[str]) -> np.ndarray:
        """The model's logit for each pair (``query``, text)."""
        import torch

        model, lock = self.loaded()
        with lock:
            return np.asarray(model.predict([(query, text) for text in texts], batch_size=self.batch_size,
                                            activation_fn=torch.nn.Identity(), show_progress_bar=False),
                              dtype=np.float32).reshape(len(texts))

    def rerank(self, query: str, candidates: dspy.Prediction, k: int) -> Hits:
        if not candidates.ids:
            return Hits(passages=[], ids=[], scores=[], candidates=[])
        scores = self.scores(query, list(candidates.passages))
        order = np.argsort(-scores, kind="stable")[:k]
        return pick(candidates, order, [float(scores[i]) for i in order], candidates=list(candidates.ids))

    def config(self) -> dict:
        """The registry name, the model (a Hub id without its revision, or a folder's absolute path), the Hub commit it
        is (None: a folder), the length pairs are cut to and the batch size: what rebuilds this reranker
        (:func:`~.rerankers.load_reranker`)."""
        return {"reranker": self.name, "model": self.model_name, "revision": self.revision,
                "max_length": self.max_length, "batch_size": self.batch_size}
