"""What the library holds and whom to cite: ``multihop programs`` lists every declared program — the five methods,
then the baselines — with its kind, paper, the stages it runs at its defaults and its switches (``--set NAME=VALUE``)
with their defaults; ``multihop cite`` prints the BibTeX of the papers they rebuild."""

from __future__ import annotations

import json
import logging
from enum import Enum

import typer
from rich.table import Table

from multihop.runtime.console import console


def program_facts(kind: str | None = None) -> list[dict]:
    """One dict per declared program (of ``kind`` when given), in declaration order: name, kind, paper, the methods
    whose papers report it, its stages at its defaults and its switches with their defaults."""
    from multihop.programs import PROGRAMS

    facts = []
    quiet = logging.getLogger("multihop").level
    logging.getLogger("multihop").setLevel(logging.ERROR)  # a program built at its defaults may warn of a missing file
    try:
        for method in PROGRAMS.declared(kind):
            facts.append({
                "name": method.name, "kind": method.kind,
                "paper": method.paper.short() if method.paper else None,
                "title": method.paper.title if method.paper else None,
                "reported_by": PROGRAMS.reported_by(method.name),
                "stages": [name for name, _ in method.program().named_predictors()],
                "switches": method.program.defaults(),
            })
    finally:
        logging.getLogger("multihop").setLevel(quiet)
    return facts


class Kind(str, Enum):
    method = "method"
    baseline = "baseline"


def programs_cmd(
    kind: Kind = typer.Option(None, help="only the five methods, or only the baselines"),
    as_json: bool = typer.Option(False, "--json", help="print the list as JSON"),
):
    """List the programs: the five methods and the baselines their papers report, with each one's paper, stages and
    switches (--set NAME=VALUE on eval, compare, compile)."""
    facts = program_facts(kind.value if kind else None)
    if as_json:
        print(json.dumps(facts, indent=2, default=str))
        return
    table = Table(title="multihop programs", show_lines=True)
    for column in ("program", "kind", "paper", "stages (at its defaults)", "switches (defaults)"):
        table.add_column(column, overflow="fold")
    for fact in facts:
        paper = fact["paper"] or "the papers' own baseline"
        if fact["reported_by"]:
            paper += f"\nreported by {', '.join(fact['reported_by'])}"
        switches = ", ".join(f"{name}={value!r}" for name, value in fact["switches"].items())
        table.add_row(fact["name"], fact["kind"], paper, ", ".join(fact["stages"]), switches)
    console.print(table)


def cite_cmd(program: str = typer.Argument(None, help="a program (see `multihop programs`); default: every paper the "
                                           "programs rebuild")):
    """Print the BibTeX of the paper a program rebuilds (default: of every paper the programs rebuild)."""
    from multihop.programs import PROGRAMS

    if program is None:
        methods = [method for method in PROGRAMS.declared() if method.paper is not None]
    else:
        name = PROGRAMS.named(program)
        if name not in PROGRAMS:
            raise typer.BadParameter(f"unknown program {program!r}; see `multihop programs`", param_hint="PROGRAM")
        methods = [PROGRAMS.declaration(name)]
        if methods[0].paper is None:
            reporters = ", ".join(PROGRAMS.reported_by(name)) or "none"
            raise typer.BadParameter(f"{name} is the papers' own baseline, from no paper of its own; cite the papers "
                                     f"that report it ({reporters}): multihop cite <name>", param_hint="PROGRAM")
    print("\n\n".join(method.paper.bibtex() for method in methods))
