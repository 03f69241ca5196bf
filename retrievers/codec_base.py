"""What every token-state codec is (:mod:`.token_codecs`, :mod:`.plaid_codec`): the :class:`TokenCodec` protocol and
the row normalisation their decoders share."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


class TokenCodec:
    """A storage form of vectors: ``parts(dim)`` names the arrays a vector is stored as (suffix → dtype and shape
    per vector), ``encode`` turns float32 rows into those arrays, ``decode`` turns them back into float32 rows."""

    form: str
    trained = True

    def parts(self, dim: int) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        raise NotImplementedError

    def encode(self, vectors: np.ndarray) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def decode(self, parts: dict[str, np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def bytes_per_vector(self, dim: int) -> int:
        return sum(np.dtype(dtype).itemsize * math.prod(shape) for dtype, shape in self.parts(dim).values())

    def training_size(self, dim: int, tokens: int) -> int:
        """Vectors of ``tokens`` to :meth:`train` on (0 for a codec that learns nothing: ``full``, ``fp16``,
        ``int8``)."""
        return 0

    def train(self, sample: np.ndarray, seed: int = 0, tokens: int | None = None) -> None:
        """Fit the codec to a sample of the ``tokens`` vectors it will store (``pq`` and ``plaid`` learn from it; the
        others learn nothing)."""

    def save(self, directory: Path, stem: str) -> None:
        """Write what decoding the codes of ``stem`` needs besides them (``pq``: the trained quantiser; ``plaid``: the
        projection, centroids, cutoffs and weights)."""

    def describe(self) -> dict:
        """What the meta of a token cache records of this codec."""
        return {"codec": self.form}


def normalised(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)
