"""The comparison's table: one row per dataset × program from its evaluation summary, the papers' own numbers beside
them (labelled as theirs), written as ``comparison.json`` and ``comparison.md`` and shown as one table per dataset.

The comparison itself is a JSON-ready dict (what ``comparison.json`` holds): ``budget`` (k passages, max iterations,
max tokens, as applied), ``lm``, ``judge``, ``retriever``, ``datasets`` (file, question count, question ids),
``programs`` (each one's config, the constructor setting each budget item set, its student), ``runs`` (the evaluation
folder of each dataset × program, relative to the output folder), ``rows`` (ours, each with the 95% bootstrap interval
of each of its means under ``intervals``), ``paired`` (per dataset, each program's paired tests against the reference
program on the same questions), ``papers`` (theirs) and ``charts``. Every cell of ours shows its interval in brackets;
a dataset of fewer than :data:`FEW_QUESTIONS` questions says its intervals are wide.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from multihop.data.paths import atomic_write_text
from multihop.experiments.budget import BUDGET_ITEMS
from multihop.programs.papers import PaperResult

TABLE_JSON = "comparison.json"
TABLE_MARKDOWN = "comparison.md"
COLUMNS = [("em", "EM"), ("f1", "F1"), ("acc", "Acc"), ("cover_em", "Cover-EM"), ("llm_eval", "LLM Eval"),
           ("recall@2", "R@2"), ("recall@5", "R@5"), ("recall@k", "R@k"), ("ndcg@10", "nDCG@10"), ("mrr", "MRR"),
           ("llm_calls", "LLM calls/q"),
           ("retrieval_calls", "retrieval steps/q"), ("prompt_tokens", "input tokens/q"),
           ("completion_tokens", "output tokens/q"), ("seconds", "s/q"), ("errors", "errors/q"),
           ("fallbacks", "fallbacks/q")]
PERCENT = {"em", "f1", "acc", "cover_em", "llm_eval", "recall@2", "recall@5", "recall@k",  # shares, in percent
           "ndcg@10", "mrr"}  # and the ranking scores in [0, 1], ×100 as recall is
OPTIONAL = {"llm_eval", "recall@k", "ndcg@10", "mrr"}  # a column only when some row (ours or theirs) has it
KNOWN = {key for key, _ in COLUMNS}  # any other column is a user metric
GROUPS = {"method": "methods", "baseline": "baselines", "custom": "other programs"}  # the tables' groups, in order
FEW_QUESTIONS = 50  # a dataset of fewer questions says its intervals are wide
INTERVALS_TEXT = "in brackets: the 95% bootstrap interval of each mean over the questions"
PAIRED_TEXT = ("Each program minus the reference program on the questions both have a value for: the mean difference, "
               "its 95% paired bootstrap interval and the p-value of a two-sided sign-flip permutation test (n= where "
               "a metric pairs fewer questions than the row).")


def summary_row(dataset: str, program: str, summary: dict) -> dict:
    """Our row of one dataset × program: the table's columns from its evaluation ``summary`` (errors as a share of
    questions, fallbacks per question, 0 when the program took none), its question count, and the user metrics it
    was scored with (their names under ``metrics``, each a column)."""
    n = summary.get("questions", 0)
    row = {"dataset": dataset, "program": program, "questions": n, "errored": summary.get("errors", 0)}
    row.update({key: summary.get(key) for key, _ in COLUMNS})
    row["errors"] = row["errored"] / n if n else 0.0
    row["fallbacks"] = summary.get("fallbacks", 0.0) if n else None
    if summary.get("metrics"):
        row["metrics"] = list(summary["metrics"])
        row.update({name: summary.get(name) for name in row["metrics"]})
    intervals = summary.get("intervals", {})
    keys = [*(key for key, _ in COLUMNS), *row.get("metrics", [])]
    row["intervals"] = {key: intervals[key] for key in keys if intervals.get(key)}
    return row


def paper_row(result: PaperResult) -> dict:
    """A paper's numbers as a row: its metrics, its label ("paper (theirs, <LM>)"), where they were read and the
    setting they were measured in."""
    return {"dataset": result.dataset, "program": result.program, "label": result.label(), "lm": result.lm,
            "source": result.source, "setting": result.setting, **result.metrics}


def number(key: str, value: float, signed: bool = False) -> str:
    """A value of column ``key``: a share in percent, seconds and errors with two decimals, a user metric with three,
    other counts with one; ``signed`` (a difference) with its sign."""
    sign = "+" if signed else ""
    if key in PERCENT:
        return f"{100 * value:{sign}.1f}"
    if key not in KNOWN:
        return f"{value:{sign}.3f}"
    return f"{value:{sign}.2f}" if key in ("seconds", "errors") else f"{value:{sign}.1f}"


def interval_text(key: str, interval: Sequence[float]) -> str:
    """An interval of column ``key`` in brackets: ``[40.1–63.2]``."""
    return f"[{number(key, interval[0])}–{number(key, interval[1])}]"


def cell(key: str, value, interval: Sequence[float] | None = None) -> str:
    """One table cell: the value (:func:`number`), its interval after it when it has one, "–" for none."""
    if value is None:
        return "–"
    return f"{number(key, value)} {interval_text(key, interval)}" if interval else number(key, value)


def row_cells(row: dict, columns: Sequence[tuple[str, str]]) -> list[str]:
    """A row's cells in ``columns``, each with its interval (our rows have them, the papers' do not)."""
    return [cell(key, row.get(key), row.get("intervals", {}).get(key)) for key, _ in columns]


def shown_columns(rows: Sequence[dict]) -> list[tuple[str, str]]:
    """The columns some row has, and after the answer and recall metrics the user metrics of the rows."""
    shown = [(key, header) for key, header in COLUMNS
             if key not in OPTIONAL or any(row.get(key) is not None for row in rows)]
    users = [(name, name) for name in dict.fromkeys(name for row in rows for name in row.get("metrics", []))]
    at = next((i for i, (key, _) in enumerate(shown) if key == "llm_calls"), len(shown))
    return [*shown[:at], *users, *shown[at:]]


def tested_metrics(rows: Sequence[dict]) -> list[str]:
    """The metrics the paired tests compare: the shares and user metrics among the columns our ``rows`` show."""
    return [key for key, _ in shown_columns(rows) if key in PERCENT or key not in KNOWN]


def few_questions_note(questions: int) -> str | None:
    """What a dataset of fewer than :data:`FEW_QUESTIONS` questions says of its intervals, None for more."""
    if questions >= FEW_QUESTIONS:
        return None
    return (f"{questions} questions: the intervals are wide; a difference between two programs is read from their "
            "paired test")


def paired_cell(key: str, test: dict | None, questions: int, sep: str = " ") -> str:
    """One paired test as a cell: the difference with its sign, its interval and p (``n=`` where it covers fewer
    questions than the row), joined by ``sep``; "–" where there is none."""
    if not test or test["difference"] is None:
        return "–"
    parts = [number(key, test["difference"], signed=True)]
    if test["interval"]:
        low, high = test["interval"]
        parts.append(f"[{number(key, low, signed=True)}, {number(key, high, signed=True)}]")
    if test["p_value"] is not None:
        parts.append("p<0.001" if test["p_value"] < 0.001 else f"p={test['p_value']:.3f}")
    if test["n"] != questions:
        parts.append(f"n={test['n']}")
    return sep.join(parts)


def paired_table(comparison: dict, dataset: str, sep: str = " "
                 ) -> tuple[str, list[tuple[str, str]], list[tuple[str, int, list[str]]]]:
    """One dataset's paired tests as a table: the reference program, the columns (metric, header) and per program
    (in the table's order) its questions paired with the reference and its cells (their parts joined by ``sep``)."""
    paired = comparison.get("paired", {}).get(dataset)
    if not paired:
        return "", [], []
    headers = dict(COLUMNS)
    columns = [(key, headers.get(key, key)) for key in paired["metrics"]]
    rows = []
    for program, tests in paired["programs"].items():
        questions = max((test["n"] for test in tests.values()), default=0)
        rows.append((program, questions, [paired_cell(key, tests.get(key), questions, sep) for key, _ in columns]))
    return paired["reference"], columns, rows


def dataset_table(comparison: dict, dataset: str) -> tuple[list[dict], list[dict], list[tuple[str, str]]]:
    """One dataset's table: our rows (the methods, then the baselines, then any other program), the papers' rows,
    and the columns either has."""
    ours = [row for row in comparison["rows"] if row["dataset"] == dataset]
    ours.sort(key=lambda row: list(GROUPS).index(kind_of(comparison, row["program"])))
    theirs = [row for row in comparison["papers"] if row["dataset"] == dataset]
    return ours, theirs, shown_columns(ours + theirs)


def kind_of(comparison: dict, program: str) -> str:
    """Whether ``program`` is one of the methods, a baseline or another program, as the comparison recorded it."""
    return comparison["programs"].get(program, {}).get("kind", "custom")


def group_starts(comparison: dict, rows: Sequence[dict]) -> dict[int, str]:
    """The index of the first row of each group in ``rows`` (sorted by :func:`dataset_table`) → the group's name."""
    starts: dict[int, str] = {}
    for index, row in enumerate(rows):
        group = GROUPS[kind_of(comparison, row["program"])]
        if group not in starts.values():
            starts[index] = group
    return starts


def budget_text(budget: dict) -> str:
    """The budget as applied, on one line."""
    items = BUDGET_ITEMS if budget["mode"] == "shared" else {"max_tokens": BUDGET_ITEMS["max_tokens"]}
    text = "; ".join(f"{name} = {budget[name] if budget[name] is not None else 'the LM default'} ({what})"
                     for name, what in items.items())
    if budget["mode"] == "shared":
        return text
    whose = f"{budget['paper']}'s paper's settings for each program" if budget.get("paper") else \
        "each program's paper's settings"
    return f"{whose}; {text}"


def knobs_text(programs: dict) -> str:
    """What the budget became in each program: the constructor setting each shared budget item set (``none`` where it
    has no such knob), or, under the paper's budget, the settings its paper gives (``defaults`` when they are its
    defaults)."""
    def knobs(info: dict) -> str:
        if "paper_settings" in info:
            return ", ".join(f"{name} = {value}" for name, value in info["paper_settings"].items()) or "defaults"
        return ", ".join(f"{item} → {setting}" for item, setting in info["budget"].items() if setting) or "none"

    return "; ".join(f"{program}: {knobs(info)}" for program, info in programs.items())


def to_markdown(comparison: dict) -> str:
    """``comparison.md``: the setting (LM, judge, retriever, budget and what each program made of it), then one
    table per dataset — our rows, then the papers' numbers beside them with a note on where each was read."""
    judge = f"; judge: `{comparison['judge']}`" if comparison.get("judge") else ""
    notice = [f"- note: {comparison['notice']}"] if comparison.get("notice") else []
    lines = ["# Comparison", "", f"- LM: `{comparison['lm']}`{judge}", *notice,
             f"- retriever: {describe_retriever(comparison['retriever'])}",
             f"- budget: {budget_text(comparison['budget'])}",
             f"- budget knobs: {knobs_text(comparison['programs'])}", f"- {INTERVALS_TEXT}"]
    students = {name: info["student"] for name, info in comparison["programs"].items() if info.get("student")}
    if students:
        lines.append("- students: " + "; ".join(f"{name}: `{path}`" for name, path in students.items()))
    notes: dict[str, str] = {}  # a paper's source → what it measured, numbered in order of first use
    for dataset, info in comparison["datasets"].items():
        ours, theirs, columns = dataset_table(comparison, dataset)
        note = few_questions_note(info["questions"])
        lines += ["", f"## {dataset} ({info['questions']} questions, `{info['file']}`)", "",
                  *([f"_{note}._", ""] if note else []),
                  "| program | n | " + " | ".join(header for _, header in columns) + " |",
                  "|---|---:|" + "---:|" * len(columns)]
        starts = group_starts(comparison, ours)
        for index, row in enumerate(ours):
            if index in starts:
                lines.append(f"| **{starts[index]}** |" + " |" * (len(columns) + 1))
            lines.append(f"| {row['program']} | {row['questions']} | " + " | ".join(row_cells(row, columns)) + " |")
        for row in theirs:
            notes.setdefault(row["source"], f"{row['program']} with {row['lm']}; {row['setting']}")
            lines.append(f"| {row['program']} — {row['label']} [{list(notes).index(row['source']) + 1}] | – | "
                         + " | ".join(row_cells(row, columns)) + " |")
    if notes:
        lines += ["", "Papers' numbers are theirs, measured in their own setting, not ours:", ""]
        lines += [f"{i}. {source}: {note}" for i, (source, note) in enumerate(notes.items(), 1)]
    return "\n".join(lines + paired_markdown(comparison)) + "\n"


def paired_markdown(comparison: dict) -> list[str]:
    """The lines of the paired tests' section: per dataset, each program minus the reference on the same questions."""
    lines = []
    for dataset in comparison["datasets"]:
        reference, columns, rows = paired_table(comparison, dataset)
        if not rows:
            continue
        lines += ["", f"### {dataset}: each program − {reference}, on the same questions", "",
                  "| program | n | " + " | ".join(header for _, header in columns) + " |",
                  "|---|---:|" + "---:|" * len(columns)]
        lines += [f"| {program} | {n} | " + " | ".join(cells) + " |" for program, n, cells in rows]
    return ["", "## Paired tests", "", PAIRED_TEXT, *lines] if lines else []


def describe_retriever(retriever: dict) -> str:
    first = retriever["first_stage"]
    return (f"{first}" + (f" ({retriever['encoder']})" if first == "dense" else "")
            + " over each dataset's IRCoT corpus, one index shared by every program")


def console_tables(comparison: dict) -> list[Table]:
    """One rich table per dataset: our rows, each interval under its value, then the papers'; then each dataset's
    paired tests."""
    tables = []
    for dataset, info in comparison["datasets"].items():
        ours, theirs, columns = dataset_table(comparison, dataset)
        table = Table(title=f"{dataset}", caption=few_questions_note(info["questions"]))
        table.add_column("program")
        table.add_column("n", justify="right")
        for _, header in columns:
            table.add_column(header, justify="right")
        starts = group_starts(comparison, ours)
        for index, row in enumerate(ours):
            if index in starts:
                table.add_row(f"[bold]{starts[index]}[/bold]", end_section=False)
            table.add_row(row["program"], str(row["questions"]), *(
                console_cell(key, row.get(key), row.get("intervals", {}).get(key)) for key, _ in columns))
        for row in theirs:
            table.add_row(f"[dim]{row['program']} — {row['label']}[/dim]", "–",
                          *(cell(key, row.get(key)) for key, _ in columns))
        tables.append(table)
    paired = (paired_console_table(comparison, dataset) for dataset in comparison["datasets"])
    return tables + [table for table in paired if table is not None]


def console_cell(key: str, value, interval: Sequence[float] | None) -> str:
    """A cell of ours on the console: the value, and below it, dimmed, the interval of a share (in whole points) or of
    a user metric (the files show every interval; the console keeps its many columns narrow)."""
    if value is None or not interval or (key in KNOWN and key not in PERCENT):
        return cell(key, value)
    low, high = (f"{100 * end:.0f}" if key in PERCENT else f"{end:.2f}" for end in interval)
    return f"{cell(key, value)}\n[dim]{low}–{high}[/dim]"


def paired_console_table(comparison: dict, dataset: str) -> Table | None:
    """One dataset's paired tests as a rich table, None where it has none."""
    reference, columns, rows = paired_table(comparison, dataset, sep="\n")
    if not rows:
        return None
    table = Table(title=f"{dataset}: each program − {reference}, on the same questions")
    table.add_column("program")
    table.add_column("n", justify="right")
    for _, header in columns:
        table.add_column(header, justify="right")
    for program, n, cells in rows:
        table.add_row(program, str(n), *cells)
    return table


def write_table(out_dir: str | Path, comparison: dict) -> tuple[Path, Path]:
    """Write ``comparison.json`` and ``comparison.md`` into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    atomic_write_text(out / TABLE_JSON, json.dumps(comparison, indent=2, ensure_ascii=False))
    atomic_write_text(out / TABLE_MARKDOWN, to_markdown(comparison))
    return out / TABLE_JSON, out / TABLE_MARKDOWN
