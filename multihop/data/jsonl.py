"""Append-only JSON-lines files of rows keyed by ``id``: what resumable jobs (evaluation, unrolling) write as they go.

Each row is flushed and fsynced as soon as it is appended, so a job that dies loses at most the row it was writing;
:func:`read_rows` drops such a torn last line and rewrites the file without it, and a rerun skips the ids it finds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Hashable, Iterable
from operator import itemgetter
from pathlib import Path
from typing import TextIO

from multihop.data.corpus import DataFormatError
from multihop.data.paths import atomic_write_text


def read_rows(path: Path, repair: bool = True, fields: dict[str, type | tuple[type, ...]] | None = None,
              key: Callable[[dict], Hashable] = itemgetter("id")) -> dict:
    """Finished rows by id (or by ``key`` of a row: a file whose ids repeat across datasets). A torn line (the process
    died mid-write) is dropped and, with ``repair`` (a job about to append, holding the file), rewritten away. With
    ``fields`` (a file a user gives: labels, trajectory rows), every row must hold each field with a value of its type
    (``id`` always): a row that does not, or a line that is no JSON object before the last, is a
    :class:`~multihop.data.corpus.DataFormatError` naming ``file:line N`` and the field."""
    if not path.exists():
        return {}
    lines = path.read_text(encoding="utf-8").splitlines()
    rows, good_lines, torn = {}, [], False
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if fields is not None and number < len(lines):
                raise DataFormatError(f"{path}:line {number}: not a JSON object") from None
            torn = True
            continue
        if fields is not None:
            check_row(row, {"id": (str, int), **fields}, f"{path}:line {number}")
        rows[key(row)] = row
        good_lines.append(line)
    if torn and repair:
        atomic_write_text(path, "".join(line + "\n" for line in good_lines))
    return rows


def check_row(row, fields: dict[str, type | tuple[type, ...]], where: str) -> None:
    """Refuse ``row`` (a :class:`~multihop.data.corpus.DataFormatError` starting with ``where``) unless it is a JSON
    object holding each of ``fields`` with a value of its type."""
    if not isinstance(row, dict):
        raise DataFormatError(f"{where}: not a JSON object")
    for name, kind in fields.items():
        if name not in row:
            raise DataFormatError(f"{where}: field {name} is missing")
        kinds, value = kind if isinstance(kind, tuple) else (kind,), row[name]
        if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:  # JSON true is no number
            wanted = " or ".join(k.__name__ for k in kinds)
            raise DataFormatError(f"{where}: field {name} is {type(value).__name__}, not {wanted}")


def rows_text(rows: Iterable[dict]) -> str:
    """``rows`` as the text of a JSON-lines file, one row a line."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def append_row(sink: TextIO, row: dict) -> None:
    """Append one row and make it durable before returning."""
    sink.write(json.dumps(row, ensure_ascii=False) + "\n")
    sink.flush()
    os.fsync(sink.fileno())
