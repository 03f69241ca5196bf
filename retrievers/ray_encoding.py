"""An index build's encoding on Ray (``multihop index build ... --ray``): Ray Data maps the shards still missing over a
pool of encoder actors (one encoder loaded per actor, on a GPU when the actor has one), each writing its shards into
the layout :func:`~.index.encode_corpus` writes and resumes from; the build then reads them as if it had encoded
them itself. A shard is the unit of resumption: an interrupted Ray build leaves the finished shards, and the next
build (on Ray or not) encodes only the others.

A shard's texts travel to its actor with the task; its file is written by the actor, so on a cluster of several
machines the build folder (``MULTIHOP_HOME``) must be on a filesystem every node sees.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from multihop.data.corpus import Corpus
from multihop.evaluation.ray_cluster import actor_cpus, connect

from .encoder import Encoder
from .index import SHARD_SIZE, encode_corpus, prepare_shards, shard_path, write_shard


class _ShardEncoder:
    """A Ray Data actor: one encoder, writing each shard of a batch to its file."""

    def __init__(self, config: dict, token_layers: tuple[int, ...] | None, token_dtype: str, threads: int):
        import torch

        torch.set_num_threads(max(1, threads))  # an actor's share of the node's cores
        self.encoder = Encoder(**config)  # the driver's settings, its batch size and precision among them
        self.token_layers, self.dtype = token_layers, np.dtype(token_dtype)

    def __call__(self, batch: dict) -> dict:
        for path, texts in zip(batch["path"], batch["texts"], strict=True):
            write_shard(Path(path), list(texts), self.encoder, self.token_layers, self.dtype)
        return {"path": list(batch["path"])}


def ray_encode_corpus(corpus: Corpus, encoder: Encoder, work_dir: Path, shard_size: int = SHARD_SIZE,
                      token_layers: tuple[int, ...] | None = None, token_dtype: str = "float16", workers: int = 2,
                      address: str = "auto", gpus_per_worker: float | None = None):
    """:func:`~.index.encode_corpus` with the missing shards encoded by ``workers`` Ray actors, each on
    ``gpus_per_worker`` GPUs (default: one when the cluster has GPUs: one encoder per GPU, at most as many actors as
    GPUs) or else one CPU; returns the same :class:`~.index.CorpusEncoding`."""
    ray = connect(address)
    gpus = ray.cluster_resources().get("GPU", 0)
    if gpus_per_worker is None:
        gpus_per_worker = 1.0 if gpus else 0.0
    if gpus_per_worker:
        workers = max(1, min(workers, int(gpus // gpus_per_worker)))
    prepare_shards(corpus, encoder, work_dir, shard_size, token_layers, token_dtype)
    texts = corpus.texts()
    todo = [{"path": str(shard_path(work_dir, number)), "texts": texts[start : start + shard_size]}
            for number, start in enumerate(range(0, len(texts), shard_size))
            if not shard_path(work_dir, number).exists()]
    if todo:
        workers = max(1, min(workers, len(todo)))
        cpus = 0 if gpus_per_worker else actor_cpus(ray, workers)
        threads = max(1, int(ray.cluster_resources().get("CPU", 1)) // workers) if cpus else 1
        config = {**encoder.config(), "batch_size": encoder.batch_size}
        dataset = ray.data.from_items(todo).map_batches(
            _ShardEncoder, batch_size=1, compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=cpus,
            num_gpus=gpus_per_worker, fn_constructor_kwargs={"config": config, "token_layers": token_layers,
                                                             "token_dtype": token_dtype, "threads": threads})
        for _ in dataset.iter_rows():  # drives the encoding; each row is a shard written
            pass
    return encode_corpus(corpus, encoder, work_dir, shard_size, token_layers, token_dtype)
