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
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dspy
from rich.console import Console
from rich.table import Table

from multihop.data.folders import sha256_file
from multihop.data.loaders import load_dataset
from multihop.data.paths import atomic_write_text
from multihop.data.question_sets import DATASETS, question_file
from multihop.evaluation.runner import Evaluation, evaluate_all, run_manifest
from multihop.experiments.charts import write_charts
from multihop.experiments.comparison import rollout, run_lms
from multihop.experiments.report import write_report
from multihop.experiments.tables import summary_row, write_table
from multihop.lm.models import embedded_notice
from multihop.lm.options import LMOptions, served_student
from multihop.optimize.students import use_student
from multihop.programs import PROGRAMS, shared_retriever, takes_retriever
from multihop.programs.papers import PaperTable, TableRow, is_rate
from multihop.programs.registry import Method

# what each of the tables' metrics is in our evaluation summary (the rest are our summary keys themselves)
SUMMARY_KEYS = {"steps": "retrieval_calls"}  # a retrieval–generation cycle a question: one retrieval step each
SUMMARY_COLUMNS = {"em", "f1", "acc", "cover_em", "llm_eval", "recall@2", "recall@5"}  # the report's paper columns


@dataclass(frozen=True)
class PlannedRow:
    """One row of a table on one dataset: the program that runs it, or why it does not run here."""

    table: PaperTable
    row: TableRow
    dataset: str
    program: dspy.Module | None = None
    skipped: str | None = None  # why the row shows the paper's number alone


def paper_of(name: str) -> Method:
    """The declaration of the method whose paper ``name`` is (its program's name, as the papers spell it)."""
    method = PROGRAMS.declaration(PROGRAMS.named(name)) if PROGRAMS.named(name) in PROGRAMS else None
    if method is None or method.kind != "method" or not method.tables:
        papers = ", ".join(m.name for m in PROGRAMS.declared("method") if m.tables)
        raise ValueError(f"no paper named {name!r} declares tables; choose from {papers}")
    return method


def table_slug(table: PaperTable) -> str:
    """A table's folder and file name: ``table-2``, ``fig-5``, ``app-e``."""
    return re.sub(r"[^a-z0-9]+", "-", table.number.lower()).strip("-")


def row_slug(row: TableRow) -> str:
    """A row's folder name: its label (and its LM, where rows of several LMs share a label), as a file name."""
    text = row.label + (f" {row.lm}" if row.lm else "")
    return re.sub(r"[^A-Za-z0-9.+=-]+", "-", text).strip("-")[:80]


def select_tables(method: Method, wanted: Sequence[str] | None) -> list[PaperTable]:
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
    """The dev sets of ``table`` this run evaluates: its datasets that ``MULTIHOP_DATA`` holds, of ``datasets``."""
    columns = list(dict.fromkeys(dataset for dataset, _ in table.columns))
    return [dataset for dataset in columns if dataset in DATASETS and (not datasets or dataset in datasets)]


def why_not_here(row: TableRow, students: bool = False) -> str | None:
    """Why ``row`` shows the paper's number alone, or None when a program here runs it (``students``: a student of
    its program is given)."""
    if not row.runnable:
        return row.why_not
    if row.program not in PROGRAMS:
        return f"{row.program} is no program here"
    if row.stage_lms is not None and (row.stage_lms.role != "student" or not students):
        paper = f" ({row.stage_lms.paper_lm} in the paper)" if row.stage_lms.paper_lm else ""
        fix = f" (give one: --student {row.program}=DIR)" if row.stage_lms.role == "student" else ""
        return f"runs {', '.join(row.stage_lms.stages)} on a {row.stage_lms.role} LM{paper}{fix}"
    return None


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


def describe_tables(methods: Sequence[Method]) -> list[dict]:
    """What ``reproduce --list`` shows: each paper's tables with their rows, whether each runs here and why not."""
    return [{"paper": method.name, "table": table.number, "title": table.title,
             "datasets": list(dict.fromkeys(dataset for dataset, _ in table.columns)),
             "runs_on": table_datasets(table, None), "settings": table.settings,
             "rows": [{"label": row.label, "program": row.program, "settings": row.settings, "lm": row.lm or table.lm,
                       "numbers": len(row.numbers), "runnable": why_not_here(row) is None,
                       "why_not": why_not_here(row)} for row in table.rows]}
            for method in methods for table in method.tables]


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
) -> dict:
    """Run the declared rows of ``paper``'s ``tables`` (default: all) on ``datasets`` (default: every dev set a table
    has columns for) and write each table, ours beside the paper's, into ``out``; returns what ``reproduce.json``
    holds. ``lm``: a spec or :class:`LMOptions`, or None for the LM DSPy is configured with; ``limit``: the first N
    questions of each dev set; ``threads``: questions at once of every row; ``encoder``: the dense index's;
    ``students`` maps a program to a ``multihop distill`` folder (or a served student ``SPEC[@DIR]``) whose stages run
    on it in the rows that run stages on a student (``TableRow.stage_lms``); without one, such rows show the paper's
    numbers alone. ``metric`` (a DSPy metric or ``{name: fn}``) is recorded in every row's run beside the built-in
    metrics (:func:`multihop.evaluation.runner.evaluate`)."""
    method = paper_of(paper)
    chosen = select_tables(method, tables)
    unknown = sorted(set(datasets or ()) - set(DATASETS))
    if unknown:
        raise ValueError(f"no dev set {', '.join(unknown)}; choose from {', '.join(DATASETS)}")
    students = {PROGRAMS.named(name): folder for name, folder in (students or {}).items()}
    if students and lm is None:
        raise ValueError("students adapt the LM given as a spec: pass lm=<spec> (or LMOptions) with students")
    options, base, judge = run_lms(lm, None, judge_lm)
    student_lms = {name: options.student(folder) for name, folder in students.items()}
    for table in chosen:
        if console is not None and not table_datasets(table, datasets):
            reported = ", ".join(dict.fromkeys(dataset for dataset, _ in table.columns))
            console.print(f"[yellow]note:[/yellow] {method.name} {table.number} reports {reported}: no dev set here "
                          f"(of {', '.join(datasets or DATASETS)}), so its rows show the paper's numbers alone")
    if console is not None and embedded_notice(base.model):
        console.print(f"[yellow]note:[/yellow] {embedded_notice(base.model)}")
    out = Path(out)
    examples = {dataset: load_dataset(question_file(dataset, "dev"), limit=limit)
                for dataset in dict.fromkeys(d for table in chosen for d in table_datasets(table, datasets))}
    retrievers: dict[tuple[str, str], tuple] = {}
    planned: list[PlannedRow] = []
    evaluations = []
    for table in chosen:
        for dataset in table_datasets(table, datasets):
            for row in table.rows:
                reason = why_not_here(row, students=row.program in students)
                if reason is not None:
                    planned.append(PlannedRow(table, row, dataset, skipped=reason))
                    continue
                cls = PROGRAMS[row.program]
                first_stage = row.first_stage or table.first_stage
                if takes_retriever(cls) and (dataset, first_stage) not in retrievers:
                    retrievers[dataset, first_stage] = shared_retriever(question_file(dataset, "dev"), first_stage,
                                                                        encoder)
                searched, index = retrievers.get((dataset, first_stage), (None, None))
                program = cls(retriever=searched, **row.settings) if takes_retriever(cls) else cls(**row.settings)
                unprepared = unpreparable(program, examples[dataset])
                if unprepared is not None:  # e.g. an oracle row without its labels
                    planned.append(PlannedRow(table, row, dataset, skipped=unprepared))
                    continue
                planned.append(PlannedRow(table, row, dataset, program))
                rollout_id = rollout(f"{method.name} {table.number} {row_slug(row)}")
                weights = None
                if row.stage_lms is not None and row.stage_lms.role == "student":
                    student, weights = student_lms[row.program]
                    use_student(program, student.copy(rollout_id=rollout_id), served_student(students[row.program])[1])
                with dspy.context(lm=base.copy(rollout_id=rollout_id)):
                    manifest = run_manifest(program, examples[dataset], judge, limit=limit, student=weights,
                                            data_sha256=sha256_file(question_file(dataset, "dev"))[:16],
                                            retriever=index.name if index is not None else None,
                                            paper=method.name, table=table.number, row=row.label)
                    evaluations.append(Evaluation(program, examples[dataset],
                                                  out / table_slug(table) / dataset / row_slug(row), name=row.label,
                                                  judge_lm=judge, manifest=manifest,
                                                  context=contextvars.copy_context(), metric=metric))
    summaries = iter(evaluate_all(evaluations, threads, progress))
    results = {plan_key(plan): next(summaries) for plan in planned if plan.program is not None}
    written = []
    for table in chosen:
        reproduced = table_result(method, table, [plan for plan in planned if plan.table is table], results,
                                  base.model, getattr(judge, "model", None), examples)
        written.append(write_reproduced(out, reproduced, [plan for plan in planned if plan.table is table],
                                        results, examples, base, judge, retrievers, encoder))
        if console is not None:
            console.print(console_table(reproduced))
    index = {"paper": method.name, "lm": base.model, "judge": getattr(judge, "model", None), "limit": limit,
             "tables": [{"table": table.number, "markdown": md.name, "json": data.name,
                         "report": f"{table_slug(table)}/report.html"} for table, (md, data) in zip(chosen, written,
                                                                                                  strict=True)]}
    atomic_write_text(out / "reproduce.json", json.dumps(index, indent=2))
    if console is not None:
        console.print(f"tables: {', '.join(str(md) for md, _ in written)}; reports under {out}/<table>/report.html")
    return index


def plan_key(plan: PlannedRow) -> tuple[int, str, str]:
    return id(plan.table), plan.row.label + (plan.row.lm or ""), plan.dataset


def ours(summary: dict, metric: str) -> float | None:
    """The value of one of the tables' metrics in an evaluation summary (None where the run has none)."""
    return summary.get(SUMMARY_KEYS.get(metric, metric))


def table_result(method: Method, table: PaperTable, plans: list[PlannedRow], results: dict, lm: str,
                 judge: str | None, examples: dict) -> dict:
    """One reproduced table as data: its columns, and for every row each cell's paper number, ours and the
    difference (ours − theirs), with why a row or a dataset has the paper's number alone."""
    rows = []
    for row in table.rows:
        mine = {plan.dataset: plan for plan in plans if plan.row is row}
        cells = []
        for dataset, metric in table.columns:
            theirs = row.numbers.get((dataset, metric))
            plan = mine.get(dataset)
            value = ours(results[plan_key(plan)], metric) if plan is not None and plan.program is not None else None
            cells.append({"dataset": dataset, "metric": metric, "paper": theirs, "ours": value,
                          "difference": None if value is None or theirs is None else value - theirs})
        skipped = next((plan.skipped for plan in mine.values() if plan.skipped), None) if mine else why_not_here(row)
        rows.append({"label": row.label, "program": row.program, "settings": row.settings, "lm": row.lm or table.lm,
                     "runs_here": skipped is None, "why_not": skipped, "cells": cells})
    run = list(dict.fromkeys(plan.dataset for plan in plans))
    return {"paper": method.name, "table": table.number, "title": table.title, "lm": lm, "judge": judge,
            "notice": embedded_notice(lm),
            "paper_lm": table.lm,
            "settings": table.settings, "notes": table.notes, "columns": [list(column) for column in table.columns],
            "datasets": {dataset: len(examples[dataset]) for dataset in run},
            "not_run": [dataset for dataset in dict.fromkeys(d for d, _ in table.columns) if dataset not in run],
            "rows": rows}


def cell_text(cell: dict) -> str:
    """``ours / paper (difference)``, as the paper prints the metric (rates in percent); ``–`` for a missing side."""
    def shown(value):
        if value is None:
            return "–"
        return f"{100 * value:.1f}" if is_rate(cell["metric"]) else f"{value:.2f}"

    if cell["ours"] is None:
        return f"– / {shown(cell['paper'])}"
    if cell["difference"] is None:
        return f"{shown(cell['ours'])} / –"
    difference = cell["difference"] * (100 if is_rate(cell["metric"]) else 1)
    return f"{shown(cell['ours'])} / {shown(cell['paper'])} ({difference:+.1f})"


def to_markdown(reproduced: dict) -> str:
    """The table as the paper prints it (its rows and columns), every cell ``ours / paper (difference)``."""
    columns = [tuple(column) for column in reproduced["columns"]]
    lines = [f"# {reproduced['paper']}, {reproduced['table']}: {reproduced['title']}", "",
             f"- ours: `{reproduced['lm']}` on the first "
             f"{', '.join(f'{n} {d}' for d, n in reproduced['datasets'].items()) or 'no'} dev questions; the paper's: "
             f"{reproduced['paper_lm'] or 'its own LM'} on its own test sets",
             f"- the table's settings: {json.dumps(reproduced['settings'])}"]
    if reproduced["notice"]:
        lines.append(f"- note: {reproduced['notice']}")
    if reproduced["not_run"]:
        lines.append(f"- not run here (no dev set in MULTIHOP_DATA): {', '.join(reproduced['not_run'])}")
    if not reproduced["judge"] and any(metric == "llm_eval" for _, metric in columns):
        lines.append("- LLM Eval: ours only with a judge (--judge-lm)")
    lines += ["- every cell: ours / the paper's (ours − theirs); rates in percent", "",
              "| row | " + " | ".join(f"{dataset} {metric}" for dataset, metric in columns) + " |",
              "|---|" + "---:|" * len(columns)]
    notes = []
    for row in reproduced["rows"]:
        label = row["label"] + (f" ({row['lm']})" if row["lm"] and row["lm"] != reproduced["paper_lm"] else "")
        if row["why_not"]:
            notes.append(f"{row['label']}: {row['why_not']}")
            label += f" [{len(notes)}]"
        lines.append(f"| {label} | " + " | ".join(cell_text(cell) for cell in row["cells"]) + " |")
    if notes:
        lines += ["", "Rows shown with the paper's numbers alone:", ""]
        lines += [f"{number}. {note}" for number, note in enumerate(notes, 1)]
    if reproduced["notes"]:
        lines += ["", f"The paper's table: {reproduced['notes']}"]
    return "\n".join(lines) + "\n"


def console_table(reproduced: dict) -> Table:
    """The table on the console: the columns of the dev sets that ran (the markdown file has every column)."""
    shown = [index for index, (dataset, _) in enumerate(reproduced["columns"]) if dataset in reproduced["datasets"]]
    left_out = f"; the paper's other columns ({', '.join(reproduced['not_run'])}) are in the .md" \
        if reproduced["not_run"] else ""
    table = Table(title=f"{reproduced['paper']} {reproduced['table']}: ours / paper (difference){left_out}")
    table.add_column("row")
    for index in shown:
        dataset, metric = reproduced["columns"][index]
        table.add_column(f"{dataset} {metric}", justify="right")
    for row in reproduced["rows"]:
        label = row["label"] if row["runs_here"] else f"[dim]{row['label']} (paper only)[/dim]"
        table.add_row(label, *(cell_text(row["cells"][index]) for index in shown))
    return table


def write_reproduced(out: Path, reproduced: dict, plans: list[PlannedRow], results: dict, examples: dict,
                     base: dspy.BaseLM, judge, retrievers: dict, encoder: str) -> tuple[Path, Path]:
    """``<table>.md`` and ``<table>.json`` into ``out``, and the comparison's table, charts and report of the rows
    that ran into ``out/<table>/``."""
    slug = table_slug(plans[0].table) if plans else re.sub(r"[^a-z0-9]+", "-", reproduced["table"].lower())
    markdown, data = out / f"{slug}.md", out / f"{slug}.json"
    atomic_write_text(markdown, to_markdown(reproduced))
    atomic_write_text(data, json.dumps(reproduced, indent=2))
    ran = [plan for plan in plans if plan.program is not None]
    if not ran:
        return markdown, data
    folder = out / slug
    comparison: dict = {
        "budget": {"mode": "paper", "max_tokens": base.kwargs.get("max_tokens")}, "lm": base.model,
        "notice": embedded_notice(base.model),
        "judge": getattr(judge, "model", None),
        "retriever": {"first_stage": plans[0].table.first_stage, "encoder": encoder,
                      "indexes": {dataset: str(index) for (dataset, _), (_, index) in retrievers.items()}},
        "datasets": {dataset: {"file": str(question_file(dataset, "dev")), "questions": len(examples[dataset]),
                               "ids": [str(example.id) for example in examples[dataset]]}
                     for dataset in dict.fromkeys(plan.dataset for plan in ran)},
        "programs": {}, "runs": [], "rows": [], "charts": [],
        "papers": [{"dataset": plan.dataset, "program": plan.row.label, "label": "paper (theirs)",
                    "lm": plan.row.lm or plan.table.lm or "its LM",
                    "source": f"{reproduced['paper']}, {plan.table.number}",
                    "setting": plan.table.notes or "the paper's own test set",
                    **{metric: value for (dataset, metric), value in plan.row.numbers.items()
                       if dataset == plan.dataset and metric in SUMMARY_COLUMNS}} for plan in ran
                   if any(dataset == plan.dataset for dataset, _ in plan.row.numbers)],
    }
    for plan in ran:
        comparison["programs"].setdefault(plan.row.label, {
            "kind": PROGRAMS.declaration(plan.row.program).kind, "paper_settings": plan.row.settings,
            "config": plan.program.config(), "student": None})
        comparison["runs"].append({"dataset": plan.dataset, "program": plan.row.label,
                                   "folder": f"{plan.dataset}/{row_slug(plan.row)}"})
        comparison["rows"].append(summary_row(plan.dataset, plan.row.label, results[plan_key(plan)]))
    comparison["charts"] = [chart.name for chart in write_charts(folder, comparison["rows"])]
    write_table(folder, comparison)
    write_report(folder, comparison)
    return markdown, data

