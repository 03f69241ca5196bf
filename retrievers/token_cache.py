"""Per-passage token states kept beside an index so RaLa reranks without re-encoding (CoopRAG §3.4, App. E.9).

Layout of ``<index>/tokens/``: ``offsets.npy`` (``[N+1]`` row starts), ``last.f16`` (``[total_tokens, d]`` last-layer
token states), ``layer-<l>.f16`` for any premature layer kept, and ``cls.f16`` (``[N, L+1, d]`` the ``[CLS]`` state of
every layer), all float16 and memory-mapped, plus ``meta.json``. Storage is about ``2·d`` bytes per token and
layer (MPNet: ~1.5 KB per token, ~180 KB per MuSiQue paragraph), so a corpus of millions of passages should keep
only the last layer, or none and let RaLa recompute the top-n.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from multihop.paths import atomic_dir, read_json

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
        self.layers = tuple(self.meta["layers"])
        self._last = _open(self.directory / "last.f16", (total, dim))
        self._cls = _open(self.directory / "cls.f16", (count, self.meta["num_layers"] + 1, dim))
        self._layer = {layer: _open(self.directory / f"layer-{layer}.f16", (total, dim)) for layer in self.layers}

    def __len__(self) -> int:
        return self.meta["count"]

    def get(self, rows: list[int], layers: tuple[int, ...] = ()) -> tuple[list, np.ndarray, dict[int, list]]:
        """Last-layer tokens, ``[CLS]`` states ``[n, L+1, d]`` and the kept premature layers' tokens of ``rows``."""
        missing = set(layers) - set(self.layers)
        if missing:
            raise KeyError(f"the token cache keeps layers {self.layers}, not {sorted(missing)}")
        spans = [(int(self.offsets[r]), int(self.offsets[r + 1])) for r in rows]
        tokens = [np.asarray(self._last[a:b], dtype=np.float32) for a, b in spans]
        layer_tokens = {layer: [np.asarray(self._layer[layer][a:b], dtype=np.float32) for a, b in spans]
                        for layer in layers}
        return tokens, np.asarray(self._cls[rows], dtype=np.float32), layer_tokens

    @staticmethod
    def write(directory: str | Path, shards: list[Path], num_layers: int, layers: tuple[int, ...]) -> TokenCache:
        """Assemble the token cache from the encoding shards (``.npz`` files of :func:`~.index.encode_corpus`),
        streaming one shard at a time into a temporary folder renamed into place at the end."""
        directory = Path(directory)
        lengths = [np.load(path)["lengths"] for path in shards]
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(np.int64)
        count, total = len(offsets) - 1, int(offsets[-1])
        dim = int(np.load(shards[0])["pooled"].shape[1])
        with atomic_dir(directory) as tmp:
            last = np.lib.format.open_memmap(tmp / "last.f16", "w+", np.float16, (total, dim))
            cls = np.lib.format.open_memmap(tmp / "cls.f16", "w+", np.float16, (count, num_layers + 1, dim))
            per_layer = {layer: np.lib.format.open_memmap(tmp / f"layer-{layer}.f16", "w+", np.float16, (total, dim))
                         for layer in layers}
            row = token = 0
            for path in shards:
                shard = np.load(path)
                n, t = len(shard["lengths"]), int(shard["lengths"].sum())
                last[token : token + t] = shard["tokens"]
                cls[row : row + n] = shard["cls"]
                for layer, target in per_layer.items():
                    target[token : token + t] = shard[f"layer_{layer}"]
                row, token = row + n, token + t
            for array in (last, cls, *per_layer.values()):
                array.flush()
            np.save(tmp / "offsets.npy", offsets)
            meta = {"count": count, "dimension": dim, "num_layers": num_layers, "layers": list(layers), "tokens": total}
            (tmp / META).write_text(json.dumps(meta, indent=2))
        return TokenCache(directory)


def _open(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    array = np.load(path, mmap_mode="r")
    if array.shape != shape:
        raise ValueError(f"{path} holds an array of shape {array.shape}, expected {shape}; rebuild the index")
    return array
