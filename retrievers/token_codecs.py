"""How an index stores token states (``--token-states``): the codecs of a :class:`~.token_cache.TokenCache`.

A late-interaction reranker (MaxSim, RaLa) reads every candidate's last-layer token states; kept as float16 they
cost ``2·d`` bytes a token (MPNet: 1,536 bytes, ~167 KB a MuSiQue paragraph), which at the papers' corpora is tens of
gigabytes to a terabyte. The forms:

- ``full``: float32, the states as the encoder computed them (the reference the others are measured against; an
  encoder computing in fp16 on a GPU gives fp16 values in it);
- ``fp16``: float16, ``2·d`` bytes a token (the default, as indexes were built before the forms);
- ``int8``: each token's vector scaled by its own largest magnitude into int8, ``d + 4`` bytes a token (MPNet: 772);
- ``pq``: ColBERTv2's residual compression through FAISS's standalone codec (``sa_encode``/``sa_decode``) of an
  ``IVF<K>,PQ<M>`` quantiser trained on a sample of the corpus's tokens: a coarse centroid (``K`` ≈ √tokens, a power
  of two up to 65,536: one or two bytes) and a product-quantised residual (``M`` = 32 sub-vectors of 8 bits), about
  34 bytes a token (ColBERTv2 keeps 20–36); each stored layer has a quantiser of its own;
- ``plaid[:bits[:dim[:trained]]]``: a projection to ``dim`` (default 128) learned on the corpus's tokens (PCA), or
  with ``:trained`` one trained to keep MaxSim's scores (:mod:`.plaid_projection`), then ColBERTv2's residual codec
  at ``bits`` (2, the default, or 4) a dimension (:mod:`.plaid_codec`): a centroid id and ``dim·bits/8`` bytes, 34
  bytes a token at 2 bits and 128 dimensions; each stored layer has a codec of its own;
- ``none``: no token states; a reranker encodes its ``n`` candidates at query time, in the encoder's batches (what
  a GPU does fast).

Decoded ``int8`` and ``pq`` vectors are L2-normalised again, as the encoder's states are, so MaxSim stays a mean of
cosines. The ``[CLS]`` states RaLa's ω reads are one vector a passage and layer, kept in the tokens' form (int8 in
``pq`` and ``plaid``). ``benchmarks/scale.py`` measures each form's bytes, R@k against ``full`` and rerank latency.
"""

from __future__ import annotations

import math
from pathlib import Path

import faiss
import numpy as np

from .codec_base import TokenCodec, normalised
from .plaid_codec import PlaidCodec, parse_plaid

TOKEN_STATES = ("full", "fp16", "int8", "pq", "plaid", "none")  # plaid also as plaid:BITS or plaid:BITS:DIM
DEFAULT_TOKEN_STATES = "fp16"
TRAIN_TOKENS = 65_536  # token vectors the pq codec is trained on, or 39 a centroid when that is more
PQ_SUBVECTORS = 32
CODEC_SUFFIX = "codec.faiss"  # a trained codec's file beside its codes: ``<stem>.codec.faiss``


def check_form(form: str) -> str:
    """``form`` when it names a token-state form (``plaid`` with its bits and dimensions checked), else a one-line
    ``ValueError``."""
    if form not in TOKEN_STATES and parse_plaid(form) is None:
        raise ValueError(f"unknown token-state form {form!r}; choose one of {', '.join(TOKEN_STATES)} "
                         "(plaid also as plaid:BITS or plaid:BITS:DIM)")
    return form


def canonical_form(form: str) -> str:
    """``form`` checked and spelt one way: a ``plaid`` form with its bits and dimensions (``plaid`` →
    ``plaid:2:128``), any other as it is."""
    plaid = parse_plaid(check_form(form))
    return plaid.name if plaid is not None else form


def trained_form(form: str) -> bool:
    """Whether a cache in ``form`` keeps a trained codec beside its codes (``pq``, ``plaid``)."""
    return form == "pq" or form.split(":")[0] == "plaid"


class FloatCodec(TokenCodec):
    """The states as floats: ``full`` (float32) or ``fp16``."""

    def __init__(self, form: str):
        self.form = form
        self.suffix, self.dtype = ("f32", np.float32) if form == "full" else ("f16", np.float16)

    def parts(self, dim):
        return {self.suffix: (self.dtype, (dim,))}

    def encode(self, vectors):
        return {self.suffix: np.asarray(vectors, dtype=self.dtype)}

    def decode(self, parts):
        return np.array(parts[self.suffix], dtype=np.float32)  # a copy: never a read-only view of the memory map


class Int8Codec(TokenCodec):
    """Each vector scaled by its own largest magnitude into int8 (``round(127·x / max|x|)``) and its scale kept."""

    form = "int8"

    def parts(self, dim):
        return {"i8": (np.int8, (dim,)), "scale": (np.float32, ())}

    def encode(self, vectors):
        vectors = np.asarray(vectors, dtype=np.float32)
        scale = np.abs(vectors).max(axis=1) / 127.0
        scale[scale == 0] = 1.0
        return {"i8": np.rint(vectors / scale[:, None]).astype(np.int8), "scale": scale.astype(np.float32)}

    def decode(self, parts):
        return normalised(parts["i8"].astype(np.float32) * np.asarray(parts["scale"], dtype=np.float32)[:, None])


class ResidualPQCodec(TokenCodec):
    """ColBERTv2-like residual codes: FAISS's standalone codec of an ``IVF<K>,PQ<M>x<bits>`` quantiser (the nearest of
    ``K`` centroids, then the residual product-quantised), trained on a sample of the tokens."""

    form = "pq"

    def __init__(self, index: faiss.Index | None = None):
        self.index = index
        self.trained = index is not None and index.is_trained

    @staticmethod
    def factory(dim: int, tokens: int) -> str:
        """The quantiser for ``tokens`` training vectors: ``K`` a power of two near √tokens (at least 39 vectors a
        centroid, at most 65,536), :data:`PQ_SUBVECTORS` sub-vectors (fewer when they do not divide ``dim``) of 8 bits
        (fewer below 256·39 training vectors)."""
        near_root = round(math.log2(max(1.0, math.sqrt(tokens))))
        centroids = 2 ** max(0, min(16, near_root, int(math.log2(max(1, tokens // 39)))))
        subvectors = max(m for m in range(1, PQ_SUBVECTORS + 1) if dim % m == 0)
        bits = max(1, min(8, int(math.log2(max(2, tokens // 39)))))
        return f"IVF{centroids},PQ{subvectors}x{bits}"

    def parts(self, dim):
        return {"pq": (np.uint8, (self.index.sa_code_size(),))}

    @classmethod
    def training_size(cls, dim: int, tokens: int) -> int:
        """Token vectors to train the quantiser of ``tokens`` on: :data:`TRAIN_TOKENS`, or 39 a centroid when there
        are more centroids, at most every token."""
        centroids = int(cls.factory(dim, tokens).split(",")[0][3:])
        return min(tokens, max(TRAIN_TOKENS, 39 * centroids))

    def train(self, sample, seed=0, tokens=None):
        sample = normalised(np.asarray(sample, dtype=np.float32))
        factory = self.factory(sample.shape[1], tokens or len(sample))
        index = faiss.index_factory(sample.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
        ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
        ivf.do_polysemous_training = False  # polysemous codes serve Hamming search, which decoding never does
        ivf.cp.seed = ivf.pq.cp.seed = seed
        index.train(sample)
        self.index, self.trained = index, True

    def encode(self, vectors):
        return {"pq": self.index.sa_encode(np.ascontiguousarray(vectors, dtype=np.float32))}

    def decode(self, parts):
        return normalised(self.index.sa_decode(np.ascontiguousarray(parts["pq"])))

    def describe(self):
        ivf = faiss.extract_index_ivf(self.index)
        return {"codec": "faiss-ivf-pq", "centroids": int(ivf.nlist), "code_bytes": int(self.index.sa_code_size())}

    def save(self, directory, stem):
        faiss.write_index(self.index, str(directory / f"{stem}.{CODEC_SUFFIX}"))

    @classmethod
    def load(cls, directory: Path, stem: str) -> ResidualPQCodec:
        return cls(faiss.read_index(str(directory / f"{stem}.{CODEC_SUFFIX}")))


def codec(form: str, directory: Path | None = None, stem: str = "last") -> TokenCodec:
    """The codec of a stored form (``pq``, ``plaid``: the one of the codes ``stem`` read from ``directory`` when given,
    else one to be trained)."""
    if check_form(form) == "none":
        raise ValueError("the token-state form 'none' stores nothing")
    plaid = parse_plaid(form)
    if plaid is not None:
        if directory is not None:
            return PlaidCodec.load(directory, stem)
        return PlaidCodec(plaid.bits, plaid.dim, projection=plaid.projection)
    if form == "int8":
        return Int8Codec()
    if form == "pq":
        return ResidualPQCodec.load(directory, stem) if directory is not None else ResidualPQCodec()
    return FloatCodec(form)
