"""The charts of ``multihop compare``, PNG files saved beside its table: F1 against LLM calls per question and against
seconds per question (one point per program and dataset: the cost/quality frontier), and recall@2/@5 per program.

Drawn on matplotlib's ``Figure`` with no pyplot state, so charts can be made from any thread and no display is needed.
matplotlib comes with the ``report`` extra (``pip install 'multihop[report]'``); without it the tables and the report
are written and the charts are not, said once in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

CHART_FILES = {"f1_vs_llm_calls": "f1_vs_llm_calls.png", "f1_vs_seconds": "f1_vs_seconds.png",
               "recall": "recall_at_k.png"}
MARKERS = "osD^vP*X"


def write_charts(out_dir: str | Path, rows: Sequence[dict]) -> list[Path]:
    """Draw the three charts of our ``rows`` (:func:`multihop.experiments.tables.summary_row`) into ``out_dir``; rows
    with no question are left out. Returns the files, in :data:`CHART_FILES` order; none without matplotlib."""
    if find_spec("matplotlib") is None:
        logger.warning("no charts: matplotlib is not installed (pip install 'multihop[report]')")
        return []
    out = Path(out_dir)
    rows = [row for row in rows if row.get("questions")]
    programs = list(dict.fromkeys(row["program"] for row in rows))
    datasets = list(dict.fromkeys(row["dataset"] for row in rows))
    paths = [out / CHART_FILES["f1_vs_llm_calls"], out / CHART_FILES["f1_vs_seconds"], out / CHART_FILES["recall"]]
    frontier(rows, programs, datasets, "llm_calls", "LLM calls per question").savefig(paths[0], dpi=110)
    frontier(rows, programs, datasets, "seconds", "seconds per question").savefig(paths[1], dpi=110)
    recall_bars(rows, programs, datasets).savefig(paths[2], dpi=110)
    return paths


def frontier(rows: Sequence[dict], programs: list[str], datasets: list[str], cost: str, label: str) -> Figure:
    """F1 (%) against ``cost`` per question: a colour per program, a marker per dataset; a log axis when the costs
    span ten times or more."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 5), layout="constrained")
    axes = figure.add_subplot()
    colours = figure_colours(len(programs))
    for row in rows:
        x, f1 = row.get(cost), row.get("f1")
        if x is None or f1 is None:
            continue
        axes.scatter(x, 100 * f1, color=colours[programs.index(row["program"])],
                     marker=MARKERS[datasets.index(row["dataset"]) % len(MARKERS)], s=60)
        axes.annotate(row["program"], (x, 100 * f1), textcoords="offset points", xytext=(5, 4), fontsize=7)
    costs = [row[cost] for row in rows if row.get(cost)]
    if costs and min(costs) > 0 and max(costs) >= 10 * min(costs):
        axes.set_xscale("log")
    for i, program in enumerate(programs):
        axes.scatter([], [], color=colours[i], marker="o", label=program)
    for j, dataset in enumerate(datasets):
        axes.scatter([], [], color="grey", marker=MARKERS[j % len(MARKERS)], label=dataset)
    axes.set_xlabel(label)
    axes.set_ylabel("F1 (%)")
    axes.set_title(f"F1 vs {label}")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="best")
    return figure


def recall_bars(rows: Sequence[dict], programs: list[str], datasets: list[str]) -> Figure:
    """Recall@2 and @5 (%) over the passages each program used, one panel per dataset; a program that never
    retrieved has no bar."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(max(6.0, 3.2 * len(datasets)), 4.5), layout="constrained")
    panels = figure.subplots(1, max(1, len(datasets)), squeeze=False)[0]
    for axes, dataset in zip(panels, datasets or ["(no data)"], strict=False):
        shown = [row for row in rows if row["dataset"] == dataset and row.get("recall@5") is not None]
        names = [row["program"] for row in shown]
        positions = range(len(shown))
        axes.bar([p - 0.2 for p in positions], [100 * (row.get("recall@2") or 0) for row in shown], width=0.4,
                 label="R@2")
        axes.bar([p + 0.2 for p in positions], [100 * row["recall@5"] for row in shown], width=0.4, label="R@5")
        axes.set_xticks(list(positions), names, rotation=30, ha="right", fontsize=8)
        axes.set_ylim(0, 100)
        axes.set_title(dataset)
        axes.set_ylabel("recall (%)")
        if not shown:
            axes.text(0.5, 0.5, "no program retrieved", ha="center", va="center", transform=axes.transAxes)
        else:
            axes.legend(fontsize=7)
    figure.suptitle("Recall@k over the passages each program used")
    return figure


def figure_colours(n: int) -> list:
    """``n`` distinct colours (matplotlib's tab10, then tab20)."""
    from matplotlib import colormaps

    palette = colormaps["tab10" if n <= 10 else "tab20"]
    return [palette(i) for i in range(n)]
