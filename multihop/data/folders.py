"""What every output folder of a long job keeps to itself: an exclusive lock while a job writes into it, and the
manifest of the run that started it, so that a rerun resumes only the same run; and what every saved folder (an index,
a token cache, an encoder, a compiled program, an adapter) keeps: the list of its files with their sizes and sha256,
checked when it is loaded.

The lock (``filelock`` on ``.multihop.lock``, the holder's pid beside it) is taken at once or refused: a second job into
the same folder stops with the first one's pid instead of duplicating its work. The run manifest (``run.json``;
``<file>.run.json`` beside an output file) records what makes the rows mean something — the program and its settings,
the LM, the data and its checksum, the limit —; a rerun whose manifest differs is refused with the keys that differ.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from multihop.data.paths import atomic_write_text, read_json, remove_dead_temporaries

LOCK = ".multihop.lock"
RUN_MANIFEST = "run.json"
INVENTORY = "files.json"
VERIFIED = ".files.verified"  # the sizes and modification times of the files last found as listed


class ChecksumMismatchError(RuntimeError):
    """A file does not have its recorded or pinned sha256; it is refused."""


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


class FolderInUseError(RuntimeError):
    """Another job is writing into the folder."""


class RunMismatchError(ValueError):
    """The folder holds another run's results."""


@contextmanager
def locked(path: str | Path, file: bool = False, wait: bool = False) -> Iterator[Path]:
    """Hold the folder ``path`` (created if needed) — or with ``file``, the output file ``path`` — exclusively for
    the block; ``FolderInUseError`` names the holder's pid when another process holds it, unless ``wait`` (then the
    block waits its turn). Re-entrant in a process: a job that holds its folder may call a step that locks it too.
    Taking a folder removes the temporary files a writer killed mid-write left in it
    (:func:`~multihop.data.paths.remove_dead_temporaries`)."""
    path = Path(path)
    folder = path.parent if file else path
    folder.mkdir(parents=True, exist_ok=True)
    name = f".{path.name}.lock" if file else LOCK
    lock = FileLock(folder / name, is_singleton=True, thread_local=False)  # one lock object per path in a process
    holder = folder / f"{name}.pid"
    try:
        lock.acquire(timeout=-1 if wait else 0)
    except Timeout:
        pid = holder.read_text().strip() if holder.exists() else "unknown"
        raise FolderInUseError(f"{path} is in use by another multihop process (pid {pid}); wait for it to finish "
                               "or write elsewhere") from None
    outermost = lock.lock_counter == 1
    try:
        if outermost:
            atomic_write_text(holder, str(os.getpid()))
            if not file:  # the folder's one writer now: a temporary file in it is a killed writer's
                remove_dead_temporaries(folder)
        yield path
    finally:
        if lock.lock_counter == 1:  # the last holder in this process (threads share the lock): the job is done
            holder.unlink(missing_ok=True)
            if not wait:  # no lock file stays in its folder (removed while still held, so a job refused meanwhile
                (folder / name).unlink(missing_ok=True)  # saw it held; a waiting lock, outside saved folders, keeps it)
        lock.release()


def check_run(path: str | Path, manifest: dict, kind: str = "run", growing: frozenset[str] = frozenset()) -> bool:
    """Write ``manifest`` to ``path`` (a folder's :data:`RUN_MANIFEST`, or an output file's ``<file>.run.json``) on
    the first start; on a rerun, refuse one that differs, naming the keys — unless only the keys in ``growing``
    differ (the caller found the new run a superset of the recorded one: more questions of the same run), which
    extends the run: the manifest is replaced and True returned."""
    path = Path(path)
    manifest = json.loads(json.dumps(manifest, default=str))  # as it reads back
    if not path.exists():
        atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True))
        return False
    saved = read_json(path)
    differ = sorted(key for key in saved.keys() | manifest.keys() if saved.get(key) != manifest.get(key))
    if differ and set(differ) <= growing:
        atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True))
        return True
    if differ:
        details = "; ".join(f"{key}: {saved.get(key)!r} there, {manifest.get(key)!r} now" for key in differ[:4])
        details += f"; and {len(differ) - 4} more" if len(differ) > 4 else ""
        raise RunMismatchError(f"{path.parent if path.name == RUN_MANIFEST else path} holds another {kind} "
                               f"({details}); write elsewhere or delete it to start over")
    return False


def write_inventory(folder: str | Path) -> dict:
    """List every file of a saved ``folder`` (its subfolders too; hidden files and the list itself aside) with its size
    and sha256 in :data:`INVENTORY`, written last; returns the list."""
    folder = Path(folder)
    files = {str(path.relative_to(folder)): {"size": path.stat().st_size, "sha256": sha256_file(path)}
             for path in sorted(folder.rglob("*")) if path.is_file() and path.name != INVENTORY
             and not any(part.startswith(".") for part in path.relative_to(folder).parts)}
    atomic_write_text(folder / INVENTORY, json.dumps(files, indent=1, sort_keys=True))
    return files


def verify_inventory(folder: str | Path) -> None:
    """Check a saved ``folder`` against its :data:`INVENTORY`: a missing file raises ``FileNotFoundError``, a changed
    one ``ChecksumMismatchError``, each naming the file. A folder saved before inventories is not checked. Hashing is
    skipped when every file still has the size and modification time it had when last found as listed
    (:data:`VERIFIED`), so loading an index of gigabytes twice hashes it once."""
    folder = Path(folder)
    if not (folder / INVENTORY).exists():
        return
    files = read_json(folder / INVENTORY)
    seen = {}
    for name, info in files.items():
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{folder}: {name} is missing (listed in {INVENTORY}); save or build the folder "
                                    "again")
        stat = path.stat()
        seen[name] = [stat.st_size, stat.st_mtime_ns]
        if stat.st_size != info["size"]:
            raise ChecksumMismatchError(f"{folder}: {name} changed since the folder was saved (its size differs from "
                                        f"{INVENTORY}); save or build the folder again")
    stamp = folder / VERIFIED
    if stamp.exists() and read_json(stamp) == {"inventory": sha256_file(folder / INVENTORY), "files": seen}:
        return
    for name, info in files.items():
        if sha256_file(folder / name) != info["sha256"]:
            raise ChecksumMismatchError(f"{folder}: {name} changed since the folder was saved (its sha256 differs "
                                        f"from {INVENTORY}); save or build the folder again")
    try:
        atomic_write_text(stamp, json.dumps({"inventory": sha256_file(folder / INVENTORY), "files": seen}))
    except OSError:  # a read-only folder is checked in full each time
        pass
