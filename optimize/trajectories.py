"""Per-stage teacher trajectories for distillation (DualRAG §3.2, HANRAG App. B/D, CIRAG §3.5 / App. B.4).

:func:`collect` runs a program with a teacher LM over train questions and records every stage call: the stage name,
the chat messages exactly as the program's adapter sends them (``adapter.format``: system, demos, user turn) and
the teacher's completion in the adapter's output format (``format_assistant_message_content``; JSONAdapter has
no ``format_finetune_data``). Only questions whose final answer passes
the metric are kept (DualRAG keeps only correct trajectories). Calls are attributed to stages by predictor identity
(``program.named_predictors()``), never by position in the trace, so a stage called once per hop yields one row per
call — DSPy's ``BootstrapFinetune`` selects by trace position and mislabels rows of looping programs.

The output folder holds one JSON-lines file per stage (``<stage>.jsonl``: ``stage``, ``question_id``, ``call``,
``messages``, ``completion``, ``inputs``, ``outputs``, ``teacher``, ``adapter``, ``score``) and ``manifest.json``.
With ``threads`` > 1 (a served teacher) the questions run ``threads`` at once; the rows are kept in the questions'
order, so the files are a serial collection's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import dspy
from tqdm.auto import tqdm

from multihop.data.folders import locked
from multihop.data.jsonl import rows_text
from multihop.data.paths import atomic_write_text
from multihop.evaluation.metrics import dspy_metric
from multihop.runtime.parallel import fan_out_chunks
from multihop.runtime.tracing import jsonable

MANIFEST = "manifest.json"


class EmptyTrajectoriesError(ValueError):
    """No question passed the metric, so there is nothing to distill."""


def stage_calls(program: dspy.Module, example: dspy.Example) -> tuple[dspy.Prediction, list[dict]]:
    """Run ``program`` on one example and return its prediction and one record per predictor call, in order."""
    names = {id(predictor): name for name, predictor in program.named_predictors()}
    adapter = dspy.settings.adapter or dspy.ChatAdapter()
    with dspy.context(trace=[]):
        prediction = program(**example.inputs())
        trace = list(dspy.settings.trace)
    counts: dict[str, int] = {}
    calls = []
    for predictor, inputs, outputs in trace:
        name = names.get(id(predictor))
        if name is None:  # a predictor outside this program (a nested, separately owned module)
            continue
        calls.append({"stage": name, "call": counts.get(name, 0), **render_call(predictor, dict(inputs),
                                                                              outputs.toDict(), adapter)})
        counts[name] = counts.get(name, 0) + 1
    return prediction, calls


def dspy_format(adapter: dspy.Adapter) -> str:
    """The name of the DSPy adapter class ``adapter`` is or derives from: the format its prompts and replies are in."""
    return next(cls.__name__ for cls in type(adapter).__mro__ if cls.__module__.startswith("dspy."))


def render_call(predictor: dspy.Predict, inputs: dict, outputs: dict, adapter: dspy.Adapter) -> dict:
    """One stage call as a training row: the chat ``messages`` the adapter sends for ``inputs`` (with the
    predictor's demos) and the ``completion`` in the adapter's output format for ``outputs``, with the ``inputs`` and
    ``outputs`` themselves, so a method's post-processing can repair a row and render it again (DualRAG §3.2). The
    ``adapter`` named is the DSPy adapter whose format the row is in (multihop's adapters format as DSPy's)."""
    return {"messages": adapter.format(predictor.signature, predictor.demos, inputs),
            "completion": adapter.format_assistant_message_content(predictor.signature, outputs),
            "adapter": dspy_format(adapter), "inputs": jsonable(inputs), "outputs": jsonable(outputs)}


def run_all(program: dspy.Module, examples: list[dspy.Example],
            threads: int) -> Iterator[tuple[dspy.Prediction, list[dict]]]:
    """:func:`stage_calls` of every example, ``threads`` at once, in the examples' order (a chunk of ``threads * 4``
    at a time)."""
    with tqdm(total=len(examples), desc="trajectories", unit="q") as bar:
        for chunk in fan_out_chunks(partial(stage_calls, program), examples, threads):
            bar.update(len(chunk))
            yield from (run for _, run in chunk)


def write_trajectories(out_dir: Path, rows: dict[str, list[dict]], manifest: dict) -> dict:
    """Write one ``<stage>.jsonl`` per stage and the manifest, replacing a collection already in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in [*out_dir.glob("*.jsonl"), out_dir / MANIFEST]:  # a collection is written whole: none of the
        stale.unlink(missing_ok=True)                                # last one's files stay beside it
    for stage, stage_rows in rows.items():
        atomic_write_text(out_dir / f"{stage}.jsonl", rows_text(stage_rows))
    manifest = {**manifest, "stages": {stage: len(stage_rows) for stage, stage_rows in rows.items()}}
    atomic_write_text(out_dir / MANIFEST, json.dumps(manifest, indent=2))
    return manifest


def read_collection(folder: str | Path) -> tuple[dict[str, list[dict]], dict]:
    """A folder :func:`collect` wrote: its rows by stage, each with the ``inputs`` and ``outputs`` a post-processing
    reads, and its manifest."""
    folder = Path(folder)
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{folder}: no readable {MANIFEST} ({exc}); give a folder `multihop trajectories` "
                         "wrote") from None
    rows: dict[str, list[dict]] = {}
    for stage in manifest.get("stages") or {}:
        path = folder / f"{stage}.jsonl"
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            stage_rows = [json.loads(line) for line in lines if line.strip()]
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: unreadable trajectory rows ({exc}); collect them again") from None
        if any(not isinstance(row, dict) or "inputs" not in row or "outputs" not in row for row in stage_rows):
            raise ValueError(f"{path}: rows without their inputs and outputs (collected by an older version): "
                             "collect them again")
        rows[stage] = stage_rows
    return rows, manifest


class HeldApartError(ValueError):
    """A question meant for measuring was given as training data."""


def refuse_held_apart(examples: list[dspy.Example], held_apart: set[str] | frozenset[str]) -> None:
    """Raise :class:`HeldApartError` when any of ``examples`` has an id among ``held_apart`` (the dev files' ids)."""
    leaked = sorted({str(e.get("id")) for e in examples} & set(held_apart))
    if leaked:
        raise HeldApartError(f"{len(leaked)} of the training questions are held apart for measuring (e.g. "
                             f"{leaked[0]}): build training rows from train files only")


def collect(
    program: dspy.Module,
    examples: list[dspy.Example],
    out_dir: str | Path,
    teacher_lm: dspy.LM | None = None,
    metric: str = "f1",
    min_score: float = 1.0,
    data: dict | None = None,
    held_apart: set[str] | frozenset[str] = frozenset(),
    complete_only: bool = False,
    threads: int = 1,
) -> dict:
    """Collect the passing trajectories of ``examples`` into ``out_dir`` (locked while it runs; a collection replaces
    the files of the one before it there), running ``threads`` questions at once; returns the manifest, which keeps
    ``data`` (the questions' file and checksum). With ``complete_only``, a run the program's ``trajectory_complete``
    rejects is dropped too (counted ``incomplete``). A question among ``held_apart`` is refused before any call."""
    refuse_held_apart(examples, held_apart)
    lm = teacher_lm or dspy.settings.lm
    if lm is None:
        raise ValueError("no teacher LM: pass teacher_lm= or dspy.configure(lm=...)")
    with locked(out_dir):
        return _collect(program, examples, Path(out_dir), lm, metric, min_score, data, complete_only, threads)


def _collect(program: dspy.Module, examples: list[dspy.Example], out_dir: Path, lm: dspy.LM, metric: str,
             min_score: float, data: dict | None, complete_only: bool, threads: int) -> dict:
    score_of = dspy_metric(metric)
    complete = getattr(program, "trajectory_complete", None) if complete_only else None
    rows: dict[str, list[dict]] = {}
    kept = failed = incomplete = 0
    with dspy.context(lm=lm):
        for example, (prediction, calls) in zip(examples, run_all(program, examples, threads), strict=True):
            score = float(score_of(example, prediction))
            if score < min_score:
                failed += 1
                continue
            if complete is not None and not complete(prediction):
                incomplete += 1
                continue
            kept += 1
            for call in calls:
                row = {**call, "question_id": example.get("id"), "teacher": lm.model, "score": score}
                rows.setdefault(call["stage"], []).append(row)
    if not kept:
        raise EmptyTrajectoriesError(
            f"none of {len(examples)} questions reached {metric} >= {min_score}"
            + (f" with a complete trajectory ({incomplete} incomplete)" if complete_only else "")
            + ": no trajectory to distill")
    return write_trajectories(out_dir, rows, {"teacher": lm.model, "metric": metric, "min_score": min_score,
                                              "questions": len(examples), "kept": kept, "failed": failed,
                                              "complete_only": complete_only, "incomplete": incomplete,
                                              "program": type(program).__name__, "data": data})
