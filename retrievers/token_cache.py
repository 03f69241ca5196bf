"""Per-passage token states kept beside an index so RaLa reranks without re-encoding (CoopRAG §3.4, App. E.9).

Layout of ``<index>/tokens/``: ``offsets.npy`` (``[N+1]`` row starts), ``last.<part>`` (``[total_tokens, ...]`` the last
layer's token states in the cache's form, :mod:`.token_codecs`: ``last.f16`` in ``fp16``, ``last.i8`` and ``last.scale``
in ``int8``, ``last.pq`` and its quantiser ``last.codec.faiss`` in ``pq``, ``last.centroid``, ``last.residual`` and the
trained state ``last.plaid.npz`` in ``plaid``, a trained projection's maps in it), ``layer-<l>.<part>`` for any
premature layer an Eq. 3 score reads, and ``cls.<part>`` (``[N, C, ...]``) the ``[CLS]`` state of the ``C`` kept layers
(``cls_layers``; every layer 0..L unless the build named the ones its reranker reads) in the form :func:`cls_form` gives
(the tokens' form; int8 in ``pq``; in ``plaid`` int8 of a PCA projection to the form's dimensions, its state
``cls.pca.npz``), all memory-mapped, plus ``meta.json``, which records the form, the bytes a token, each stored layer's
codec (``codecs``: for ``plaid`` its projection's kind and dimensions, the bits and ``K``) and the ``[CLS]`` states'
form (``cls_form``). A cache written before the forms (no ``form`` in its meta) is an ``fp16`` one with every ``[CLS]``
layer, and loads as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from multihop.data.paths import atomic_dir, read_json

from .plaid_codec import ProjectedInt8Codec, parse_plaid
from .token_codecs import DEFAULT_TOKEN_STATES, TokenCodec, canonical_form, codec, trained_form

META = "meta.json"


class TokenCache:
    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        meta_path = self.directory / META
        if not meta_path.exists():
            raise FileNotFoundError(f"{self.directory} holds no token cache ({META} missing)")
        self.meta = read_json(meta_path)
        self.offsets = np.load(self.directory / "offsets.npy")
        count, dim, total = self.meta["count"], self.meta["dimension"], int(self.offsets[-1])
        self.form = self.meta.get("form", DEFAULT_TOKEN_STATES)
        self.layers = tuple(self.meta["layers"])
        self.cls_layers = tuple(self.meta.get("cls_layers", range(self.meta["num_layers"] + 1)))
        trained = self.directory if trained_form(self.form) else None
        self.codecs = {stem: codec(self.form, trained, stem) for stem in _stems(self.layers)}
        self.cls_form = self.meta.get("cls_form", cls_form(self.form))
        self.cls_codec = cls_codec(self.cls_form, self.directory)
        self._tokens = {stem: _open_parts(self.directory, stem, self.codecs[stem], (total,), dim)
                        for stem in _stems(self.layers)}
        self._cls = _open_parts(self.directory, "cls", self.cls_codec, (count, len(self.cls_layers)), dim)

    def __len__(self) -> int:
        return self.meta["count"]

    def keeps(self, layers: tuple[int, ...] = (), cls_layers: tuple[int, ...] = ()) -> bool:
        """Whether the cache holds the premature layers' tokens ``layers`` and the ``[CLS]`` states ``cls_layers``."""
        return set(layers) <= set(self.layers) and set(cls_layers) <= set(self.cls_layers)

    def bytes_per_token(self) -> int:
        """Bytes the last layer's states take a token in this cache's form."""
        return self.codecs["last"].bytes_per_vector(self.meta["dimension"])

    def get(self, rows: list[int], layers: tuple[int, ...] = ()) -> tuple[list, np.ndarray, dict[int, list]]:
        """Last-layer tokens, ``[CLS]`` states ``[n, L+1, d]`` (NaN at the layers not kept) and the kept premature
        layers' tokens of ``rows``, decoded to float32."""
        if not self.keeps(layers):
            raise KeyError(f"the token cache keeps layers {self.layers}, not {sorted(set(layers) - set(self.layers))}")
        spans = [(int(self.offsets[r]), int(self.offsets[r + 1])) for r in rows]
        tokens = [self._decode("last", a, b) for a, b in spans]
        layer_tokens = {layer: [self._decode(f"layer-{layer}", a, b) for a, b in spans] for layer in layers}
        return tokens, self._cls_states(rows), layer_tokens

    def _cls_states(self, rows: list[int]) -> np.ndarray:
        """The ``[CLS]`` states of ``rows``, ``[n, L+1, d]``, NaN at the layers not kept."""
        dim = self.meta["dimension"]
        cls = np.full((len(rows), self.meta["num_layers"] + 1, dim), np.nan, dtype=np.float32)
        kept = self.cls_codec.decode({part: np.asarray(array[rows]).reshape(-1, *array.shape[2:])
                                      for part, array in self._cls.items()})
        cls[:, list(self.cls_layers)] = kept.reshape(len(rows), len(self.cls_layers), dim)
        return cls

    @property
    def projected(self):
        """The last layer's codec when it scores in its projected space (``plaid``: ``decode_scorable`` and
        ``lift_query``), else None."""
        last = self.codecs["last"]
        return last if hasattr(last, "decode_scorable") else None

    def get_projected(self, rows: list[int]) -> tuple[list, np.ndarray, np.ndarray]:
        """For a cache whose codec scores in its projected space (:attr:`projected`): the last-layer tokens of
        ``rows`` as ``[t, dim + 1]`` vectors whose inner product with the codec's lifted query is the cosine with the
        decoded token (``decode_scorable``), the ``[CLS]`` states as :meth:`get` gives them and each row's first
        token decoded to ``d`` dims ``[n, d]`` (the last layer's ``[CLS]``, which RaLa's ω compares with the other
        layers')."""
        codec = self.projected
        spans = [(int(self.offsets[r]), int(self.offsets[r + 1])) for r in rows]
        arrays = self._tokens["last"]
        picked = np.concatenate([np.arange(a, b) for a, b in spans])  # one decode for every row
        scorable = codec.decode_scorable({part: array[picked] for part, array in arrays.items()})
        tokens = np.split(scorable, np.cumsum([b - a for a, b in spans])[:-1])
        heads = codec.decode({part: array[[a for a, _ in spans]] for part, array in arrays.items()})
        return tokens, self._cls_states(rows), heads

    def _decode(self, stem: str, start: int, stop: int) -> np.ndarray:
        return self.codecs[stem].decode({part: array[start:stop] for part, array in self._tokens[stem].items()})

    @staticmethod
    def write(directory: str | Path, shards: list[Path], num_layers: int, layers: tuple[int, ...],
              form: str = DEFAULT_TOKEN_STATES, cls_layers: tuple[int, ...] | None = None, seed: int = 0,
              cls_states: str | None = None, projection: dict[str, np.ndarray] | None = None) -> TokenCache:
        """Assemble the token cache from the encoding shards (``.npz`` files of :func:`~.index.encode_corpus`) in
        ``form``, keeping the ``[CLS]`` states of ``cls_layers`` (None: every layer), streaming one shard at a time
        into a temporary folder renamed into place at the end. A ``pq`` or ``plaid`` codec is first trained on token
        states drawn from the shards with ``seed`` (their ``training_size``), and a projected ``[CLS]`` codec on the
        kept ``[CLS]`` states. ``cls_states`` keeps the ``[CLS]`` states in another form than :func:`cls_form`'s
        (a measurement's comparison). ``projection``: the trained maps a ``plaid:…:trained`` form's last layer is
        coded through (:func:`~.plaid_projection.trained_projection`); the premature layers, if kept, are projected
        by PCA of their own tokens."""
        directory, form = Path(directory), canonical_form(form)
        cls_layers = tuple(range(num_layers + 1)) if cls_layers is None else tuple(sorted(set(cls_layers)))
        lengths = [np.load(path)["lengths"] for path in shards]
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(np.int64)
        count, total = len(offsets) - 1, int(offsets[-1])
        dim = int(np.load(shards[0])["cls"].shape[-1])
        stems = _stems(layers)
        codecs = {stem: codec(form) for stem in stems}
        for stem, kind in codecs.items():
            if not kind.trained:
                sample = _sample_tokens(shards, _shard_key(stem), lengths, total, kind.training_size(dim, total), seed)
                if stem == "last" and projection is not None:
                    kind.train(sample, seed=seed, tokens=total, projection=projection)
                else:
                    if stem != "last" and getattr(kind, "projection", "pca") == "trained":
                        kind.projection = "pca"
                    kind.train(sample, seed=seed, tokens=total)
        cls_name = cls_states or cls_form(form)
        cls_kind = cls_codec(cls_name)
        if not cls_kind.trained:
            sample = _sample_cls(shards, cls_layers, lengths, cls_kind.training_size(dim, count * len(cls_layers)),
                                 seed)
            cls_kind.train(sample, seed=seed)
        with atomic_dir(directory) as tmp:
            targets = {stem: _create_parts(tmp, stem, codecs[stem], (total,), dim) for stem in stems}
            cls = _create_parts(tmp, "cls", cls_kind, (count, len(cls_layers)), dim)
            row = token = 0
            for path in shards:
                shard = np.load(path)
                n, t = len(shard["lengths"]), int(shard["lengths"].sum())
                for stem, target in targets.items():
                    _fill(target, token, codecs[stem].encode(shard[_shard_key(stem)]))
                kept = shard["cls"][:, list(cls_layers)].reshape(n * len(cls_layers), dim)
                _fill(cls, row, {part: codes.reshape(n, len(cls_layers), *codes.shape[1:])
                                 for part, codes in cls_kind.encode(kept).items()})
                row, token = row + n, token + t
            for arrays in (cls, *targets.values()):
                for array in arrays.values():
                    array.flush()
            for stem, kind in codecs.items():
                kind.save(tmp, stem)
            cls_kind.save(tmp, "cls")
            np.save(tmp / "offsets.npy", offsets)
            meta = {"count": count, "dimension": dim, "num_layers": num_layers, "layers": list(layers),
                    "cls_layers": list(cls_layers), "tokens": total, "form": form,
                    "bytes_per_token": codecs["last"].bytes_per_vector(dim),
                    "codecs": {stem: kind.describe() for stem, kind in codecs.items()},
                    "cls_form": cls_name}
            (tmp / META).write_text(json.dumps(meta, indent=2))
        return TokenCache(directory)


def describe_cache(directory: str | Path) -> dict:
    """What the token cache in ``directory`` records of its form (nothing is loaded): the form, the tokens, the bytes
    a token, each stored layer's codec (a ``plaid`` one's projection kind and dimensions, bits and centroids ``K``)
    and the ``[CLS]`` states' form."""
    meta = read_json(Path(directory) / META)
    form = meta.get("form", DEFAULT_TOKEN_STATES)
    return {"form": form, "tokens": meta.get("tokens"), "bytes_per_token": meta.get("bytes_per_token"),
            "codecs": meta.get("codecs", {}), "cls_form": meta.get("cls_form", cls_form(form))}


def cls_form(form: str) -> str:
    """The form the ``[CLS]`` states of a cache in ``form`` are kept in: as the tokens, but int8 for ``pq`` and int8
    of a PCA projection to the form's dimensions for ``plaid`` (one vector a passage and layer, from other layers than
    the codec was trained on)."""
    plaid = parse_plaid(form)
    if plaid is not None:
        return f"{ProjectedInt8Codec.form}:{plaid.dim}"
    return "int8" if trained_form(form) else form


def cls_codec(name: str, directory: Path | None = None) -> TokenCodec:
    """The codec of the ``[CLS]`` states kept in the form ``name`` (:func:`cls_form`): a projected one's trained
    state is read from ``directory`` when given."""
    kind, _, dim = name.partition(":")
    if kind == ProjectedInt8Codec.form:
        return ProjectedInt8Codec.load(directory, "cls") if directory is not None else ProjectedInt8Codec(int(dim))
    return codec(name)


def _stems(layers: tuple[int, ...]) -> list[str]:
    """The names of the token-state files: the last layer's and each kept premature layer's."""
    return ["last", *(f"layer-{layer}" for layer in layers)]


def _shard_key(stem: str) -> str:
    """The array of an encoding shard the token-state file ``stem`` is written from."""
    return "tokens" if stem == "last" else stem.replace("-", "_")


def _sample_tokens(shards: list[Path], key: str, lengths: list[np.ndarray], total: int, size: int,
                   seed: int) -> np.ndarray:
    """About ``size`` token states of the shards' array ``key``, the same share drawn from each."""
    rng = np.random.default_rng(seed)
    share = min(1.0, size / max(1, total))
    picked = []
    for path, shard_lengths in zip(shards, lengths, strict=True):
        t = int(shard_lengths.sum())
        take = max(1, round(t * share)) if t else 0
        picked.append(np.load(path)[key][np.sort(rng.choice(t, size=take, replace=False))].astype(np.float32))
    return np.concatenate(picked)


def _sample_cls(shards: list[Path], cls_layers: tuple[int, ...], lengths: list[np.ndarray], size: int,
                seed: int) -> np.ndarray:
    """About ``size`` of the kept layers' ``[CLS]`` states of the shards, the same share of passages from each."""
    rng = np.random.default_rng(seed)
    count = sum(len(shard_lengths) for shard_lengths in lengths)
    share = min(1.0, size / max(1, count * len(cls_layers)))
    picked = []
    for path, shard_lengths in zip(shards, lengths, strict=True):
        take = max(1, round(len(shard_lengths) * share)) if len(shard_lengths) else 0
        states = np.load(path)["cls"]
        rows = np.sort(rng.choice(len(shard_lengths), size=take, replace=False))
        picked.append(states[rows][:, list(cls_layers)].reshape(-1, states.shape[-1]))
    return np.concatenate(picked).astype(np.float32)


def _create_parts(directory: Path, stem: str, kind: TokenCodec, rows: tuple[int, ...], dim: int) -> dict:
    return {part: np.lib.format.open_memmap(directory / f"{stem}.{part}", "w+", dtype, (*rows, *shape))
            for part, (dtype, shape) in kind.parts(dim).items()}


def _open_parts(directory: Path, stem: str, kind: TokenCodec, rows: tuple[int, ...], dim: int) -> dict:
    arrays = {}
    for part, (_, shape) in kind.parts(dim).items():
        path = directory / f"{stem}.{part}"
        array = np.load(path, mmap_mode="r")
        if array.shape != (*rows, *shape):
            raise ValueError(f"{path} holds an array of shape {array.shape}, expected {(*rows, *shape)}; rebuild "
                             "the index")
        arrays[part] = array
    return arrays


def _fill(arrays: dict[str, np.ndarray], start: int, values: dict[str, np.ndarray]) -> None:
    for part, value in values.items():
        arrays[part][start : start + len(value)] = value
