"""Gold trajectories: per-stage training rows built from the data's annotations instead of a teacher's calls.

For each stage of a program that a method's package gave a builder
(:data:`multihop.programs.gold_builders.GOLD_BUILDERS`), every annotated train example becomes the stage's inputs and
target outputs, rendered exactly as the program's adapter sends and expects them (:func:`~.trajectories.render_call`,
with the predictor's demos). The rows have the fields ``multihop trajectories`` writes for a teacher (``teacher`` is
``"gold"``), so ``multihop distill`` trains on either. Only the stages the program has are built, so its switches decide
them (a switch that merges two stages into one gets the merged stage's rows); the manifest lists the stages without a
builder and why (:data:`~multihop.programs.gold_builders.NO_GOLD`).

Train on train files only: a question whose id is among ``held_apart`` (the dev files' ids) is refused, so no
measured question can enter a training set.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import dspy
from tqdm.auto import tqdm

from multihop.data.folders import locked
from multihop.programs.gold_builders import GOLD_BUILDERS, NO_GOLD, GoldContext

from .trajectories import EmptyTrajectoriesError, HeldApartError, refuse_held_apart, render_call, write_trajectories

__all__ = ["GoldTarget", "HeldApartError", "gold_targets", "gold_trajectories"]

GOLD = "gold"


@dataclass(frozen=True)
class GoldTarget:
    """One stage call as the annotations say it should go: the ``call``-th of ``stage`` for ``example``."""

    stage: str
    example: dspy.Example
    call: int
    inputs: dict
    outputs: dict


def gold_targets(program: dspy.Module, examples: Iterable[dspy.Example],
                 context: GoldContext | None = None) -> Iterator[GoldTarget]:
    """The gold targets of ``program``'s stages (those it has, with a builder) for ``examples``, question by question.
    Measuring a student reads them from held-apart questions; training reads them through
    :func:`gold_trajectories`, which refuses those."""
    name = type(program).__name__
    builders = GOLD_BUILDERS.get(name, {})
    stages = [stage for stage in program.stage_names() if stage in builders]
    if not stages:
        raise ValueError(f"{name} has no stage with a gold builder; stages: {', '.join(program.stage_names())}")
    context = context or GoldContext()
    for example in examples:
        for stage in stages:
            for call, (inputs, outputs) in enumerate(builders[stage](program, example, context)):
                yield GoldTarget(stage, example, call, inputs, outputs)


def gold_trajectories(program: dspy.Module, examples: list[dspy.Example], out_dir: str | Path,
                      context: GoldContext | None = None, held_apart: set[str] | frozenset[str] = frozenset(),
                      data: dict | None = None) -> dict:
    """Build the gold rows of ``program``'s stages from ``examples`` into ``out_dir`` (one ``<stage>.jsonl`` each,
    replacing an earlier collection there, and ``manifest.json``, which keeps ``data``: the file's path and checksum);
    returns the manifest."""
    refuse_held_apart(examples, held_apart)
    name = type(program).__name__
    context = context or GoldContext()
    adapter = dspy.settings.adapter or dspy.ChatAdapter()
    predictors = dict(program.named_predictors())
    rows: dict[str, list[dict]] = {}
    used = set()
    for target in gold_targets(program, tqdm(examples, desc="gold rows", unit="q"), context):
        rows.setdefault(target.stage, []).append({
            "stage": target.stage, "question_id": target.example.get("id"), "call": target.call,
            **render_call(predictors[target.stage], target.inputs, target.outputs, adapter), "teacher": GOLD,
            "score": 1.0})
        used.add(target.example.get("id"))
    if not rows:
        raise EmptyTrajectoriesError(f"none of {len(examples)} questions carries the annotations {name}'s builders "
                                     "read")
    builders = GOLD_BUILDERS.get(name, {})
    no_builder = {stage: NO_GOLD.get(name, {}).get(stage, "no builder yet") for stage in program.stage_names()
                  if stage not in builders}
    out_dir = Path(out_dir)
    with locked(out_dir):
        return write_trajectories(out_dir, rows, {"teacher": GOLD, "program": name, "config": program.config(),
                                                  "questions": len(examples), "kept": len(used),
                                                  "seed": context.seed, "without_gold": no_builder,
                                                  "data": data})
