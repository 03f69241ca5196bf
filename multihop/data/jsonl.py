"""Append-only JSON-lines files of rows keyed by ``id``: what resumable jobs (evaluation, unrolling) write as they go.

Each row is flushed and fsynced as soon as it is appended, so a job that dies loses at most the row it was writing;
:func:`read_rows` drops such a torn last line and rewrites the file without it, and a rerun skips the ids it finds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from multihop.data.paths import atomic_write_text


def read_rows(path: Path, repair: bool = True) -> dict[str, dict]:
    """Finished rows by id. A torn line (the process died mid-write) is dropped and, with ``repair`` (a job about to
    append, holding the file), rewritten away."""
    if not path.exists():
        return {}
    rows, good_lines, torn = {}, [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            torn = True
            continue
        rows[row["id"]] = row
        good_lines.append(line)
    if torn and repair:
        atomic_write_text(path, "".join(line + "\n" for line in good_lines))
    return rows


def rows_text(rows: Iterable[dict]) -> str:
    """``rows`` as the text of a JSON-lines file, one row a line."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def append_row(sink: TextIO, row: dict) -> None:
    """Append one row and make it durable before returning."""
    sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    sink.flush()
    os.fsync(sink.fileno())
