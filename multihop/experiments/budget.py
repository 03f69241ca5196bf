"""The budget of a comparison: what every program may spend (passages per retrieval, rounds of its loop, tokens per
LM call), shared by all or each program's own paper's, and a program built under it (each budget item set through
the knob the program has, or its paper's own settings)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import dspy

from multihop.programs import PROGRAMS, takes_retriever

BUDGET_ITEMS = {"k": "passages per retrieval", "max_iterations": "iterations at most",
                "max_tokens": "tokens per LM call at most"}


BUDGET_MODES = ("shared", "paper")


@dataclass(frozen=True)
class Budget:
    """What every program of a comparison may spend. ``mode="shared"`` (the default): the same for all, applied
    wherever a program has the knob — ``k`` passages per retrieval, ``max_iterations`` rounds of its loop (a program's
    own name for it: max_steps, max_reflections...); ``mode="paper"``: each program as its own paper ran it (its
    defaults and its method's ``paper_settings``), or, with ``paper`` (a method's name), as that paper ran it (the
    settings of its first row in that paper's declared tables: how DualRAG ran IRCoT), ``k`` and ``max_iterations``
    unused. ``max_tokens`` per LM call applies in all (None: the LM's own cap, which the comparison records)."""

    k: int = 5
    max_iterations: int = 4
    max_tokens: int | None = None
    mode: str = "shared"
    paper: str | None = None

    def __post_init__(self):
        if self.mode not in BUDGET_MODES:
            raise ValueError(f"budget mode must be one of {', '.join(BUDGET_MODES)}, got {self.mode!r}")
        if self.paper is not None and self.mode != "paper":
            raise ValueError("a paper's settings (paper=...) are the paper budget's: give mode='paper' with it")
        for name, value in asdict(self).items():
            if name not in ("mode", "paper") and value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"budget {name} must be a whole number ≥ 1, got {value!r}")

    @classmethod
    def parse(cls, text: str, **items) -> Budget:
        """A budget from its command-line form: ``shared``, ``paper`` or ``paper:METHOD`` (``paper:DualRAG``)."""
        mode, _, paper = text.partition(":")
        return cls(mode=mode, paper=paper or None, **items)

    def as_dict(self) -> dict:
        return {name: value for name, value in asdict(self).items() if name != "paper" or value is not None}


def budget_knobs(name: str) -> dict[str, str | None]:
    """The constructor setting each budget item sets in program ``name`` (None: it has no such knob): ``k`` when it
    has one, and the loop budget its method declares; ``max_tokens`` is the LM's, so every program's."""
    return {"k": "k" if "k" in PROGRAMS[name].settings() else None, "max_iterations":
    PROGRAMS.declaration(name).loop_budget}


def program_under_budget(name: str, retriever: dspy.Module | None, budget: Budget, **switches) -> dspy.Module:
    """Program ``name`` on the shared ``retriever``: with its defaults but the budget's knobs (a shared budget), or
    with its defaults and the settings of a paper (``budget.mode == "paper"``: :func:`paper_settings`); ``switches``
    set those of its settings it has (``rerank="maxsim", n=50`` reaches only the programs with a reranker)."""
    cls = PROGRAMS[name]
    if budget.mode == "paper":
        values = paper_settings(name, budget.paper)
    else:
        values = {setting: getattr(budget, item) for item, setting in budget_knobs(name).items() if setting}
    values.update({key: value for key, value in switches.items() if key in cls.settings()})
    return cls(retriever=retriever, **values) if takes_retriever(cls) else cls(**values)


def paper_settings(name: str, paper: str | None = None) -> dict:
    """The settings program ``name`` runs with under a paper's budget: with ``paper`` (a method's name), those of its
    first row in that paper's declared tables (how that paper ran it: DualRAG's IRCoT at most 5 steps on the top 50
    → reranker → top 10), else, or when that paper has no row of it, its own paper's (its method's
    ``paper_settings``)."""
    if paper is not None:
        method = PROGRAMS.declaration(PROGRAMS.named(paper)) if PROGRAMS.named(paper) in PROGRAMS else None
        if method is None or not method.tables:
            papers = ", ".join(m.name for m in PROGRAMS.declared("method") if m.tables)
            raise ValueError(f"--budget paper:{paper}: no paper of that name declares tables; choose from {papers}")
        rows = [row for table in method.tables for row in table.rows if row.program == name and row.runnable]
        if rows:
            return dict(rows[0].settings)
    return dict(PROGRAMS.declaration(name).paper_settings)
