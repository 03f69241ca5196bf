"""Resume checkpoints of long training jobs (retriever fine-tuning, distillation): tensors and plain values only."""

from __future__ import annotations

import pickle
from pathlib import Path


def load_checkpoint(path: Path) -> dict:
    """A checkpoint written by ``torch.save``, loaded with ``weights_only=True``: tensors, numbers, strings, lists,
    tuples and dicts only, so a file tampered with in an output folder cannot run code. ``ValueError`` names the file
    otherwise."""
    import torch

    try:
        return torch.load(path, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path} is not a checkpoint of tensors and plain values ({reason}); remove it to start "
                         "over") from None
