"""An evaluation split over machines without Ray: ``multihop eval ... --shard i/n`` runs every n-th question (the
i-th of each n, 1-based) into a folder of its own, and ``multihop merge OUT SHARD_DIR...`` joins the n folders into
the folder one unsharded run would have written — the same rows and traces, the unsharded run's manifest (so
``multihop eval`` on the merged folder finds the run finished) and its summary.

A shard's run manifest is the unsharded run's with the shard's own questions and a ``shard`` entry: its number, the
count ``n`` and the whole run's question hash and count. Merging refuses shards of different runs, a missing or
repeated shard, and a shard not finished (rerun it into its folder first).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from multihop.data.folders import RUN_MANIFEST, locked
from multihop.data.jsonl import read_rows, rows_text
from multihop.data.paths import atomic_dir, read_json
from multihop.evaluation.runner import RESULTS, SUMMARY, questions_hash, summarize


class ShardError(ValueError):
    """Shards that cannot be merged, or a ``--shard`` that means nothing."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` as ``(i, n)``, 1 ≤ i ≤ n."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()) or not 1 <= int(index) <= int(count):
        raise ShardError(f"--shard {text!r}: write i/n with 1 ≤ i ≤ n, e.g. 1/4")
    return int(index), int(count)


def shard_of(examples: Sequence, index: int, count: int) -> list:
    """The questions of shard ``index`` of ``count``: every ``count``-th, from the ``index``-th."""
    return list(examples[index - 1 :: count])


def shard_manifest(manifest: dict, examples: Sequence, index: int, count: int) -> dict:
    """The run manifest of shard ``index`` of ``count`` of a run whose manifest (over all ``examples``) is
    ``manifest``."""
    mine = shard_of(examples, index, count)
    return {**manifest, "questions": questions_hash(mine), "count": len(mine),
            "shard": {"index": index, "of": count, "questions": manifest["questions"], "count": manifest["count"],
                      "ids": [str(example.id) for example in mine]}}


def merge_shards(out: str | Path, folders: Sequence[str | Path]) -> dict:
    """Join the finished shard folders of one run into ``out`` (a new folder, written whole through a rename): the rows
    in the questions' order, as one run summarizes them; returns its summary."""
    out, folders = Path(out), [Path(folder) for folder in folders]
    if out.exists() and any(out.iterdir()):
        raise ShardError(f"{out} exists and is not empty: merge into a new folder")
    manifests = []
    for folder in folders:
        if not (folder / RUN_MANIFEST).exists():
            raise ShardError(f"{folder} holds no evaluation ({RUN_MANIFEST} missing)")
        manifest = read_json(folder / RUN_MANIFEST)
        if "shard" not in manifest:
            raise ShardError(f"{folder} is not a shard of a run (it was not evaluated with --shard)")
        manifests.append(manifest)
    whole = [_unsharded(manifest) for manifest in manifests]
    for folder, manifest in zip(folders[1:], whole[1:], strict=True):
        differ = sorted(key for key in manifest.keys() | whole[0].keys() if manifest.get(key) != whole[0].get(key))
        if differ:
            raise ShardError(f"{folder} is a shard of another run than {folders[0]} (they differ in "
                             f"{', '.join(differ[:4])})")
    count = manifests[0]["shard"]["of"]
    check_every_shard_once([manifest["shard"]["index"] for manifest in manifests], count)
    by_shard: dict[int, list[dict]] = {}
    for folder, manifest in zip(folders, manifests, strict=True):
        found = read_rows(folder / RESULTS, repair=False)
        ids = manifest["shard"]["ids"]
        if set(found) != set(ids):
            raise ShardError(f"shard {manifest['shard']['index']}/{count} in {folder} has "
                             f"{len(set(found) & set(ids))} of its {len(ids)} questions: rerun it into that folder to "
                             "finish it")
        by_shard[manifest["shard"]["index"]] = [found[qid] for qid in ids]
    total = whole[0]["count"]  # question p of the run is question p // n of shard p % n + 1
    rows = {row["id"]: row for row in (by_shard[p % count + 1][p // count] for p in range(total))}
    summaries = [read_json(folder / SUMMARY) for folder in folders if (folder / SUMMARY).exists()]
    first = summaries[0] if summaries else {}
    summary = summarize(list(rows.values()), first.get("count_display"),
                        first.get("metrics") or whole[0].get("metrics") or ())
    summary["program"] = first.get("program", whole[0]["program"])
    with locked(out, file=True), atomic_dir(out) as tmp:
        (tmp / "traces").mkdir()
        for folder in folders:
            for trace in (folder / "traces").glob("*.json"):
                shutil.copy2(trace, tmp / "traces" / trace.name)
        (tmp / RESULTS).write_text(rows_text(rows.values()), encoding="utf-8")
        (tmp / RUN_MANIFEST).write_text(json.dumps(whole[0], indent=2, sort_keys=True))
        (tmp / SUMMARY).write_text(json.dumps(summary, indent=2))
    return summary


def check_every_shard_once(numbers: Sequence[int], count: int) -> None:
    """Refuse, in one line, shard numbers that are not 1 to ``count`` once each (naming the missing and repeated)."""
    numbers = sorted(numbers)
    if numbers != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(numbers))
        repeated = sorted({n for n in numbers if numbers.count(n) > 1})
        raise ShardError(f"merging needs shards 1 to {count} once each: " + "; ".join(
            part for part in (f"missing {missing}" if missing else "", f"repeated {repeated}" if repeated else "")
            if part))


def _unsharded(manifest: dict) -> dict:
    """The manifest of the whole run a shard's manifest belongs to."""
    whole = {key: value for key, value in manifest.items() if key != "shard"}
    return {**whole, "questions": manifest["shard"]["questions"], "count": manifest["shard"]["count"]}
