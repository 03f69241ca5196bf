"""A program's stages scored on held-apart gold targets, one LM set against another (the base LM against a student):
each stage's gold inputs (:func:`multihop.optimize.gold_targets.gold_targets`, the same builders that train
students, here on questions no student saw) are sent to the stage as the program would send them, once per LM, and
each reply is scored against the gold outputs (:mod:`multihop.optimize.stage_scores`) and counted as a format failure
when the adapter cannot parse it. ``benchmarks/distillation.py`` prints it for the shipped student."""

from __future__ import annotations

from collections import defaultdict

import dspy
from dspy.utils.exceptions import AdapterParseError
from rich.table import Table

from .gold_targets import gold_targets
from .stage_scores import SCORE_NAMES, scored_field, stage_score


def per_stage(program: dspy.Module, examples: list, lms: dict[str, dict[str, dspy.LM]], per_stage_cap: int,
              adapter: dspy.Adapter) -> dict:
    """{(stage, model): {"n", "format_failures", "score", "metric"}} over at most ``per_stage_cap`` targets per stage,
    ``lms`` giving each model's LM per stage, each call formatted by ``adapter`` (the one the students' rows were
    rendered with)."""
    predictors = dict(program.named_predictors())
    taken: dict[str, int] = defaultdict(int)
    results: dict[tuple[str, str], dict] = {}
    for target in gold_targets(program, examples):
        if taken[target.stage] >= per_stage_cap:
            continue
        taken[target.stage] += 1
        for model, by_stage in lms.items():
            with dspy.context(lm=by_stage[target.stage], adapter=adapter):
                try:
                    predicted, failed = predictors[target.stage](**target.inputs).toDict(), 0
                except AdapterParseError:
                    predicted, failed = {}, 1
            row = results.setdefault((target.stage, model), {"n": 0, "format_failures": 0, "score": 0.0,
                                                              "metric": SCORE_NAMES[scored_field(target.outputs)]})
            row["n"] += 1
            row["format_failures"] += failed
            row["score"] += stage_score(predicted, target.outputs)
    return results


def stage_table(results: dict[tuple[str, str], dict]) -> Table:
    """:func:`per_stage`'s results of the models ``base`` and ``student`` by (program, dataset), as one table."""
    table = Table(title="Per stage on held-apart dev questions: base LM vs gold-trained student")
    for column in ("program", "stage", "dataset", "n", "score", "base", "student", "format failures base",
                   "format failures student"):
        table.add_column(column, justify="left" if column in ("program", "stage", "dataset", "score") else "right")
    for (program, dataset), rows in results.items():
        for stage in dict.fromkeys(stage for stage, _ in rows):
            base, student = rows[(stage, "base")], rows[(stage, "student")]
            table.add_row(program, stage, dataset, str(base["n"]), base["metric"],
                          *(f"{100 * r['score'] / r['n']:.1f}" for r in (base, student)),
                          *(f"{100 * r['format_failures'] / r['n']:.0f}%" for r in (base, student)))
    return table
