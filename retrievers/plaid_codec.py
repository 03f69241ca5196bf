"""The ``plaid`` token-state form: a learned projection, then ColBERTv2's residual codec (Santhanam et al., 2022, §3).

ColBERTv2 stores a 128-d token in 20–36 bytes with little loss; MPNet's tokens are 768-d, and product-quantising all
768 dimensions into 32 bytes (the ``pq`` form) loses far more. This form first projects the encoder's ``d``-dim
states to ``dim`` dimensions (64, 96 or 128), then codes them as ColBERTv2 does:

- *projection* (ours; ColBERTv2's encoder learns its 128-d output layer, an encoder here is off the shelf): PCA
  learned on the corpus's own tokens (mean-centred, the ``dim`` leading components, :func:`learn_projection`), the
  identity when the states are already ``≤ dim``, or with ``plaid:bits:dim:trained`` a pair of maps ``W`` (encoding)
  and ``B`` (decoding) trained from the PCA start to keep MaxSim's scores (:mod:`.plaid_projection`); the projected
  vectors are L2-normalised;
- *centroids*: ``K`` by k-means (FAISS's ``Kmeans``, 4 iterations as ColBERTv2 runs) on a sample of the projected
  tokens, ``K`` a power of two ≈ 16·√tokens as ColBERTv2 picks it (``2^floor(log2(16·√tokens))``, here from the exact
  token count where ColBERTv2 estimates it from a sample), capped so each centroid has at least
  :data:`POINTS_PER_CENTROID` sample tokens; a token is assigned to its nearest centroid by inner product. Ours: the
  k-means is spherical (ColBERTv2 runs plain k-means and normalises the centroids after), and its sample is
  ``max(65,536, 39·K/0.95)`` tokens, about 41 a centroid at scale (ColBERTv2 trains on every token of ~16·√(120·N)
  passages, FAISS keeping up to 256 a centroid);
- *residual*: each dimension of ``token − centroid`` quantised to ``bits`` ∈ {2, 4}: bucket cutoffs at the
  residuals' quantiles ``i/2^bits`` and each bucket's weight the mean of the residuals in it, both computed on a
  held-out 5% of the sample as ColBERTv2 does. Two choices are ours: the cutoffs and weights are kept per dimension
  (ColBERTv2 shares one set over its 128 learnt dimensions; PCA's dimensions differ in spread by orders of
  magnitude), and a weight is its bucket's mean (ColBERTv2 takes the bucket's middle quantile ``(i+½)/2^bits``;
  the mean is the least-squares value for the given cutoffs); the held-out share has no cap (ColBERTv2 caps it at
  50,000 tokens); 1 bit a dimension (ColBERTv2's default ``nbits``) is not offered. Codes are packed into bytes,
  each code's high bit first (``numpy.packbits``; ColBERTv2 packs each code's low bit first — the files are not
  meant to be read by its code).

A token is stored as its centroid id (uint16 when ``K ≤ 65,536``, else uint32) and ``dim·bits/8`` packed bytes:
128-d at 2 bits is 2 + 32 = 34 bytes. Decoding rebuilds the projected vector (centroid + bucket weights),
renormalises it, and back-projects it to ``d``: ``mean + s·Pᵀy``, renormalised, where ``s`` is the mean norm of the
centred projections (ours: the per-token norm is not stored), or ``mean + Bᵀy`` with a trained ``B``, so the
rerankers read ``d``-dim unit vectors as from any other form. A reranker that scores cosines (MaxSim, RaLa Eq. 4)
need not back-project (ours): :meth:`PlaidCodec.decode_scorable` gives each token as ``[y, 1] / ‖μ + Bᵀy‖`` (the
norm from ``‖μ‖² + 2(Bμ)·y + yᵀ(BBᵀ)y``, ``s²`` for PCA's orthonormal rows) and :meth:`PlaidCodec.lift_query` a query
token as ``[Bq, q·μ]``, whose inner product is the cosine with the back-projected token, in ``dim + 1`` dimensions.

The contract a PLAID first stage reads (it works in the projected space):

- ``codec.dim``, ``codec.bits``: the projected dimensions and the bits a dimension;
- ``codec.centroids``: ``[K, dim]`` float32, unit rows, in the projected space;
- ``codec.project(vectors)``: ``[n, d]`` → ``[n, dim]``, centred, projected, normalised (queries go through it too);
- ``codec.decode_projected(parts)``: the stored parts → ``[n, dim]`` normalised vectors in the projected space;
- the parts, memory-mapped by :class:`~.token_cache.TokenCache` like every form's: ``"centroid"`` (``[tokens]``
  centroid ids) and ``"residual"`` (``[tokens, dim·bits/8]`` uint8 packed codes).

The trained state (mean, components, scale, centroids, cutoffs, weights, and a trained projection's ``back``) is saved
beside the codes as ``<stem>.plaid.npz``, written atomically. A ``plaid`` cache keeps its ``[CLS]`` states (one a
passage and kept layer, RaLa's ω reads them) as int8 of their own PCA projection to ``dim``
(:class:`ProjectedInt8Codec`, ours): ``dim + 4`` bytes a state, where int8 of the ``d``-dim state (the ``pq`` form's
choice) costs ``d + 4``, which at four layers and MPNet's ~115 tokens a passage is 27 bytes a token beside the tokens'
34.

The codec is built on numpy, SciPy and FAISS, not through the ``fast-plaid`` package: every fast-plaid wheel pins
one torch exactly (1.7.0.2110 requires torch==2.11.0, with fastkmeans and usearch), and this project pins torch
2.13.0; a second torch in the test environment is beyond its budget.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np

from .codec_base import TokenCodec, normalised

PLAID = "plaid"
PLAID_BITS = (2, 4)
PLAID_DIMS = (64, 96, 128, 256)
PROJECTIONS = ("pca", "trained")  # PCA of the corpus's tokens; maps trained to keep MaxSim (:mod:`.plaid_projection`)
DEFAULT_BITS, DEFAULT_DIM = 2, 128
POINTS_PER_CENTROID = 39  # FAISS's own minimum for k-means without a warning
HELDOUT = 0.05  # the share of the sample the cutoffs and weights are computed on (ColBERTv2's)
KMEANS_ITERATIONS = 4  # ColBERTv2's default (its kmeans_niters)
TRAIN_TOKENS = 65_536  # the least sample when the corpus has more tokens
STATE_SUFFIX = "plaid.npz"  # the trained state beside the codes: ``<stem>.plaid.npz``


@dataclass(frozen=True)
class PlaidForm:
    """A parsed ``plaid[:bits[:dim[:projection]]]`` form.

    Args:
        bits: bits a projected dimension's residual is coded in (2 or 4).
        dim: the dimensions the tokens are projected to (64, 96, 128 or 256).
        projection: ``pca`` (learned on the corpus's tokens) or ``trained`` (:mod:`.plaid_projection`).
    """

    bits: int = DEFAULT_BITS
    dim: int = DEFAULT_DIM
    projection: str = "pca"

    @property
    def name(self) -> str:
        tail = "" if self.projection == "pca" else f":{self.projection}"
        return f"{PLAID}:{self.bits}:{self.dim}{tail}"


def parse_plaid(form: str) -> PlaidForm | None:
    """The bits, dimensions and projection of a ``plaid[:bits[:dim[:projection]]]`` form (None for any other form);
    a malformed one raises a one-line ``ValueError``."""
    head, *rest = form.split(":")
    if head != PLAID:
        return None
    projection = rest.pop() if len(rest) == 3 and rest[2] in PROJECTIONS else "pca"
    if len(rest) > 2 or not all(part.isdigit() for part in rest):
        raise ValueError(f"token-state form {form!r}: write plaid[:bits[:dim[:pca|trained]]], e.g. plaid, plaid:4, "
                         "plaid:2:64 or plaid:2:128:trained")
    bits = int(rest[0]) if rest else DEFAULT_BITS
    dim = int(rest[1]) if len(rest) > 1 else DEFAULT_DIM
    if bits not in PLAID_BITS:
        raise ValueError(f"token-state form {form!r}: bits must be one of {', '.join(map(str, PLAID_BITS))}")
    if dim not in PLAID_DIMS:
        raise ValueError(f"token-state form {form!r}: dim must be one of {', '.join(map(str, PLAID_DIMS))}")
    return PlaidForm(bits, dim, projection)


def learn_projection(sample: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean ``[d]`` and the ``dim`` leading principal components ``[dim, d]`` (orthonormal rows, the largest
    variance first) of ``sample``: the leading eigenvectors of its covariance (``scipy.linalg.eigh`` asked for those
    only, in float32; FAISS's ``PCAMatrix`` gives the same and trains many times slower at 768 dimensions), or a zero
    mean and the identity when ``d ≤ dim``."""
    from scipy.linalg import eigh

    d = sample.shape[1]
    if d <= dim:
        return np.zeros(d, dtype=np.float32), np.eye(d, dtype=np.float32)
    sample = np.asarray(sample, dtype=np.float32)
    mean = sample.mean(axis=0, dtype=np.float64).astype(np.float32)
    centred = sample - mean
    _, vectors = eigh(centred.T @ centred / len(sample), subset_by_index=[d - dim, d - 1])  # eigenvalues ascending
    return mean, np.ascontiguousarray(vectors[:, ::-1].T, dtype=np.float32)


def save_state(path: Path, state: dict[str, np.ndarray]) -> None:
    """Write ``state`` to the ``.npz`` file ``path`` (a temporary file beside it renamed into place)."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:
        np.savez(handle, **state)
    os.replace(temporary, path)


def load_state(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as saved:
        return {key: saved[key] for key in saved.files}


def plaid_forms() -> list[str]:
    """Every ``plaid:bits:dim`` form spelt out (the choices ``--token-states`` offers besides ``plaid``); the
    ``:trained`` ones need a trained projection handed to :meth:`~.token_cache.TokenCache.write`, which an index
    build does not pass, so they are not offered."""
    return [PlaidForm(bits, dim).name for bits in PLAID_BITS for dim in PLAID_DIMS]


def centroid_count(tokens: int, sample: int | None = None) -> int:
    """ColBERTv2's ``K`` for ``tokens`` tokens, ``2^floor(log2(16·√tokens))``, capped so that a ``sample`` of
    k-means training vectors gives each centroid :data:`POINTS_PER_CENTROID` (at least one centroid)."""
    wanted = int(math.floor(math.log2(16 * math.sqrt(max(1, tokens)))))
    cap = int(math.floor(math.log2(max(1, (sample if sample is not None else tokens) // POINTS_PER_CENTROID))))
    return 2 ** max(0, min(wanted, cap))


def bucket_cutoffs_and_weights(residuals: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Per dimension of ``residuals`` ``[n, dim]``: the ``2^bits − 1`` cutoffs (the quantiles ``i/2^bits``) and the
    ``2^bits`` weights (each bucket's mean residual; an empty bucket's middle quantile ``(i+½)/2^bits``)."""
    buckets = 2**bits
    residuals = np.asarray(residuals, dtype=np.float64)
    cutoffs = np.quantile(residuals, np.arange(1, buckets) / buckets, axis=0).T  # [dim, buckets - 1]
    middles = np.quantile(residuals, (np.arange(buckets) + 0.5) / buckets, axis=0).T  # [dim, buckets]
    codes = bucketize(residuals, cutoffs)
    weights = np.empty_like(middles)
    for bucket in range(buckets):
        inside = codes == bucket
        counts = inside.sum(axis=0)
        sums = np.where(inside, residuals, 0.0).sum(axis=0)
        weights[:, bucket] = np.where(counts > 0, sums / np.maximum(counts, 1), middles[:, bucket])
    return cutoffs.astype(np.float32), weights.astype(np.float32)


def bucketize(residuals: np.ndarray, cutoffs: np.ndarray) -> np.ndarray:
    """Each residual's bucket, ``[n, dim]`` uint8: how many of its dimension's cutoffs it exceeds (a value equal to
    a cutoff falls in the lower bucket, as ``torch.bucketize`` puts it)."""
    codes = np.zeros(residuals.shape, dtype=np.uint8)
    for column in range(cutoffs.shape[1]):
        codes += residuals > cutoffs[:, column]
    return codes


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """``[n, dim]`` codes of ``bits`` bits each → ``[n, dim·bits/8]`` bytes, the first code in the high bits."""
    shifts = np.arange(bits - 1, -1, -1, dtype=np.uint8)
    bit_rows = (codes[..., None] >> shifts) & 1  # [n, dim, bits], most significant bit first
    return np.packbits(bit_rows.reshape(len(codes), -1).astype(np.uint8), axis=1)


def unpack_codes(packed: np.ndarray, bits: int, dim: int) -> np.ndarray:
    """The inverse of :func:`pack_codes`: ``[n, dim·bits/8]`` bytes → ``[n, dim]`` codes."""
    return _BYTE_CODES[bits][np.asarray(packed)].reshape(len(packed), dim)


def _byte_codes(bits: int) -> np.ndarray:
    """The ``8/bits`` codes each byte value holds, ``[256, 8/bits]``, the high bits first."""
    values = np.arange(256, dtype=np.uint8)
    shifts = np.arange(8 - bits, -1, -bits, dtype=np.uint8)
    return ((values[:, None] >> shifts) & (2**bits - 1)).astype(np.uint8)


_BYTE_CODES = {bits: _byte_codes(bits) for bits in PLAID_BITS}


class PlaidCodec(TokenCodec):
    """The ``plaid`` form's codec (the module docstring): a projection to ``dim`` and ColBERTv2's residual codec at
    ``bits``, trained by :meth:`train` or loaded by :meth:`load`.

    Args:
        bits: bits a projected dimension's residual is coded in (2 or 4).
        dim: the dimensions the tokens are projected to (the encoder's own when it has no more).
        state: a trained state (:meth:`state`'s arrays), or None for a codec still to train.
        projection: ``pca`` or ``trained``; a ``trained`` codec's :meth:`train` takes the trained maps
            (:func:`~.plaid_projection.trained_projection`).
    """

    form = PLAID

    def __init__(self, bits: int = DEFAULT_BITS, dim: int = DEFAULT_DIM, state: dict[str, np.ndarray] | None = None,
                 projection: str = "pca"):
        self.bits, self.dim, self.projection = bits, dim, projection
        self.trained = state is not None
        if state is not None:
            self._set(state)

    def _set(self, state: dict[str, np.ndarray]) -> None:
        self.mean = np.asarray(state["mean"], dtype=np.float32)
        self.components = np.asarray(state["components"], dtype=np.float32)  # [dim, d]: PCA's orthonormal rows, or W
        self.scale = float(state["scale"])
        # the back-projection B [dim, d]: s·P for PCA, the trained map otherwise
        back = state.get("back")
        self.projection = "trained" if back is not None else self.projection
        self._back = np.ascontiguousarray(back if back is not None else self.scale * self.components,
                                          dtype=np.float32)
        self._gram = self._back @ self._back.T  # BBᵀ: ‖Bᵀy‖² = yᵀ(BBᵀ)y in dim-space
        self._mean_back = self._back @ self.mean  # Bμ
        self._mean_norm = float(self.mean @ self.mean)
        self._orthogonal = back is None  # BBᵀ = s²·I
        self.centroids = np.ascontiguousarray(state["centroids"], dtype=np.float32)
        self.cutoffs = np.asarray(state["cutoffs"], dtype=np.float32)
        self.weights = np.asarray(state["weights"], dtype=np.float32)
        self.dim = self.components.shape[0]
        self._search = faiss.IndexFlatIP(self.dim)
        self._search.add(self.centroids)
        self.trained = True

    def state(self) -> dict[str, np.ndarray]:
        state = {"mean": self.mean, "components": self.components, "scale": np.float32(self.scale),
                 "centroids": self.centroids, "cutoffs": self.cutoffs, "weights": self.weights,
                 "bits": np.int32(self.bits)}
        return {**state, "back": self._back} if self.projection == "trained" else state

    @property
    def centroid_dtype(self) -> np.dtype:
        return np.dtype(np.uint16) if len(self.centroids) <= 65_536 else np.dtype(np.uint32)

    def parts(self, dim: int) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {"centroid": (self.centroid_dtype, ()), "residual": (np.uint8, (self.dim * self.bits // 8,))}

    def describe(self) -> dict:
        """What the meta of a token cache records of this codec."""
        return {"codec": "colbertv2-residual", "bits": self.bits, "centroids": len(self.centroids),
                "projection": {"kind": self.projection_kind(), "from": int(self.components.shape[1]), "to": self.dim}}

    def projection_kind(self) -> str:
        """``trained``, ``pca`` or ``identity`` (states no wider than ``dim``)."""
        if self.projection == "trained":
            return "trained"
        return "pca" if self.components.shape[0] < self.components.shape[1] else "identity"

    @staticmethod
    def training_size(dim: int, tokens: int) -> int:
        """Tokens of ``tokens`` to train on: enough for ColBERTv2's ``K`` (:data:`POINTS_PER_CENTROID` each, plus the
        held-out share), at least :data:`TRAIN_TOKENS`, at most every token."""
        wanted = centroid_count(tokens) * POINTS_PER_CENTROID
        return min(tokens, max(TRAIN_TOKENS, math.ceil(wanted / (1 - HELDOUT))))

    def train(self, sample: np.ndarray, seed: int = 0, tokens: int | None = None,
              projection: dict[str, np.ndarray] | None = None) -> None:
        """Learn the projection on ``sample`` (``[n, d]``) — or take ``projection`` (``mean``, ``components`` W,
        ``back`` B and ``scale``: :func:`~.plaid_projection.trained_projection`'s), which a ``trained`` codec
        needs — then the centroids on 95% of its projections and the cutoffs and weights on the residuals of the
        held-out 5%; ``K`` is :func:`centroid_count` of ``tokens``."""
        sample = normalised(np.asarray(sample, dtype=np.float32))
        if self.projection == "trained" and projection is None:
            raise ValueError(f"{PlaidForm(self.bits, self.dim, 'trained').name} needs a trained projection "
                             "(retrievers.plaid_projection.trained_projection); build with plaid:BITS:DIM instead")
        if projection is not None:
            mean = np.asarray(projection["mean"], dtype=np.float32)
            components = np.asarray(projection["components"], dtype=np.float32)
        else:
            mean, components = learn_projection(sample, self.dim)
        if components.shape[0] * self.bits % 8:
            raise ValueError(f"{components.shape[0]} dimensions at {self.bits} bits do not fill whole bytes")
        centred = (sample - mean) @ components.T
        scale = float(projection["scale"]) if projection is not None else float(np.linalg.norm(centred, axis=1).mean())
        projected = normalised(centred)
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(projected))
        held = max(1, round(HELDOUT * len(projected))) if len(projected) > 1 else 0
        fit, heldout = projected[order[held:]], projected[order[:held]] if held else projected
        count = centroid_count(tokens or len(sample), len(fit))
        kmeans = faiss.Kmeans(components.shape[0], count, niter=KMEANS_ITERATIONS, seed=seed, spherical=True,
                              min_points_per_centroid=1)
        kmeans.train(np.ascontiguousarray(fit))
        centroids = normalised(kmeans.centroids.astype(np.float32))
        trained = {"back": np.asarray(projection["back"], dtype=np.float32)} if projection is not None else {}
        self._set({"mean": mean, "components": components, "scale": scale, "centroids": centroids,
                   "cutoffs": np.zeros((components.shape[0], 2**self.bits - 1)),
                   "weights": np.zeros((components.shape[0], 2**self.bits)), **trained})
        residuals = heldout - self.centroids[self.assign(heldout)]
        self.cutoffs, self.weights = bucket_cutoffs_and_weights(residuals, self.bits)

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """``[n, d]`` → ``[n, dim]``: centred, projected and L2-normalised."""
        return normalised((np.asarray(vectors, dtype=np.float32) - self.mean) @ self.components.T)

    def assign(self, projected: np.ndarray) -> np.ndarray:
        """Each projected vector's nearest centroid by inner product."""
        return self._search.search(np.ascontiguousarray(projected, dtype=np.float32), 1)[1][:, 0]

    def encode(self, vectors: np.ndarray) -> dict[str, np.ndarray]:
        projected = self.project(vectors)
        ids = self.assign(projected)
        codes = bucketize(projected - self.centroids[ids], self.cutoffs)
        return {"centroid": ids.astype(self.centroid_dtype), "residual": pack_codes(codes, self.bits)}

    def decode_projected(self, parts: dict[str, np.ndarray]) -> np.ndarray:
        """The stored parts → ``[n, dim]`` normalised vectors in the projected space (centroid + bucket weights)."""
        ids = np.asarray(parts["centroid"]).astype(np.int64)
        codes = unpack_codes(parts["residual"], self.bits, self.dim)
        return normalised(self.centroids[ids] + self.weights[np.arange(self.dim), codes])

    def back_project(self, projected: np.ndarray) -> np.ndarray:
        """Projected unit vectors → ``[n, d]`` unit vectors: ``mean + Bᵀy`` (``B = s·P`` for PCA), renormalised."""
        back = projected @ self._back
        back += self.mean
        return normalised(back)

    def decode(self, parts: dict[str, np.ndarray]) -> np.ndarray:
        return self.back_project(self.decode_projected(parts))

    def decode_scorable(self, parts: dict[str, np.ndarray]) -> np.ndarray:
        """The stored parts → ``[n, dim + 1]`` vectors ``[y, 1] / ‖μ + Bᵀy‖`` whose inner product with a query
        token's :meth:`lift_query` is its cosine with the decoded token, without back-projecting: ``q·(μ + Bᵀy) =
        q·μ + (Bq)·y`` and ``‖μ + Bᵀy‖² = ‖μ‖² + 2(Bμ)·y + yᵀ(BBᵀ)y``, the last term ``s²`` for PCA (orthonormal
        rows, unit ``y``) and a ``dim × dim`` product for a trained ``B``."""
        y = self.decode_projected(parts)
        quadratic = self.scale**2 * (y * y).sum(axis=1) if self._orthogonal else ((y @ self._gram) * y).sum(axis=1)
        norms = np.sqrt(np.maximum(self._mean_norm + 2 * (y @ self._mean_back) + quadratic, 1e-12))
        out = np.empty((len(y), self.dim + 1), dtype=np.float32)
        np.divide(y, norms[:, None], out=out[:, : self.dim])
        np.divide(1.0, norms, out=out[:, self.dim])
        return out

    def lift_query(self, queries: np.ndarray) -> np.ndarray:
        """Query token states ``[n, d]`` → ``[n, dim + 1]``: ``[Bq, q·μ]`` (:meth:`decode_scorable`)."""
        queries = np.asarray(queries, dtype=np.float32)
        return np.concatenate([queries @ self._back.T, (queries @ self.mean)[:, None]], axis=1)

    def save(self, directory: Path, stem: str) -> None:
        """Write the trained state to ``<stem>.plaid.npz`` in ``directory`` (a temporary file renamed into place)."""
        save_state(Path(directory) / f"{stem}.{STATE_SUFFIX}", self.state())

    @classmethod
    def load(cls, directory: Path, stem: str) -> PlaidCodec:
        """The codec whose state :meth:`save` wrote for ``stem`` in ``directory`` (a trained projection with it)."""
        state = load_state(Path(directory) / f"{stem}.{STATE_SUFFIX}")
        return cls(int(state["bits"]), int(state["components"].shape[0]), state)


class ProjectedInt8Codec(TokenCodec):
    """The ``[CLS]`` states of a ``plaid`` cache (ours): the centred states projected on their own ``dim`` leading
    principal components (:func:`learn_projection`, trained on the kept layers' states together), each projection
    scaled by its largest magnitude into int8 with its scale kept (``dim + 4`` bytes a state), decoded as
    ``mean + Pᵀz`` renormalised. The name a cache's meta records is ``pca-int8:<dim>``.

    Args:
        dim: the dimensions the states are projected to (the encoder's own when it has no more).
        state: a trained state (mean, components), or None for a codec still to train.
    """

    form = "pca-int8"

    def __init__(self, dim: int = DEFAULT_DIM, state: dict[str, np.ndarray] | None = None):
        self.dim, self.trained = dim, state is not None
        if state is not None:
            self.mean = np.asarray(state["mean"], dtype=np.float32)
            self.components = np.asarray(state["components"], dtype=np.float32)
            self.dim = self.components.shape[0]

    @property
    def name(self) -> str:
        return f"{self.form}:{self.dim}"

    def parts(self, dim):
        return {"i8": (np.int8, (self.dim,)), "scale": (np.float32, ())}

    def training_size(self, dim, tokens):
        return min(tokens, TRAIN_TOKENS)

    def train(self, sample, seed=0, tokens=None):
        self.mean, self.components = learn_projection(normalised(np.asarray(sample, dtype=np.float32)), self.dim)
        self.dim, self.trained = self.components.shape[0], True

    def encode(self, vectors):
        projected = (np.asarray(vectors, dtype=np.float32) - self.mean) @ self.components.T
        scale = np.abs(projected).max(axis=1) / 127.0
        scale[scale == 0] = 1.0
        return {"i8": np.rint(projected / scale[:, None]).astype(np.int8), "scale": scale.astype(np.float32)}

    def decode(self, parts):
        projected = parts["i8"].astype(np.float32) * np.asarray(parts["scale"], dtype=np.float32)[:, None]
        return normalised(self.mean + projected @ self.components)

    def describe(self):
        return {"codec": self.name}

    def save(self, directory, stem):
        save_state(Path(directory) / f"{stem}.pca.npz", {"mean": self.mean, "components": self.components})

    @classmethod
    def load(cls, directory: Path, stem: str) -> ProjectedInt8Codec:
        return cls(state=load_state(Path(directory) / f"{stem}.pca.npz"))
