"""``multihop merge`` of a comparison's or a reproduction's shard folders (``compare``/``reproduce --shard i/n``,
:mod:`multihop.experiments.shard_runs`): their runs joined, then the recorded command run on the merged folder, where
every question is answered, so that nothing is asked of the LM and the tables, charts and report are those one
unsharded run writes (ours)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from multihop.experiments.comparison import compare
from multihop.experiments.reproduce import reproduce
from multihop.experiments.shard_runs import join_shard_runs, recorded_arguments


def merge_shard_runs(out: str | Path, folders: Sequence[str | Path], console=None) -> dict:
    """Join the shard folders of one ``compare``/``reproduce`` run into ``out`` (a new folder,
    :func:`~multihop.experiments.shard_runs.join_shard_runs`), then run the recorded command on it to write its tables
    (``console`` prints them); returns what the command returns (``comparison.json``'s or ``reproduce.json``'s
    content)."""
    record = join_shard_runs(out, folders)
    arguments = recorded_arguments(record)
    if record["command"] == "compare":
        return compare(out, progress=False, console=console, **arguments)
    return reproduce(out=out, progress=False, console=console, **arguments)
