"""A comparison or a paper's tables split over machines without Ray (ours): ``multihop compare ... --shard i/n`` and
``multihop reproduce ... --shard i/n`` run every n-th question of each dataset from the i-th, each (program or row,
dataset) into a shard run folder (:func:`~multihop.evaluation.sharding.shard_manifest`), and record the command and
its arguments in the output folder (:data:`SHARD_RECORD`); ``multihop merge OUT SHARD_DIR...`` joins them
(:func:`~multihop.experiments.shard_merge.merge_shard_runs`).

The merge refuses shards of different runs (their records differ), a missing or repeated shard and a shard whose runs
are not all there; it joins each run's shard folders as ``multihop merge`` joins an evaluation's
(:func:`~multihop.evaluation.sharding.merge_shards`: the rows in the questions' order, the unsharded run's manifest),
then runs the recorded command on the merged folder, whose every question is answered: nothing is asked of the LM,
and the tables, charts and report are those one unsharded run writes. The merging machine needs what the command
reads (the question files and indexes under ``MULTIHOP_DATA``/``MULTIHOP_HOME``, the artifacts, the LM's spec).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from multihop.data.folders import RUN_MANIFEST
from multihop.data.paths import atomic_write_text, read_json
from multihop.evaluation.sharding import ShardError, check_every_shard_once, merge_shards
from multihop.experiments.budget import Budget
from multihop.lm.options import LMOptions

SHARD_RECORD = "shard.json"  # in a shard's output folder: the command, the shard and the arguments it ran with
COMMANDS = ("compare", "reproduce")


def record_shard(out: Path, command: str, shard: tuple[int, int], arguments: dict) -> None:
    """Write ``out``'s :data:`SHARD_RECORD`: ``command`` (compare or reproduce) ran shard ``shard`` (i, n) with
    ``arguments`` (its keyword arguments: an :class:`LMOptions` kept as its fields, paths as absolute ones, a metric
    as its import path); refuse arguments a merge could not give again (an LM object, a metric defined in
    ``__main__``) and a folder that holds a shard of another run."""
    lm = arguments.get("lm")
    if not isinstance(lm, LMOptions):
        raise ValueError(f"{command} --shard needs the LM as a spec or LMOptions (lm=...), which the merge makes again")
    if arguments.get("judge_lm") is not None and not isinstance(arguments["judge_lm"], str):
        raise ValueError(f"{command} --shard takes the judge LM as a spec (judge_lm='openai/...'), not an LM object")
    record = {"command": command, "shard": {"index": shard[0], "of": shard[1]},
              "arguments": {**arguments, "lm": dataclasses.asdict(lm), "metric": metric_paths(arguments.get("metric"))}}
    for key in ("corpus", "retriever"):
        if record["arguments"].get(key) is not None:
            record["arguments"][key] = str(Path(record["arguments"][key]).resolve())
    text = json.dumps(record, indent=2, sort_keys=True, default=str)  # paths as text
    path = Path(out) / SHARD_RECORD
    if path.is_file() and path.read_text(encoding="utf-8") != text:
        raise ValueError(f"{out} holds a shard of another {command} run ({path} differs): give each shard run a folder "
                         "of its own")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


def metric_paths(metric: Callable | Mapping[str, Callable] | None) -> dict[str, str] | None:
    """A run's user metrics as ``{name: "module:function"}``, each importable again; a function of ``__main__`` or
    one defined inside another is refused in one line."""
    if metric is None:
        return None
    named = dict(metric) if isinstance(metric, Mapping) else {getattr(metric, "__name__", "metric"): metric}
    paths = {}
    for name, fn in named.items():
        module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
        if not module or module == "__main__" or "<" in qualname:
            raise ValueError(f"--shard: the metric {name!r} must be importable (module:function) for the merge to "
                             "score the merged runs as the shards did")
        paths[name] = f"{module}:{qualname}"
    return paths


def is_shard_run(folder: str | Path) -> bool:
    """Whether ``folder`` is a shard of a comparison or a reproduction (it holds a :data:`SHARD_RECORD`)."""
    return (Path(folder) / SHARD_RECORD).is_file()


def join_shard_runs(out: str | Path, folders: Sequence[str | Path]) -> dict:
    """Join the runs of the shard folders of one ``compare``/``reproduce`` run into ``out`` (a new folder), each run's
    shards merged (:func:`~multihop.evaluation.sharding.merge_shards`); returns the shards' record, whose command
    :func:`recorded_arguments` gives again (:func:`~multihop.experiments.shard_merge.merge_shard_runs` runs it)."""
    out, folders = Path(out), [Path(folder) for folder in folders]
    if out.exists() and any(out.iterdir()):
        raise ShardError(f"{out} exists and is not empty: merge into a new folder")
    records = []
    for folder in folders:
        if not is_shard_run(folder):
            raise ShardError(f"{folder} is not a shard of a comparison or a reproduction ({SHARD_RECORD} missing): "
                             "merge the shard folders of one compare or reproduce --shard run")
        records.append(read_json(folder / SHARD_RECORD))
    for folder, record in zip(folders[1:], records[1:], strict=True):
        differ = sorted(key for key in ("command", *record["arguments"], *records[0]["arguments"])
                        if (record.get(key) != records[0].get(key) if key == "command" else
                            record["arguments"].get(key) != records[0]["arguments"].get(key)))
        if differ or record["shard"]["of"] != records[0]["shard"]["of"]:
            raise ShardError(f"{folder} is a shard of another run than {folders[0]} (they differ in "
                             f"{', '.join(differ[:4]) or 'the shard count'})")
    count = records[0]["shard"]["of"]
    check_every_shard_once([record["shard"]["index"] for record in records], count)
    ordered = [folder for _, folder in sorted(zip((r["shard"]["index"] for r in records), folders, strict=True))]
    runs = [shard_runs(folder) for folder in ordered]
    for folder, found in zip(ordered, runs, strict=True):
        missing = sorted(set().union(*runs) - found)
        if missing:
            raise ShardError(f"{folder} lacks the runs {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''} "
                             "that other shards hold: rerun that shard into its folder to finish it")
    for relative in sorted(runs[0]):
        merge_shards(out / relative, [folder / relative for folder in ordered])
    return records[0]


def shard_runs(folder: Path) -> set[str]:
    """The run folders (relative to ``folder``) of a shard run: those whose manifest is a shard's."""
    return {str(path.parent.relative_to(folder)) for path in folder.rglob(RUN_MANIFEST)
            if "shard" in read_json(path)}


def recorded_arguments(record: dict) -> dict:
    """The keyword arguments of a shard record's command, as it ran but for the shard: the LM options, the budget
    (a comparison's) and the user's metrics (imported again) rebuilt."""
    arguments = dict(record["arguments"])
    arguments["lm"] = LMOptions(**arguments["lm"])
    if arguments.get("metric"):
        arguments["metric"] = {name: imported(path) for name, path in arguments["metric"].items()}
    if record["command"] == "compare":
        arguments["budget"] = Budget(**arguments["budget"])
    elif record["command"] != "reproduce":
        raise ShardError(f"a shard of an unknown command {record['command']!r}; merge shards of {', '.join(COMMANDS)}")
    return arguments


def imported(path: str) -> Callable:
    """The function of import path ``module:qualname``, imported with the current folder on ``sys.path`` (where
``--metric`` finds its modules)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module, _, qualname = path.partition(":")
    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found
