"""Where multihop keeps its files: the model/index cache (``MULTIHOP_HOME``) and the real data (``MULTIHOP_DATA``)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def home() -> Path:
    """The cache folder for assembled models and built indexes (``MULTIHOP_HOME``, default ``~/.cache/multihop``)."""
    return Path(os.environ.get("MULTIHOP_HOME") or Path.home() / ".cache" / "multihop")


def data_dir() -> Path:
    """The folder of real benchmark files, laid out like the project's shared data folder (``MULTIHOP_DATA``)."""
    value = os.environ.get("MULTIHOP_DATA")
    if value and Path(value).is_dir():
        return Path(value)
    raise FileNotFoundError(
        "MULTIHOP_DATA is not set to an existing folder. Point it at a folder with musique/, hotpotqa/ and "
        "2wikimultihopqa/ (the Makefile uses ../shared/data), or run `multihop data fetch` on an online machine."
    )


def read_json(path: Path) -> Any:
    """A JSON file's value; a damaged file raises ``ValueError`` naming it (and where it broke)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:line {exc.lineno}: not valid JSON ({exc.msg}); the file is damaged: save or build "
                         "its folder again") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text; the file is damaged: save or build its folder again") from None


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:  # Ctrl-C or a full disk mid-write: no half-written temporary stays behind
        tmp.unlink(missing_ok=True)
        raise


TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp$")  # what atomic_write_text and atomic_dir write before their rename


def remove_dead_temporaries(folder: Path, depth: int = 2) -> list[Path]:
    """Remove the temporary files and folders (:data:`TEMPORARY`) that a writer killed before its rename left in
    ``folder`` and its subfolders down to ``depth`` levels: those whose writer's pid is no longer running. Returns
    what was removed."""
    removed = []
    for level in range(depth):
        for path in Path(folder).glob("/".join(["*"] * (level + 1))):
            match = TEMPORARY.match(path.name)
            if match and not pid_running(int(match.group(1))):
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def pid_running(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary sibling folder to fill; on success it replaces ``target``, on error it is removed."""
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
