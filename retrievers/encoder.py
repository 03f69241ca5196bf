"""Sentence encoders over the offline models (DESIGN.md, "Models offline"; CoopRAG §3.3 uses MPNet).

``Encoder("mpnet")`` resolves a registry name through :mod:`multihop.models` (checksum verified); any other value
is a path to a sentence-transformers folder (for example a fine-tuned encoder). Embeddings are L2-normalised so an
inner-product index ranks by cosine similarity. Runs on CUDA when present.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from multihop import models


class Encoder:
    def __init__(self, name: str = "mpnet", device: str | None = None, batch_size: int = 8):
        self.name = name
        self.path = models.resolve(name) if name in models.REGISTRY else Path(name)
        if not (self.path / "modules.json").exists() and not (self.path / "config.json").exists():
            known = ", ".join(models.REGISTRY)
            raise FileNotFoundError(f"{name!r} is neither a known encoder ({known}) nor a model folder")
        self.batch_size = batch_size
        self._device = device
        self._model = None

    @property
    def model(self):
        if self._model is None:
            import torch
            from sentence_transformers import SentenceTransformer

            device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
            self._model = SentenceTransformer(str(self.path), device=device, local_files_only=True)
        return self._model

    @property
    def dimension(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def checksum(self) -> str:
        """sha256 of the encoder's weights: an index records it and refuses a different encoder on load."""
        weights = self.path / "model.safetensors"
        spec = models.REGISTRY.get(self.name)
        if spec is not None and spec.kind == "encoder":
            return spec.sha256
        return models.sha256_file(weights) if weights.exists() else hashlib.sha256(str(self.path).encode()).hexdigest()

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """Normalised float32 embeddings, shape ``(len(texts), dimension)``."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
