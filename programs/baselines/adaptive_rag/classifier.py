"""Adaptive-RAG's query-complexity classifier, ours: a frozen sentence encoder and a linear softmax head over A, B, C.

The paper's classifier is T5-Large fine-tuned on the silver labels (§3.2, §4.2: AdamW, learning rate 3e-5, the epoch
that does best on a validation set within 100 training iterations). Here it is replaced by what trains on two CPU
cores in a few minutes from the models that install offline: each question is embedded once by a frozen encoder
(MiniLM by default, :class:`multihop.retrievers.Encoder`) and a linear layer over the embedding is trained with AdamW on
the whole set at once, for up to ``epochs`` epochs, keeping the epoch that does best on a held-out share of the labels
(the paper's model selection: the best held-out accuracy, a tie going to the lower held-out loss, then to the later
epoch; without held-out labels, the last epoch). The split and the head's initial weights are drawn from ``seed``, and
a full-batch step on a CPU is deterministic, so the same labels, encoder and settings give the same head bit for bit.

A trained classifier is a folder: ``classifier.json`` (the manifest: format, labels, the encoder's configuration with
its weights' sha256, the embedding size, the training settings and what they gave, the label files' checksums),
``head.safetensors`` (the layer's weight and bias: no pickle) and ``files.json`` (every file's sha256, checked on
load). It is written through a temporary folder and a rename, and loading refuses another format, other labels, a
head of another size, a changed file, and an encoder other than the one it was trained on.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from multihop.data.folders import verify_inventory, write_inventory
from multihop.data.paths import atomic_dir, read_json

from .complexity import LABELS

MANIFEST, HEAD = "classifier.json", "head.safetensors"
KIND, FORMAT = "Adaptive-RAG query-complexity classifier", 1


class ClassifierMismatchError(ValueError):
    """A classifier folder that is not one, or that was made for another encoder, format or label set."""


class QuestionEncoder(Protocol):
    """What the classifier embeds questions with: :class:`multihop.retrievers.Encoder`, or any object that encodes
    texts into L2-normalised float32 rows and describes itself by a configuration naming its weights."""

    def encode(self, texts: list[str]) -> np.ndarray: ...

    def config(self) -> dict: ...


@dataclass(frozen=True)
class TrainingSettings:
    """How a head is trained: AdamW at ``lr`` with ``weight_decay`` for up to ``epochs`` full-batch epochs; the epoch
    kept is the best on the ``valid_share`` of the labels held out (none: the last); ``seed`` draws the split and the
    initial weights."""

    epochs: int = 100
    lr: float = 0.05
    weight_decay: float = 0.01
    valid_share: float = 0.1
    seed: int = 0

    def __post_init__(self):
        if self.epochs < 1 or self.lr <= 0 or self.weight_decay < 0 or not 0 <= self.valid_share < 1:
            raise ValueError("epochs must be at least 1, lr positive, weight_decay not negative and valid_share in "
                             "[0, 1)")


class ComplexityClassifier:
    """A question's complexity label (A, B or C) from its embedding: ``softmax(weight @ embedding + bias)``.

    Args:
        encoder: the frozen question encoder (its configuration is recorded with the head).
        weight: the head's ``[3, dimension]`` weight.
        bias: the head's ``[3]`` bias.
        folder: the folder it was loaded from (how a copy in another process loads it again).

    Example:
        >>> classifier = ComplexityClassifier.load("runs/adaptive-rag-classifier")
        >>> classifier("Who founded the company that makes the Xbox?")
        'C'
    """

    def __init__(self, encoder: QuestionEncoder, weight: np.ndarray, bias: np.ndarray, folder: Path | None = None):
        weight, bias = np.asarray(weight, dtype=np.float32), np.asarray(bias, dtype=np.float32)
        if weight.ndim != 2 or weight.shape[0] != len(LABELS) or bias.shape != (len(LABELS),):
            raise ClassifierMismatchError(f"a head over {len(LABELS)} labels has a [{len(LABELS)}, d] weight and a "
                                          f"[{len(LABELS)}] bias, not {weight.shape} and {bias.shape}")
        self.encoder, self.weight, self.bias, self.folder = encoder, weight, bias, folder

    def probabilities(self, questions: Sequence[str]) -> np.ndarray:
        """``[len(questions), 3]`` label probabilities, in :data:`LABELS` order."""
        embeddings = np.asarray(self.encoder.encode(list(questions)), dtype=np.float32)
        if embeddings.shape[1:] != (self.weight.shape[1],):
            raise ClassifierMismatchError(f"the encoder gives {embeddings.shape[1:]} embeddings; the head reads "
                                          f"{self.weight.shape[1]}-d ones")
        logits = embeddings @ self.weight.T + self.bias
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        return exp / exp.sum(axis=1, keepdims=True)

    def predict(self, questions: Sequence[str]) -> list[str]:
        """Each question's most probable label (the simpler one on a tie)."""
        return [LABELS[int(i)] for i in self.probabilities(questions).argmax(axis=1)]

    def __call__(self, question: str) -> str:
        return self.predict([question])[0]

    def save(self, folder: str | Path, record: dict | None = None) -> Path:
        """Write the classifier to ``folder`` (replacing a classifier there, refusing any other non-empty folder)
        with ``record`` (what trained it) in its manifest; returns the folder."""
        from safetensors.numpy import save_file

        folder = Path(folder)
        if folder.exists() and any(folder.iterdir()) and not (folder / MANIFEST).exists():
            raise ClassifierMismatchError(f"{folder} is a folder of other files, not a classifier: give a new "
                                          "folder to write the classifier to")
        manifest = {**(record or {}), "kind": KIND, "format": FORMAT, "labels": list(LABELS),
                    "encoder": self.encoder.config(), "dimension": int(self.weight.shape[1])}
        with atomic_dir(folder) as tmp:
            save_file({"weight": self.weight, "bias": self.bias}, str(tmp / HEAD))
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
            write_inventory(tmp)
        self.folder = folder
        return folder

    @classmethod
    def load(cls, folder: str | Path, encoder: QuestionEncoder | None = None) -> ComplexityClassifier:
        """The classifier saved in ``folder``, embedding with ``encoder`` (default: the one its manifest records,
        rebuilt and checked against the recorded weights); a folder of another kind, format or label set, a changed
        file, or an ``encoder`` other than the recorded one is refused."""
        folder = Path(folder)
        if not (folder / MANIFEST).is_file():
            raise FileNotFoundError(f"{folder} holds no classifier ({MANIFEST}): train one with `multihop "
                                    "adaptiverag train LABELS... --out DIR`")
        verify_inventory(folder)
        manifest = read_json(folder / MANIFEST)
        expected = {"kind": KIND, "format": FORMAT, "labels": list(LABELS)}
        differ = {key: manifest.get(key) for key, value in expected.items() if manifest.get(key) != value}
        if differ:
            raise ClassifierMismatchError(f"{folder} is not a classifier this version reads ({differ}, expected "
                                          f"{expected}): train it again")
        if encoder is None:
            from multihop.retrievers import Encoder

            encoder = Encoder(**manifest["encoder"])  # refuses weights whose sha256 is not the recorded one
        elif _identity(encoder.config()) != _identity(manifest["encoder"]):
            raise ClassifierMismatchError(f"{folder} was trained on encoder {_identity(manifest['encoder'])}, not "
                                          f"{_identity(encoder.config())}: give that encoder or train again")
        from safetensors.numpy import load_file

        head = load_file(str(folder / HEAD))
        if head["weight"].shape[1:] != (manifest["dimension"],):
            raise ClassifierMismatchError(f"{folder}: the head reads {head['weight'].shape[1:]} embeddings, the "
                                          f"manifest says {manifest['dimension']}-d ones: train it again")
        return cls(encoder, head["weight"], head["bias"], folder)

    def __deepcopy__(self, memo: dict) -> ComplexityClassifier:
        return self  # read-only: a program's copies (an optimizer's candidates) share it and its encoder

    def __reduce__(self):
        if self.folder is None:
            raise TypeError("a classifier that was never saved cannot be pickled: save it first")
        return _load_saved, (str(self.folder),)


def _load_saved(folder: str) -> ComplexityClassifier:
    return ComplexityClassifier.load(folder)


def _identity(config: dict) -> dict:
    """What makes two encoders the same for the classifier: their name and weights."""
    return {"name": config.get("name"), "sha256": config.get("sha256")}


def train_classifier(questions: Sequence[str], labels: Sequence[str], encoder: QuestionEncoder,
                     settings: TrainingSettings | None = None) -> tuple[ComplexityClassifier, dict]:
    """A classifier trained on ``questions`` and their silver ``labels`` (module docstring); returns it and the record
    of its training (settings, sizes, the label counts, the epoch kept and its validation accuracy), which
    :meth:`ComplexityClassifier.save` keeps in the manifest."""
    import torch

    settings = settings or TrainingSettings()
    if len(questions) != len(labels) or not questions:
        raise ValueError(f"need as many labels as questions, and some: {len(questions)} questions, {len(labels)} "
                         "labels")
    unknown = sorted(set(labels) - set(LABELS))
    if unknown:
        raise ValueError(f"unknown complexity labels {unknown}; one of {', '.join(LABELS)}")
    embeddings = torch.from_numpy(np.ascontiguousarray(encoder.encode(list(questions)), dtype=np.float32))
    targets = torch.tensor([LABELS.index(label) for label in labels])
    order = np.random.default_rng(settings.seed).permutation(len(questions))
    held = int(round(settings.valid_share * len(questions)))
    valid, train = order[:held], order[held:]
    if not len(train):
        raise ValueError(f"valid_share {settings.valid_share} leaves no question of {len(questions)} to train on")
    generator = torch.Generator().manual_seed(settings.seed)
    weight = torch.empty(len(LABELS), embeddings.shape[1])
    torch.nn.init.normal_(weight, std=0.01, generator=generator)
    weight.requires_grad_(True)
    bias = torch.zeros(len(LABELS), requires_grad=True)
    optimizer = torch.optim.AdamW([weight, bias], lr=settings.lr, weight_decay=settings.weight_decay)
    x, y = embeddings[torch.from_numpy(train)], targets[torch.from_numpy(train)]
    x_valid, y_valid = embeddings[torch.from_numpy(valid)], targets[torch.from_numpy(valid)]
    best: tuple = ((), 0, None, None)  # (score, epoch, weight, bias)
    for epoch in range(1, settings.epochs + 1):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(x @ weight.T + bias, y).backward()
        optimizer.step()
        score = ()  # without held-out labels every epoch ties, and the last one is kept
        if len(valid):
            with torch.no_grad():
                logits = x_valid @ weight.T + bias
                accuracy = float((logits.argmax(dim=1) == y_valid).float().mean())
                score = (accuracy, -float(torch.nn.functional.cross_entropy(logits, y_valid)))
        if score >= best[0]:  # the best held-out accuracy, a tie going to the lower held-out loss, then the later epoch
            best = (score, epoch, weight.detach().clone(), bias.detach().clone())
    score, epoch, kept_weight, kept_bias = best
    classifier = ComplexityClassifier(encoder, kept_weight.numpy(), kept_bias.numpy())
    record = {"training": {**asdict(settings), "train_questions": int(len(train)), "valid_questions": int(len(valid)),
                           "labels": dict(sorted(Counter(labels).items())), "epoch_kept": epoch,
                           "valid_accuracy": score[0] if score else None,
                           "valid_loss": -score[1] if score else None,
                           "questions_sha256": _questions_hash(questions, labels)}}
    return classifier, record


def _questions_hash(questions: Sequence[str], labels: Sequence[str]) -> str:
    """A checksum of the labelled questions a head was trained on."""
    return hashlib.sha256(json.dumps(list(zip(questions, labels, strict=True))).encode()).hexdigest()
