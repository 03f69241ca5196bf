"""``multihop trace show`` and the stage-trace table that ``multihop ask`` prints too."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from multihop.runtime.console import console

trace_app = typer.Typer(help="Per-stage traces saved by an evaluation.", no_args_is_help=True)


def print_trace(records: list[dict]) -> None:
    from multihop.runtime.tracing import record_cells

    table = Table("#", "stage", "kind", "lm", "s", "tokens", "inputs → outputs")
    for i, record in enumerate(records, 1):
        cells = record_cells(record)
        table.add_row(str(i), cells["stage"], cells["kind"], cells["lm"], cells["seconds"], cells["tokens"],
                      cells["io"] + (f" [red]{cells['error']}[/red]" if cells["error"] else ""))
    console.print(table)


@trace_app.command("show")
def trace_show(out: Path = typer.Argument(..., exists=True, file_okay=False, help="an evaluation output folder"),
               id: str = typer.Option(None, "--id", help="question id (default: list the questions)")):
    """Show the stage trace of one evaluated question, or list the questions of a run."""
    from multihop.data.jsonl import read_rows
    from multihop.data.paths import read_json
    from multihop.evaluation.runner import RESULTS, trace_path

    if not (out / RESULTS).is_file():
        raise typer.BadParameter(f"{out} holds no evaluation ({RESULTS}): give the --out folder of `multihop eval`, "
                                 "or a <dataset>/<program> folder of `multihop compare`", param_hint="OUT")
    rows = read_rows(out / RESULTS, repair=False)  # a run may be appending to it
    if id is None:
        table = Table("id", "prediction", "answers", "F1", "LLM calls", "error")
        for row in rows.values():
            table.add_row(row["id"], row["prediction"], " | ".join(row["answers"][:2]),
                          f"{row['metrics'].get('f1', 0):.2f}", str(row["counts"].get("llm_calls", "")),
                          row.get("error") or "")
        console.print(table)
        return
    path = trace_path(out, id)
    if not path.exists():
        raise typer.BadParameter(f"no trace for {id!r} in {out}")
    print_trace(read_json(path))
    if id in rows:
        console.print(f"[bold]prediction:[/bold] {rows[id]['prediction']!r}  gold: {rows[id]['answers']}")
