"""Programs built for a run: the retriever every program of a dataset shares, and a program under a comparison's
budget (each budget item set through the knob the program has, or its paper's own settings)."""

from __future__ import annotations

from pathlib import Path

import dspy

from multihop.data.loaders import load_corpus
from multihop.retrievers import build_cached, load_retriever

from .base import takes_retriever
from .budget import Budget
from .registry import PROGRAMS


def shared_retriever(questions: Path, first_stage: str, encoder: str) -> tuple[dspy.Module, Path]:
    """The retriever every program of a dataset shares, and its index folder (cached under ``MULTIHOP_HOME``): the
    IRCoT corpus of the question file ``questions`` indexed by ``first_stage``, a dense one by ``encoder`` with the
    token states and the query markers of every declared method (whichever are compared, so that comparing one more
    program later finds the same index and extends the same runs)."""
    corpus = load_corpus(questions)
    markers = tuple(dict.fromkeys(token for method in PROGRAMS.declared() for token in method.program.special_tokens))
    folder = build_cached(corpus, first_stage, encoder=encoder, token_layers=(), special_tokens=markers)
    return load_retriever(folder), Path(folder)


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
