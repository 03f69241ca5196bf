"""A paper's results tables run again (``multihop reproduce PAPER``): every declared row of each table
(:class:`~multihop.programs.papers.PaperTable`, ``programs/<method>/tables.py``) that a program here runs, on the dev
sets the table has columns for, with the settings the paper gave that row — then the table as the paper prints it,
ours beside the paper's number in every cell, with the difference.

The rows go through the comparison's one pool (:func:`~multihop.evaluation.runner.evaluate_all`: ``threads``
questions at once of every row and dataset), each row in its own resumable evaluation folder
(``<table>/<dataset>/<row>/``) with a rollout id of its own, on one retriever a dataset and first stage (each dev
file's paragraphs, indexed as the table says: dense or BM25). A row that needs what cannot run here (a fine-tuned
model not built, a proprietary retriever) or a student for some of its stages shows the paper's number alone, with the
reason. Datasets the table reports but ``MULTIHOP_DATA`` does not hold (NQ, SQuAD, ...) are the paper's alone too.

Each table is written as ``<table>.md`` and ``<table>.json``, with the comparison's report and charts in its folder
(``<table>/report.html``: every question's answers and stage traces by row); ``reproduce.json`` lists them.

Past one machine (ours, not the papers'): with ``ray`` the rows' questions are answered by Ray tasks
(:func:`~multihop.evaluation.ray_cluster.ray_evaluate_all`), each row built in the worker by :func:`worker_row` from
its plan and the run's LM options; with ``shard`` (``"i/n"``) every n-th question of each dev set from the i-th runs
into shard run folders that ``multihop merge`` joins (:mod:`multihop.experiments.shard_runs`).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import dspy
from rich.console import Console

from multihop.data.folders import sha256_file
from multihop.data.loaders import load_dataset
from multihop.data.paths import atomic_write_text
from multihop.data.question_sets import DATASETS, question_file
from multihop.evaluation.ray_cluster import ray_evaluate_all, worker_lm, worker_student
from multihop.evaluation.runner import Evaluation, evaluate_all, run_manifest
from multihop.evaluation.sharding import parse_shard, shard_manifest, shard_of
from multihop.experiments.artifact_builds import build_missing, built_artifacts, given_artifacts, paper_artifacts
from multihop.experiments.charts import write_charts
from multihop.experiments.comparison import paired_runs, paired_tests, rollout, run_lms
from multihop.experiments.program_indexes import program_retriever
from multihop.experiments.report import write_report
from multihop.experiments.reproduced_tables import console_table, to_markdown
from multihop.experiments.row_plans import (
    PlannedRow,
    RunSetup,
    plan_table,
    row_settings,
    student_key,
    waiting_state,
)
from multihop.experiments.shard_runs import record_shard
from multihop.experiments.tables import summary_row, write_table
from multihop.lm.adapter import default_adapter
from multihop.lm.models import embedded_notice
from multihop.lm.options import LMOptions, served_student
from multihop.optimize.student_stages import use_student
from multihop.programs import PROGRAMS, takes_retriever
from multihop.programs.papers import MEAN, PaperTable
from multihop.programs.registry import Declaration
from multihop.retrievers import CACHED_FIRST_STAGES as FIRST_STAGES
from multihop.retrievers import describe_index

SUMMARY_COLUMNS = {"em", "f1", "acc", "cover_em", "llm_eval", "recall@2", "recall@5"}  # the report's paper columns
SETUP_KEYS = ("k", "n", "rerank", "max_steps", "max_iterations", "max_sentences")  # shown in each table's header


def paper_of(name: str) -> Declaration:
    """The declaration of the method whose paper ``name`` is (its program's name, as the papers spell it)."""
    method = PROGRAMS.declaration(PROGRAMS.named(name)) if PROGRAMS.named(name) in PROGRAMS else None
    if method is None or method.kind != "method" or not method.tables:
        papers = ", ".join(m.name for m in PROGRAMS.declared("method") if m.tables)
        raise ValueError(f"no paper named {name!r} declares tables; choose from {papers}")
    return method


def table_slug(table: PaperTable) -> str:
    """A table's folder and file name: ``table-2``, ``fig-5``, ``app-e``."""
    return re.sub(r"[^a-z0-9]+", "-", table.number.lower()).strip("-")


def row_slug(label: str) -> str:
    """A row's folder name: its label as shown (with its LM where it names one), as a file name that keeps its
    letters (``w-o-α_U-ω_U-D``)."""
    return re.sub(r"[^\w.+=-]+", "-", label).strip("-")[:80]


def select_tables(method: Declaration, wanted: Sequence[str] | None) -> list[PaperTable]:
    """The tables of ``method``'s paper named by ``wanted`` (``2``, ``Table 2``, ``Fig. 5``, ``App. E``; all when
    None), in the paper's order."""
    if not wanted:
        return list(method.tables)
    by_key = {_key(table.number): table for table in method.tables}
    by_key.update({_key(table.number.split()[-1]): table for table in method.tables
                   if table.number.startswith("Table")})
    unknown = [name for name in wanted if _key(name) not in by_key]
    if unknown:
        raise ValueError(f"{method.name}'s paper declares no table {', '.join(unknown)}; its tables: "
                         f"{', '.join(table.number for table in method.tables)}")
    chosen = {id(by_key[_key(name)]) for name in wanted}
    return [table for table in method.tables if id(table) in chosen]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def table_datasets(table: PaperTable, datasets: Sequence[str] | None) -> list[str]:
    """The dev sets of ``table`` this run evaluates: its datasets that are dev sets here, of ``datasets``."""
    columns = list(dict.fromkeys(dataset for dataset, _ in table.columns))
    return [dataset for dataset in columns if dataset in DATASETS and (not datasets or dataset in datasets)]


def not_run(table: PaperTable, datasets: Sequence[str] | None) -> dict[str, str]:
    """Each dataset of ``table`` this run does not evaluate, with why: no dev set of it here (the paper's own, NQ,
    a compound benchmark), or left out by the user (``datasets``)."""
    ran = table_datasets(table, datasets)
    return {dataset: "left out (--datasets)" if dataset in DATASETS else "no dev set of it here"
            for dataset in dict.fromkeys(d for d, _ in table.columns) if dataset not in (*ran, MEAN)}


def unpreparable(program: dspy.Module, examples: Sequence[dspy.Example]) -> str | None:
    """Why ``program`` cannot take ``examples`` as they are (what its ``prepare_examples`` refuses: an oracle route
    without its labels), or None."""
    prepare = getattr(program, "prepare_examples", None)
    try:
        if prepare is not None:
            prepare(examples)
    except ValueError as exc:
        return str(exc)
    return None


def row_state(plan: PlannedRow, setup: RunSetup) -> str:
    """``runs``, ``runs on a stand-in`` (in place of a model the paper used, not given: its ``substitutes`` say
    which), ``shares a run``, or how a row that does not run could (:func:`.row_plans.waiting_state`), for
    ``reproduce --list``."""
    if plan.identity is not None:
        return "shares a run" if plan.shares else "runs on a stand-in" if plan.substitutes else "runs"
    return waiting_state(plan.table, plan.row, plan.dataset, setup)


def describe_tables(methods: Sequence[Declaration], setup: RunSetup | None = None) -> list[dict]:
    """What ``reproduce --list`` shows: each paper's tables with their rows as they would run (on the table's first
    dataset) with what ``setup`` gives (default: nothing), each row's state (:func:`row_state`) and why."""
    setup = setup or RunSetup(lm="your LM")
    described = []
    for method in methods:
        for table in method.tables:
            dataset = next(iter(table_datasets(table, None)), table.columns[0][0])
            rows = [{"label": plan.label, "program": plan.row.program, "settings": plan.row.settings,
                     "lm": plan.row.lm or table.lm, "numbers": len(plan.row.numbers), "state": row_state(plan, setup),
                     "runnable": plan.identity is not None, "why_not": plan.skipped, "stand_in": plan.stand_in,
                     "substitutes": list(plan.substitutes)}
                    for plan in plan_table(table, dataset, setup)]
            described.append({"paper": method.name, "table": table.number, "title": table.title,
                              "datasets": list(dict.fromkeys(d for d, _ in table.columns)),
                              "runs_on": table_datasets(table, None), "settings": table.settings, "rows": rows})
    return described


def index_record(folder: Path) -> dict:
    """What a row's index is, as its run records it, read from the index's own manifests: its first stage, pooling
    and passages, and its encoder's name or folder, whether fine-tuned and the sha256 of its weights (None for BM25)."""
    index = describe_index(folder)
    encoder = None if index.get("encoder") is None else {
        "encoder": index["encoder"], "fine_tuned": index["encoder_fine_tuned"],
        "sha256": (index["encoder_sha256"] or "")[:16] or None}
    return {"first_stage": index["first_stage"], "pooling": index.get("pooling"), "passages": index["passages"],
            "encoder": encoder}


def reproduce(
    paper: str,
    out: str | Path,
    tables: Sequence[str] | None = None,
    datasets: Sequence[str] | None = None,
    lm: LMOptions | str | None = None,
    limit: int | None = None,
    threads: int = 1,
    encoder: str = "mpnet",
    judge_lm: str | dspy.BaseLM | None = None,
    progress: bool = True,
    console: Console | None = None,
    students: Mapping[str, str | Path] | None = None,
    metric: Callable | Mapping[str, Callable] | None = None,
    lm_for: Mapping[str, str] | None = None,
    artifacts: Mapping[str, str | Path] | None = None,
    build: bool = False,
    build_limit: int | None = None,
    first_stage: str | None = None,
    shard: str | tuple[int, int] | None = None,
    ray: str | None = None,
) -> dict:
    """Run the declared rows of ``paper``'s ``tables`` (default: all) on ``datasets`` (default: every dev set a table
    has columns for) and write each table, ours beside the paper's, into ``out``; returns what ``reproduce.json``
    holds. What each row runs with, and when it does not run, is :mod:`.row_plans`'.

    Args:
        lm: a spec or :class:`LMOptions`, or None for the LM DSPy is configured with: every row whose paper LM is
            not mapped runs on it.
        limit: the first N questions of each dev set; ``threads``: questions at once of every row.
        encoder: the stock encoder of the dense indexes (a row's own encoder artifact replaces it).
        students: a program (or ``PROGRAM@PAPER_LM``, for the rows of that paper LM when it is mapped) → a ``multihop
            distill`` folder (or a served student ``SPEC[@DIR]``) that runs the stages a row names
            (``TableRow.stage_lms``); without one, such rows show the paper's numbers alone.
        metric: a DSPy metric or ``{name: fn}``, recorded in every row's run beside the built-in metrics.
        lm_for: a paper LM ("Gemma2-9B") → the spec of one of yours that its rows (and stages) run on.
        artifacts: ``NAME`` or ``NAME@DATASET`` → the folder of an artifact the rows need.
        build: make every missing artifact that can be made here, on ``build_limit`` train questions, under
            ``out/artifacts`` (resumable), before the rows run.
        first_stage: ``"dense"`` or ``"bm25"`` for every row that does not name its own (default: each table's).
        shard: ``"i/n"`` or ``(i, n)``: every n-th question of each dev set from the i-th only, into shard run folders
            that ``multihop merge`` joins (``lm`` then a spec or options; the artifacts given or built before, not
            ``build``).
        ray: ``auto`` or a cluster's address: the rows' questions answered (judged, scored) by Ray tasks, ``threads``
            at once.
    """
    method = paper_of(paper)
    chosen = select_tables(method, tables)
    unknown = sorted(set(datasets or ()) - set(DATASETS))
    if unknown:
        raise ValueError(f"no dev set {', '.join(unknown)}; choose from {', '.join(DATASETS)}")
    if first_stage not in (None, *FIRST_STAGES):
        raise ValueError(f"unknown first stage {first_stage!r}; choose one of {', '.join(FIRST_STAGES)}")
    students = {PROGRAMS.named(name.partition("@")[0]) + "".join(name.partition("@")[1:]): folder
                for name, folder in (students or {}).items()}  # PROGRAM or PROGRAM@PAPER_LM
    if (students or lm_for) and lm is None:
        raise ValueError("students and --lm-for LMs are made with the run's LM options: pass lm=<spec> (or LMOptions)")
    sharded = parse_shard(shard) if isinstance(shard, str) else shard
    if sharded and build:
        raise ValueError("--shard with --build would train each shard's artifacts apart: build them once (reproduce "
                         "--build, unsharded, or their commands) and give them to every shard with --artifact")
    options, base, judge = run_lms(lm, None, judge_lm)
    mapped = {paper_lm: options.make(spec) for paper_lm, spec in (lm_for or {}).items()}
    run_on = list(dict.fromkeys(d for table in chosen for d in table_datasets(table, datasets)))
    known = paper_artifacts(chosen)
    have = {**built_artifacts(Path(out), known, run_on), **given_artifacts(artifacts or {}, known, run_on)}
    setup = RunSetup(lm=options.lm if options else str(base.model), lm_for=dict(lm_for or {}), artifacts=have,
                     students={name: str(folder) for name, folder in students.items()}, encoder=encoder,
                     first_stage=first_stage)
    if build:
        needed = [(artifact, dataset if artifact.per_dataset else None)
                  for table in chosen for dataset in table_datasets(table, datasets)
                  for plan in plan_table(table, dataset, setup) if plan.skipped
                  for artifact in plan.row.needs if setup.artifact(artifact, dataset) is None]
        needed += [(table.encoder, dataset) for table in chosen if table.encoder is not None
                   for dataset in table_datasets(table, datasets)]
        with dspy.context(lm=base):
            have.update(build_missing(Path(out), needed, have, build_limit, encoder, progress, console))
        setup = dataclasses.replace(setup, artifacts=have)
    for table in chosen:
        if console is not None:
            for dataset, why in not_run(table, datasets).items():
                console.print(f"[yellow]note:[/yellow] {method.name} {table.number}: {dataset} not run, {why}; its "
                              "cells show the paper's numbers alone")
    if console is not None and embedded_notice(base.model):
        console.print(f"[yellow]note:[/yellow] {embedded_notice(base.model)}")
    out = Path(out)
    every = {dataset: load_dataset(question_file(dataset, "dev"), limit=limit) for dataset in run_on}
    examples = {dataset: shard_of(found, *sharded) if sharded else found for dataset, found in every.items()}
    if sharded:
        record_shard(out, "reproduce", sharded, {
            "paper": method.name, "tables": [table.number for table in chosen], "datasets": datasets, "lm": options,
            "limit": limit, "encoder": encoder, "judge_lm": judge_lm, "students": setup.students, "metric": metric,
            "lm_for": setup.lm_for, "first_stage": first_stage,
            "artifacts": {f"{name}@{dataset}" if dataset else name: str(Path(folder).resolve())
                          for (name, dataset), folder in have.items()}})
    student_lms = {name: options.student(folder) for name, folder in students.items()}
    planned = [plan for table in chosen for dataset in table_datasets(table, datasets)
               for plan in plan_table(table, dataset, setup)]
    retrievers: dict[Path, dspy.Module] = {}  # index folder → its retriever, shared by the rows that read it
    runs: dict[str, dict] = {}  # by identity: the run's folder, evaluation and record
    evaluations, recipes = [], []
    for index, plan in enumerate(planned):
        if plan.identity is None or plan.shares or plan.key() in runs:
            continue
        built = build_row(plan, setup, retrievers, student_lms, mapped, base, progress)
        reason = built if isinstance(built, str) else unpreparable(built[0], examples[plan.dataset])
        if reason is not None:  # a student without the row's stages, an oracle row without its labels
            planned[index] = dataclasses.replace(plan, identity=None, skipped=reason)
            continue
        program, row_lm, record = built
        folder = out / table_slug(plan.table) / plan.dataset / row_slug(plan.label)
        with dspy.context(lm=row_lm):
            manifest = run_manifest(program, every[plan.dataset], judge, limit=limit,
                                    data_sha256=sha256_file(question_file(plan.dataset, "dev"))[:16],
                                    paper=method.name, table=plan.table.number, row=plan.label, paper_lm=plan.row.lm
                                    or plan.table.lm, **record)
            if sharded:
                manifest = shard_manifest(manifest, every[plan.dataset], *sharded)
            recipes.append(partial(worker_row, plan, setup, options or base,
                                   None if options else dspy.settings.adapter))
            evaluations.append(Evaluation(program, examples[plan.dataset], folder, name=plan.label, judge_lm=judge,
                                          manifest=manifest, context=contextvars.copy_context(), metric=metric))
        runs[plan.key()] = {"folder": folder, "record": record, "program": program}
    if ray:
        summaries = ray_evaluate_all(evaluations, recipes, address=ray, workers=threads, progress=progress)
    else:
        summaries = evaluate_all(evaluations, threads, progress)
    for run, summary in zip(runs.values(), summaries, strict=True):
        run["summary"] = summary
    written = []
    for table in chosen:
        plans = [plan for plan in planned if plan.table is table]
        reproduced = table_result(method, table, plans, runs, setup, getattr(judge, "model", None), examples,
                                  not_run(table, datasets))
        written.append(write_reproduced(out, reproduced, plans, runs, examples, base, judge))
        if console is not None:
            console.print(console_table(reproduced))
    index = {"paper": method.name, "lm": base.model, "lm_for": setup.lm_for, "judge": getattr(judge, "model", None),
             "limit": limit, "artifacts": {f"{name}@{dataset}" if dataset else name: str(folder)
                                           for (name, dataset), folder in have.items()},
             "tables": [{"table": table.number, "markdown": md.name, "json": data.name,
                         "report": f"{table_slug(table)}/report.html"} for table, (md, data) in zip(chosen, written,
                                                                                                  strict=True)]}
    atomic_write_text(out / "reproduce.json", json.dumps(index, indent=2))
    if console is not None:
        console.print(f"tables: {', '.join(str(md) for md, _ in written)}; reports under {out}/<table>/report.html")
    return index


def build_row(plan: PlannedRow, setup: RunSetup, retrievers: dict, student_lms: dict, mapped: dict,
              base: dspy.BaseLM, progress: bool = True) -> tuple[dspy.Module, dspy.BaseLM, dict] | str:
    """``plan``'s program on its retriever (one a dataset, first stage, encoder and pooling, built once), its stages
    on their student or stronger LM, and the LM it runs under (each with a rollout id of the row's own); and what its
    run records beside the program's settings (first stage, index, encoder, pooling, student and the stages it
    serves, each stage's LM). A student that did not learn a stage the row names: the reason, in one line."""
    row, identity = plan.row, plan.identity
    cls = PROGRAMS[row.program]
    rollout_id = rollout(f"{plan.table.number} {plan.label} {plan.dataset}")
    record: dict = {"stage_lms": identity["stage_lms"], "artifacts": identity["artifacts"]}
    searched = None
    if takes_retriever(cls):
        searched, index = program_retriever(row.program, question_file(plan.dataset, "dev"), identity["encoder"],
                                            identity["first_stage"], identity["pooling"], progress, loaded=retrievers)
        record.update(retriever=index.name, **index_record(index), encoder_switches=identity["encoder_switches"])
    program = cls(retriever=searched, **row_settings(row, plan.dataset, setup)) if takes_retriever(cls) \
        else cls(**row_settings(row, plan.dataset, setup))
    stages = row.stage_lms
    if stages is not None and stages.role == "student":
        key = student_key(plan.table, row, setup)
        student, weights = student_lms[key]
        try:
            record["student_stages"] = use_student(program, student.copy(rollout_id=rollout_id),
                                                   served_student(setup.students[key])[1], stages.stages)
        except ValueError as exc:
            return str(exc)
        record["student"] = weights
    elif stages is not None:
        for stage in stages.stages:
            program.set_stage_lm(stage, mapped[stages.paper_lm].copy(rollout_id=rollout_id))
    paper_lm = row.lm or plan.table.lm
    row_lm = mapped[paper_lm] if paper_lm in mapped else base
    return program, row_lm.copy(rollout_id=rollout_id), record


def worker_row(plan: PlannedRow, setup: RunSetup, lm: LMOptions | dspy.BaseLM, adapter=None) -> tuple:
    """What a Ray worker of ``reproduce --ray`` runs a row with: :func:`build_row`'s program, its student or mapped
    stages' LMs and the row's LM, each made here from the run's options (an LM object, when the run is given none,
    as it is) and ``setup``; and the DSPy settings it runs under: the row's LM and the adapter the run's LM takes
    (else ``adapter``)."""
    options = lm if isinstance(lm, LMOptions) else None
    base = worker_lm(options) if options else lm
    stages = plan.row.stage_lms
    key = student_key(plan.table, plan.row, setup) if stages is not None and stages.role == "student" else None
    student_lms = {key: worker_student(options, setup.students[key])} if key is not None else {}
    mapped = {paper_lm: worker_lm(options, spec) for paper_lm, spec in setup.lm_for.items()} if options else {}
    built = build_row(plan, setup, {}, student_lms, mapped, base, progress=False)
    if isinstance(built, str):
        raise ValueError(built)
    program, row_lm, _ = built
    return program, {"lm": row_lm, "adapter": default_adapter(base) if options else adapter}


def ours(summary: dict, metric: str, table: PaperTable) -> float | None:
    """The value of one of ``table``'s metrics in an evaluation summary (None where the run has none): a count
    column is the first of its summary keys the run has (``table.counts``; none: the paper's alone), a derived column
    the mean of its parts (``table.derived``), any other column its own key."""
    if metric in table.derived:
        parts = [ours(summary, part, table) for part in table.derived[metric]]
        return None if None in parts else sum(parts) / len(parts)
    return next((summary[key] for key in table.counts.get(metric, (metric,)) if summary.get(key) is not None), None)


def interval(summary: dict, metric: str, table: PaperTable) -> list[float] | None:
    """The 95 % bootstrap interval of the value :func:`ours` reads, where the summary has one."""
    intervals = summary.get("intervals") or {}
    return next((intervals[key] for key in table.counts.get(metric, (metric,)) if intervals.get(key) is not None),
                None)


def method_row(method: Declaration, plans: Sequence[PlannedRow]) -> PlannedRow | None:
    """The row the others of a table are tested against, of those that run: the one labelled with the method's name
    (an ablation table's full method), else its first row of the method's program, else its first row."""
    running = [plan for plan in plans if plan.identity is not None]
    return next((plan for plan in running if plan.row.label == method.name),
                next((plan for plan in running if plan.row.program == method.name), running[0] if running else None))


def table_result(method: Declaration, table: PaperTable, plans: list[PlannedRow], runs: dict, setup: RunSetup,
                 judge: str | None, examples: dict, skipped: dict[str, str]) -> dict:
    """One reproduced table as data: what ran beside the paper's setting (:func:`setting_ran`), its columns, and
    for every row (the declared ones, then the stand-ins) each cell's paper number, ours with its 95 % interval,
    whether the paper's number lies inside it, the difference, and the paired test against the table's method row
    on the same questions; with why a row or a dataset has the paper's number alone."""
    references = {dataset: method_row(method, [plan for plan in plans if plan.dataset == dataset])
                  for dataset in dict.fromkeys(plan.dataset for plan in plans)}
    grouped: dict[tuple, dict[str, PlannedRow]] = {(id(row), False): {} for row in table.rows}
    for plan in sorted(plans, key=lambda plan: plan.stand_in):
        grouped.setdefault((id(plan.row), plan.stand_in), {})[plan.dataset] = plan
    rows = []
    for (row_id, stand_in), by_dataset in grouped.items():
        row = next(row for row in table.rows if id(row) == row_id)
        first = next(iter(by_dataset.values()), None)  # None: no dataset of the table runs here
        cells = []
        for dataset, metric in table.columns:
            plan = by_dataset.get(dataset)
            run = runs.get(plan.key()) if plan is not None and plan.identity is not None else None
            cells.append(result_cell(table, dataset, metric, None if stand_in else row.numbers.get((dataset, metric)),
                                     run, runs.get(references[dataset].key()) if references.get(dataset) else None))
        reference = references.get(first.dataset) if first else None
        rows.append({"label": first.label if first else row.label, "program": row.program, "settings": row.settings,
                     "paper_lm": row.lm or table.lm, "lm": first.lm if first else None, "stand_in": stand_in,
                     "runs_here": any(plan.identity is not None for plan in by_dataset.values()),
                     "why_not": next((plan.skipped for plan in by_dataset.values() if plan.skipped),
                                     None if first else "no dataset of the table is run here"),
                     "shares": first.shares if first else None,
                     "reference": reference is not None and reference.row is row and not stand_in,
                     "runs": {dataset: {"folder": str(runs[plan.key()]["folder"]), **runs[plan.key()]["record"]}
                              for dataset, plan in by_dataset.items()
                              if plan.identity is not None and plan.key() in runs},
                     "cells": with_means(table, cells)})
    ran = list(dict.fromkeys(plan.dataset for plan in plans))
    return {"paper": method.name, "table": table.number, "title": table.title, "lm": setup.lm, "judge": judge,
            "notice": embedded_notice(setup.lm), "paper_lm": table.lm, "settings": table.settings,
            "ours": setting_ran(table, plans, runs, setup),
            "counts": {metric: list(keys) for metric, keys in table.counts.items()},
            "derived": {metric: list(parts) for metric, parts in table.derived.items()},
            "notes": table.notes, "columns": [list(column) for column in table.columns],
            "datasets": {dataset: len(examples[dataset]) for dataset in ran}, "not_run": skipped,
            "reference": next((reference.label for reference in references.values() if reference), None),
            "rows": rows}


def result_cell(table: PaperTable, dataset: str, metric: str, theirs: float | None, run: dict | None,
                reference: dict | None) -> dict:
    """One cell: the paper's number, ours with its interval (and whether the paper's lies inside it), the
    difference, and ours against the table's method row on the same questions (None for that row itself)."""
    value = ours(run["summary"], metric, table) if run is not None else None
    bounds = interval(run["summary"], metric, table) if run is not None else None
    cell = {"dataset": dataset, "metric": metric, "rate": table.is_rate(metric), "paper": theirs, "ours": value,
            "interval": bounds,
            "paper_inside": None if bounds is None or theirs is None else bounds[0] <= theirs <= bounds[1],
            "difference": None if value is None or theirs is None else value - theirs, "questions":
            run["summary"].get("questions") if run is not None else None, "paired": None}
    key = next((key for key in table.counts.get(metric, (metric,)) if run is not None and
                run["summary"].get(key) is not None), None)
    if key is not None and reference is not None and reference is not run:
        cell["paired"] = paired_runs(reference["folder"], run["folder"], key)
    return cell


def with_means(table: PaperTable, cells: list[dict]) -> list[dict]:
    """``cells`` of one row with ours in each column of the dataset :data:`MEAN`: the mean of ours in the row's
    cells of that metric on the table's other datasets, where every one of them ran."""
    for cell in cells:
        if cell["dataset"] != MEAN:
            continue
        values = [other["ours"] for other in cells if other["metric"] == cell["metric"] and other["dataset"] != MEAN]
        if values and None not in values:
            cell["ours"] = sum(values) / len(values)
            cell["difference"] = None if cell["paper"] is None else cell["ours"] - cell["paper"]
    return cells


def setting_ran(table: PaperTable, plans: Sequence[PlannedRow], runs: dict, setup: RunSetup) -> dict:
    """What the rows that ran ran with, for the table's header beside the paper's setting: the LMs, each encoder
    (fine-tuned or stock, its checksum) with its pooling and first stage, the values of the settings that set the
    table's setup (k, n, the reranker, the loops' caps), the students, and what ran in place of a model the paper used
    that was not given (``stand_ins``)."""
    ran = [runs[plan.key()] for plan in plans if plan.identity is not None and plan.key() in runs]
    identities = [plan.identity for plan in plans if plan.identity is not None and plan.key() in runs]
    retrieval = {json.dumps({key: run["record"].get(key) for key in ("first_stage", "encoder", "pooling",
                                                                      "encoder_switches", "passages")},
                            sort_keys=True)
                 for run in ran if run["record"].get("first_stage")}
    return {"lm": setup.lm, "lm_for": dict(setup.lm_for),
            "retrieval": [json.loads(text) for text in sorted(retrieval)],
            "settings": {key: sorted({json.dumps(identity["settings"][key]) for identity in identities
                                      if key in identity["settings"]}) for key in SETUP_KEYS
                         if any(key in identity["settings"] for identity in identities)},
            "students": {program: {"student": folder, "stages": sorted({stage for run in ran for stage in
                                                                        run["record"].get("student_stages", [])})}
                         for program, folder in setup.students.items()},
            "stand_ins": sorted({text for plan in plans if plan.identity is not None and plan.key() in runs
                                 for text in plan.substitutes})}


def write_reproduced(out: Path, reproduced: dict, plans: list[PlannedRow], runs: dict, examples: dict,
                     base: dspy.BaseLM, judge) -> tuple[Path, Path]:
    """``<table>.md`` and ``<table>.json`` into ``out``, and the comparison's table, charts and report of the rows
    that ran into ``out/<table>/``."""
    slug = table_slug(plans[0].table) if plans else re.sub(r"[^a-z0-9]+", "-", reproduced["table"].lower())
    markdown, data = out / f"{slug}.md", out / f"{slug}.json"
    atomic_write_text(markdown, to_markdown(reproduced))
    atomic_write_text(data, json.dumps(reproduced, indent=2))
    ran = [plan for plan in plans if plan.identity is not None and plan.key() in runs]
    if not ran:
        return markdown, data
    folder = out / slug
    folder.mkdir(parents=True, exist_ok=True)  # its rows may all have run in another table's folder
    comparison: dict = {
        "budget": {"mode": "paper", "max_tokens": base.kwargs.get("max_tokens")}, "lm": base.model,
        "notice": embedded_notice(base.model),
        "judge": getattr(judge, "model", None),
        "retriever": {"first_stage": ", ".join(sorted({plan.identity.get("first_stage") or "none" for plan in ran})),
                      "encoder": ", ".join(sorted({plan.identity.get("encoder") or "none" for plan in ran})),
                      "indexes": {f"{plan.dataset} {plan.label}": runs[plan.key()]["record"].get("retriever")
                                  for plan in ran}},
        "datasets": {dataset: {"file": str(question_file(dataset, "dev")), "questions": len(examples[dataset]),
                               "ids": [str(example.id) for example in examples[dataset]]}
                     for dataset in dict.fromkeys(plan.dataset for plan in ran)},
        "programs": {}, "runs": [], "rows": [], "charts": [],
        "papers": [{"dataset": plan.dataset, "program": plan.label, "label": "paper (theirs)",
                    "lm": plan.row.lm or plan.table.lm or "its LM",
                    "source": f"{reproduced['paper']}, {plan.table.number}",
                    "setting": plan.table.notes or "the paper's own test set",
                    **{metric: value for (dataset, metric), value in plan.row.numbers.items()
                       if dataset == plan.dataset and metric in SUMMARY_COLUMNS}} for plan in ran
                   if not plan.stand_in and any(dataset == plan.dataset for dataset, _ in plan.row.numbers)],
    }
    for plan in ran:
        run = runs[plan.key()]
        comparison["programs"].setdefault(plan.label, {
            "kind": PROGRAMS.declaration(plan.row.program).kind, "paper_settings": plan.row.settings,
            "config": run["program"].config(), "student": run["record"].get("student")})
        comparison["runs"].append({"dataset": plan.dataset, "program": plan.label,
                                   "folder": os.path.relpath(run["folder"], folder)})  # maybe another table's
        comparison["rows"].append(summary_row(plan.dataset, plan.label, run["summary"]))
    comparison["charts"] = [chart.name for chart in write_charts(folder, comparison["rows"])]
    everywhere = all(any(run["program"] == reproduced["reference"] for run in comparison["runs"]
                         if run["dataset"] == dataset) for dataset in comparison["datasets"])
    comparison["paired"] = paired_tests(folder, comparison, reproduced["reference"] if everywhere else None)
    write_table(folder, comparison)
    write_report(folder, comparison)
    return markdown, data

