"""A reproduced table as text (``multihop reproduce``): the markdown file as the paper prints the table — what ran
beside the paper's setting in its header, every cell ours with its interval beside the paper's number, why rows show
the paper's number alone, the paired tests — and the console's table of the dev sets that ran. Everything here reads
the table's data (:func:`multihop.experiments.reproduce.table_result`), nothing else."""

from __future__ import annotations

from rich.table import Table

from multihop.programs.papers import is_rate

WIDE = 50  # questions a dataset below which a table says its intervals are wide


def shown(rate: bool, value: float | None) -> str:
    """A value as the paper prints it: a rate in percent with one decimal, a count with two."""
    if value is None:
        return "–"
    return f"{100 * value:.1f}" if rate else f"{value:.2f}"


def cell_text(cell: dict) -> str:
    """``ours [low–high] / paper (difference)``, as the paper prints the metric (rates in percent), the interval
    where there is one; ``–`` for a missing side."""
    rate = cell.get("rate", is_rate(cell["metric"]))
    if cell["ours"] is None:
        return f"– / {shown(rate, cell['paper'])}"
    bounds = cell.get("interval")
    mine = shown(rate, cell["ours"]) + (f" [{shown(rate, bounds[0])}–{shown(rate, bounds[1])}]" if bounds else "")
    if cell["difference"] is None:
        return f"{mine} / –"
    return f"{mine} / {shown(rate, cell['paper'])} ({cell['difference'] * (100 if rate else 1):+.1f})"


def retrieval_text(retrieval: dict) -> str:
    """One retrieval setting that ran, in words: first stage, encoder (fine-tuned or stock, checksum; a PLAID first
    stage's checkpoint), pooling."""
    encoder = retrieval["encoder"] or {}
    if retrieval["first_stage"] != "dense":
        by = f" by `{encoder.get('encoder')}` (sha256 {encoder.get('sha256')})" if encoder else ""
        return f"{retrieval['first_stage']} first stage{by} over {retrieval['passages']} passages"
    trained = (f"fine-tuned ({' '.join(retrieval['encoder_switches']) or 'the paper’s training'})"
               if encoder.get("fine_tuned") else "stock, not fine-tuned")
    return (f"dense first stage, encoder `{encoder.get('encoder')}` ({trained}, sha256 {encoder.get('sha256')}), "
            f"{retrieval['pooling']} pooling, over {retrieval['passages']} passages")


def header_lines(reproduced: dict) -> list[str]:
    """The table's header: what ran here, then the paper's setting as the paper's."""
    ran = reproduced["ours"]
    questions = ", ".join(f"{n} {dataset}" for dataset, n in reproduced["datasets"].items()) or "no"
    mapped = "; ".join(f"{paper} → `{mine}`" for paper, mine in ran["lm_for"].items())
    lines = [f"- ours: LM `{reproduced['lm']}`{f' (paper LMs mapped: {mapped})' if mapped else ''}; the first "
             f"{questions} dev questions; judge: {reproduced['judge'] or 'none'}"]
    lines += [f"- ours, retrieval: {retrieval_text(retrieval)}" for retrieval in ran["retrieval"]]
    if ran["settings"]:
        lines.append("- ours, settings of the rows that ran: " + "; ".join(
            f"{key} {' / '.join(values)}" for key, values in ran["settings"].items()))
    lines += [f"- ours, in place of the paper's model: {text}" for text in ran.get("stand_ins", ())]
    for program, student in ran["students"].items():
        lines.append(f"- ours, student of {program}: `{student['student']}`, serving "
                     f"{', '.join(student['stages']) or 'no stage that ran'}")
    lines.append(f"- the paper's: {reproduced['paper_lm'] or 'each row’s own LM'} on its own test sets; its setting: "
                 + "; ".join(f"{key} {value}" for key, value in reproduced["settings"].items()))
    for metric, keys in reproduced["counts"].items():
        lines.append(f"- {metric}: our `{keys[0]}` count" + (f" (else `{'`, `'.join(keys[1:])}`)" if keys[1:] else "")
                     if keys else f"- {metric}: no count of ours is the paper's: its numbers alone")
    for metric, parts in reproduced["derived"].items():
        lines.append(f"- {metric}: the mean of our {' and '.join(parts)}")
    if reproduced["notice"]:
        lines.append(f"- note: {reproduced['notice']}")
    for dataset, why in reproduced["not_run"].items():
        lines.append(f"- {dataset}: not run here: {why}")
    if not reproduced["judge"] and any(metric == "llm_eval" for _, metric in reproduced["columns"]):
        lines.append("- LLM Eval: ours only with a judge (--judge-lm)")
    few = [dataset for dataset, n in reproduced["datasets"].items() if n < WIDE]
    if few:
        lines.append(f"- {', '.join(few)}: fewer than {WIDE} questions, so the intervals are wide: a difference "
                     "inside them says nothing")
    lines.append("- every cell: ours [95 % bootstrap interval over the questions] / the paper's (ours − theirs); "
                 "rates in percent")
    return lines


def paired_lines(reproduced: dict) -> list[str]:
    """The paired tests of every row against the table's method row, one line a row and cell."""
    lines = []
    for row in reproduced["rows"]:
        for cell in row["cells"]:
            test = cell.get("paired")
            if test and test["p_value"] is not None:
                factor = 100 if cell.get("rate", is_rate(cell["metric"])) else 1
                low, high = (factor * bound for bound in test["interval"])
                lines.append(f"| {row['label']} | {cell['dataset']} {cell['metric']} | "
                             f"{factor * test['difference']:+.1f} [{low:+.1f}, {high:+.1f}] | {test['p_value']:.3f} | "
                             f"{test['n']} |")
    if not lines:
        return []
    return ["", f"Paired tests against {reproduced['reference']!r} on the same questions (95 % paired bootstrap "
            "interval of the difference; permutation p-value):", "",
            "| row | column | difference | p | questions |", "|---|---|---:|---:|---:|", *lines]


def shown_label(row: dict, reproduced: dict) -> str:
    """A row's label with its paper LM where that is its own (rows of several LMs in one table)."""
    own = row["paper_lm"] and row["paper_lm"] != reproduced["paper_lm"] and not row["stand_in"]
    return row["label"] + (f" ({row['paper_lm']})" if own and row["paper_lm"] not in row["label"] else "")


def to_markdown(reproduced: dict) -> str:
    """The table as the paper prints it (its rows and columns, then our stand-ins), every cell ours with its interval
    beside the paper's number; under it, why rows show the paper's number alone and the paired tests."""
    columns = [tuple(column) for column in reproduced["columns"]]
    lines = [f"# {reproduced['paper']}, {reproduced['table']}: {reproduced['title']}", "", *header_lines(reproduced),
             "", "| row | " + " | ".join(f"{dataset} {metric}" for dataset, metric in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    notes = []
    for row in reproduced["rows"]:
        label = shown_label(row, reproduced)
        if row["why_not"] or row["shares"]:
            notes.append(f"{row['label']}: {row['why_not'] or 'the same run as row ' + repr(row['shares'])}")
            label += f" [{len(notes)}]"
        lines.append(f"| {label} | " + " | ".join(cell_text(cell) for cell in row["cells"]) + " |")
    if notes:
        lines += ["", "Rows shown with the paper's numbers alone, or sharing a run:", ""]
        lines += [f"{number}. {note}" for number, note in enumerate(notes, 1)]
    lines += paired_lines(reproduced)
    if reproduced["notes"]:
        lines += ["", f"The paper's table: {reproduced['notes']}"]
    return "\n".join(lines) + "\n"


def console_table(reproduced: dict) -> Table:
    """The table on the console: the columns of the dev sets that ran (the markdown file has every column)."""
    shown_columns = [index for index, (dataset, _) in enumerate(reproduced["columns"])
                     if dataset in reproduced["datasets"]]
    left_out = f"; the paper's other columns ({', '.join(reproduced['not_run'])}) are in the .md" \
        if reproduced["not_run"] else ""
    table = Table(title=f"{reproduced['paper']} {reproduced['table']}: ours [95 % interval] / paper (difference), "
                        f"ours on `{reproduced['lm']}`{left_out}")
    table.add_column("row")
    for index in shown_columns:
        dataset, metric = reproduced["columns"][index]
        table.add_column(f"{dataset} {metric}", justify="right")
    for row in reproduced["rows"]:
        label = shown_label(row, reproduced) if row["runs_here"] else \
            f"[dim]{shown_label(row, reproduced)} (paper only)[/dim]"
        table.add_row(label, *(cell_text(row["cells"][index]) for index in shown_columns))
    return table
