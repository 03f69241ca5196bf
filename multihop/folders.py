"""What every output folder of a long job keeps to itself: an exclusive lock while a job writes into it, and the
manifest of the run that started it, so that a rerun resumes only the same run.

The lock (``filelock`` on ``.multihop.lock``, the holder's pid beside it) is taken at once or refused: a second job
into the same folder stops with the first one's pid instead of duplicating its work. The run manifest
(``run.json``) records what makes the folder's rows mean something — the program and its settings, the LM, the data
and its checksum, the limit —; a rerun whose manifest differs is refused with the keys that differ.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from multihop.paths import atomic_write_text

LOCK = ".multihop.lock"
RUN_MANIFEST = "run.json"


class FolderInUseError(RuntimeError):
    """Another job is writing into the folder."""


class RunMismatchError(ValueError):
    """The folder holds another run's results."""


@contextmanager
def locked(folder: str | Path) -> Iterator[Path]:
    """Hold ``folder`` (created if needed) exclusively for the block; ``FolderInUseError`` names the holder's pid when
    another process holds it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock, holder = FileLock(folder / LOCK), folder / f"{LOCK}.pid"
    try:
        lock.acquire(timeout=0)
    except Timeout:
        pid = holder.read_text().strip() if holder.exists() else "unknown"
        raise FolderInUseError(f"{folder} is in use by another multihop process (pid {pid}); wait for it to finish "
                               "or write elsewhere") from None
    try:
        holder.write_text(str(os.getpid()))
        yield folder
    finally:
        holder.unlink(missing_ok=True)
        lock.release()


def check_run(folder: str | Path, manifest: dict, kind: str = "run") -> None:
    """Write ``manifest`` as the folder's run manifest on the first start; on a rerun, refuse one that differs,
    naming the keys."""
    path = Path(folder) / RUN_MANIFEST
    manifest = json.loads(json.dumps(manifest, default=str))  # as it reads back
    if not path.exists():
        atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True))
        return
    try:
        saved = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RunMismatchError(f"{path} is damaged ({exc.msg}); delete the folder or write elsewhere") from None
    differ = sorted(key for key in saved.keys() | manifest.keys() if saved.get(key) != manifest.get(key))
    if differ:
        details = "; ".join(f"{key}: {saved.get(key)!r} there, {manifest.get(key)!r} now" for key in differ[:4])
        raise RunMismatchError(f"{folder} holds another {kind} ({details}); write elsewhere or delete the folder "
                               "to start over")
