"""The HTML report of ``multihop compare`` (``report.html``): one self-contained page — no server, no network — with
the setting and budget, the table (ours, each mean with its 95% interval, then the papers' numbers labelled as theirs),
the paired tests of each program against the reference program, the charts embedded as base64 data URIs, and for
every question each program's answer, scores and stage trace (what ``multihop trace show`` prints), so a reader can
see where a method went wrong.

Questions and traces are ``<details>`` elements, closed by default; a link to ``report.html#<question id>`` opens that
question and its traces (a few lines of inline script), and "open all traces" opens every one.
"""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path

from multihop.data.jsonl import read_rows
from multihop.data.paths import atomic_write_text, read_json
from multihop.evaluation.runner import RESULTS, trace_path
from multihop.experiments.tables import (
    INTERVALS_TEXT,
    PAIRED_TEXT,
    TABLE_JSON,
    budget_text,
    cell,
    dataset_table,
    describe_retriever,
    few_questions_note,
    group_starts,
    interval_text,
    knobs_text,
    paired_table,
)
from multihop.runtime.tracing import record_cells

REPORT = "report.html"
TRACE_WIDTH = 240  # characters of a stage's inputs (and of its outputs) shown on its line
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.paper td { color: #666; font-style: italic; }
table.trace td.io { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap;
  word-break: break-all; }
details.question { border-top: 1px solid #ddd; padding: .3em 0; }
details.trace { margin: .2em 0 .2em 1em; }
summary { cursor: pointer; } .badge { display: inline-block; padding: 0 5px; margin-left: 4px; border-radius: 3px;
font-size: 12px; } .good { background: #c8e6c9; } .part { background: #fff3c4; } .bad { background: #ffcdd2; }
.err { background: #ddd; } .error { color: #b00020; } img { max-width: 100%; border: 1px solid #eee; }
.interval { color: #666; font-size: 12px; } p.note { color: #8a5a00; }
"""
SCRIPT = """
function openTarget() {
  var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
  if (!target) return;
  for (var node = target; node; node = node.parentElement) { if (node.tagName === 'DETAILS') node.open = true; }
  target.querySelectorAll('details').forEach(function (d) { d.open = true; });
  target.scrollIntoView();
}
function openAll() { document.querySelectorAll('details').forEach(function (d) { d.open = true; }); }
window.addEventListener('hashchange', openTarget);
openTarget();
"""


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def question_anchor(dataset: str, qid: str) -> str:
    """The element id of a question in the report (``report.html#<it>`` opens it and its traces)."""
    return f"q-{slug(dataset)}-{slug(qid)}"


def write_report(out_dir: str | Path, comparison: dict | None = None) -> Path:
    """Write ``report.html`` into the comparison folder ``out_dir`` from ``comparison`` (default: its
    ``comparison.json``), its charts and its evaluation folders; returns its path."""
    out = Path(out_dir)
    comparison = comparison if comparison is not None else read_json(out / TABLE_JSON)
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>multihop comparison</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>multihop comparison</h1>", setting_section(comparison), table_section(comparison),
             paired_section(comparison), charts_section(out, comparison), questions_section(out, comparison),
             f"<script>{SCRIPT}</script></body></html>"]
    atomic_write_text(out / REPORT, "\n".join(parts))
    return out / REPORT


def setting_section(comparison: dict) -> str:
    items = [f"LM: <code>{escape(str(comparison['lm']))}</code>"
             + (f"; judge: <code>{escape(comparison['judge'])}</code>" if comparison.get("judge") else ""),
             f"retriever: {escape(describe_retriever(comparison['retriever']))}",
             f"budget: {escape(budget_text(comparison['budget']))}",
             f"budget knobs: {escape(knobs_text(comparison['programs']))}"]
    if comparison.get("notice"):
        items.insert(1, f'<strong class="notice">note: {escape(comparison["notice"])}</strong>')
    items += [f"student of {escape(name)}: <code>{escape(str(info['student']))}</code>"
              for name, info in comparison["programs"].items() if info.get("student")]
    return '<section id="setting"><h2>Setting</h2><ul>' + "".join(f"<li>{item}</li>" for item in items) + \
        "</ul></section>"


def table_section(comparison: dict) -> str:
    """One table per dataset: our rows, each mean with its interval, then the papers' (class ``paper``), with where
    each was read."""
    html = ['<section id="table"><h2>Results</h2>', f"<p><small>{escape(INTERVALS_TEXT)}.</small></p>"]
    for dataset, info in comparison["datasets"].items():
        ours, theirs, columns = dataset_table(comparison, dataset)
        html.append(f"<h3>{escape(dataset)} ({info['questions']} questions)</h3>")
        note = few_questions_note(info["questions"])
        if note:
            html.append(f'<p class="note">{escape(note)}.</p>')
        html.append(f'<table class="results" data-dataset="{escape(dataset)}"><tr><th>program</th><th>n</th>'
                    + "".join(f"<th>{escape(header)}</th>" for _, header in columns) + "</tr>")
        starts = group_starts(comparison, ours)
        for index, row in enumerate(ours):
            if index in starts:
                html.append(f'<tr class="group"><th colspan="{len(columns) + 2}">{escape(starts[index])}</th></tr>')
            html.append(f'<tr class="ours"><td>{escape(row["program"])}</td><td class="num">{row["questions"]}</td>'
                        + "".join(f'<td class="num">{ours_cell(key, row)}</td>' for key, _ in columns) + "</tr>")
        for row in theirs:
            label = f"{row['program']} — {row['label']}"
            html.append(f'<tr class="paper" title="{escape(row["source"] + ": " + row["setting"])}">'
                        f"<td>{escape(label)}<br><small>{escape(row['source'])}</small></td><td>–</td>"
                        + "".join(f'<td class="num">{cell(key, row.get(key))}</td>' for key, _ in columns) + "</tr>")
        html.append("</table>")
    if comparison["papers"]:
        html.append("<p><small>Papers' numbers are theirs, measured in their own setting (their LM, questions, "
                    "corpus and retriever: hover a row), not ours.</small></p>")
    return "\n".join(html) + "</section>"


def ours_cell(key: str, row: dict) -> str:
    """A cell of ours: the value, its interval smaller after it."""
    value, interval = row.get(key), row.get("intervals", {}).get(key)
    shown = escape(cell(key, value))
    return shown + (f' <span class="interval">{escape(interval_text(key, interval))}</span>'
                    if value is not None and interval else "")


def paired_section(comparison: dict) -> str:
    """Per dataset, each program minus the reference program on the same questions (class ``paired``); nothing where
    the comparison has no paired tests."""
    html = []
    for dataset in comparison["datasets"]:
        reference, columns, rows = paired_table(comparison, dataset)
        if not rows:
            continue
        html.append(f"<h3>{escape(dataset)}: each program − {escape(reference)}, on the same questions</h3>")
        html.append(f'<table class="paired" data-dataset="{escape(dataset)}"><tr><th>program</th><th>n</th>'
                    + "".join(f"<th>{escape(header)}</th>" for _, header in columns) + "</tr>")
        html += [f"<tr><td>{escape(program)}</td><td class=\"num\">{n}</td>"
                 + "".join(f'<td class="num">{escape(text)}</td>' for text in cells) + "</tr>"
                 for program, n, cells in rows]
        html.append("</table>")
    if not html:
        return ""
    return '<section id="paired"><h2>Paired tests</h2>' + f"<p><small>{escape(PAIRED_TEXT)}</small></p>" + \
        "\n".join(html) + "</section>"


def charts_section(out: Path, comparison: dict) -> str:
    """The charts as PNG data URIs."""
    html = ['<section id="charts"><h2>Charts</h2>']
    for name in comparison.get("charts", []):
        data = base64.b64encode((out / name).read_bytes()).decode("ascii")
        html.append(f'<figure><img src="data:image/png;base64,{data}" alt="{escape(name)}">'
                    f"<figcaption>{escape(name)}</figcaption></figure>")
    return "\n".join(html) + "</section>"


def questions_section(out: Path, comparison: dict) -> str:
    """Every question of every dataset: gold answers, each program's answer and scores, and its stage trace."""
    html = ['<section id="questions"><h2>Questions</h2><button onclick="openAll()">open all traces</button>']
    for dataset, info in comparison["datasets"].items():
        runs = {run["program"]: out / run["folder"] for run in comparison["runs"] if run["dataset"] == dataset}
        rows = {program: read_rows(folder / RESULTS, repair=False) for program, folder in runs.items()}
        html.append(f"<h3>{escape(dataset)}</h3>")
        for qid in info["ids"]:
            answered = {program: found[qid] for program, found in rows.items() if qid in found}
            if answered:
                html.append(question_block(dataset, qid, answered, runs))
    return "\n".join(html) + "</section>"


def question_block(dataset: str, qid: str, answered: dict[str, dict], runs: dict[str, Path]) -> str:
    first = next(iter(answered.values()))
    badges = "".join(badge(program, row) for program, row in answered.items())
    html = [f'<details class="question" id="{question_anchor(dataset, qid)}">',
            f"<summary><b>{escape(qid)}</b>: {escape(first['question'])} {badges}</summary>",
            f"<p>gold: {escape(' | '.join(first['answers']))}</p>",
            '<table class="answers"><tr><th>program</th><th>answer</th><th>EM</th><th>F1</th><th>LLM calls</th>'
            "<th>retrieval steps</th><th>s</th><th>error</th></tr>"]
    for program, row in answered.items():
        metrics, counts = row.get("metrics", {}), row.get("counts", {})
        html.append(f"<tr><td>{escape(program)}</td><td>{escape(row.get('prediction') or '')}</td>"
                    f'<td class="num">{score(metrics.get("em"))}</td><td class="num">{score(metrics.get("f1"))}</td>'
                    f'<td class="num">{counts.get("llm_calls", "")}</td>'
                    f'<td class="num">{counts.get("retrieval_calls", "")}</td>'
                    f'<td class="num">{row.get("seconds", 0):.2f}</td>'
                    f'<td class="error">{escape(row.get("error") or "")}</td></tr>')
    html.append("</table>")
    for program, row in answered.items():
        html.append(trace_block(program, row, runs[program]))
    return "\n".join(html) + "</details>"


def trace_block(program: str, row: dict, folder: Path) -> str:
    """One program's stage trace of one question, as ``multihop trace show`` shows it."""
    path = trace_path(folder, row["id"])
    records = read_json(path) if path.exists() else []
    html = [f'<details class="trace" data-program="{escape(program)}"><summary>{escape(program)} trace: '
            f"{len(records)} stage calls → {escape(repr(row.get('prediction') or ''))}</summary>",
            '<table class="trace"><tr><th>#</th><th>stage</th><th>kind</th><th>lm</th><th>s</th><th>tokens</th>'
            "<th>inputs → outputs</th></tr>"]
    for i, record in enumerate(records, 1):
        cells = record_cells(record, TRACE_WIDTH)
        error = f' <span class="error">{escape(cells["error"])}</span>' if cells["error"] else ""
        html.append(f'<tr><td class="num">{i}</td><td>{escape(cells["stage"])}</td><td>{escape(cells["kind"])}</td>'
                    f'<td>{escape(cells["lm"])}</td><td class="num">{cells["seconds"]}</td>'
                    f'<td class="num">{cells["tokens"]}</td><td class="io">{escape(cells["io"])}{error}</td></tr>')
    if row.get("traceback"):
        html.append(f'<tr><td colspan="7" class="io error">{escape(row["traceback"])}</td></tr>')
    return "\n".join(html) + "</table></details>"


def badge(program: str, row: dict) -> str:
    """A program's F1 on one question, coloured: right, partly right, wrong, or errored."""
    if row.get("error"):
        return f'<span class="badge err">{escape(program)} error</span>'
    f1 = row.get("metrics", {}).get("f1", 0.0)
    kind = "good" if f1 >= 1.0 else "part" if f1 > 0 else "bad"
    return f'<span class="badge {kind}">{escape(program)} {f1:.2f}</span>'


def score(value) -> str:
    return "–" if value is None else f"{value:.2f}"
