"""Programs built for a run: the one door to the index a program retrieves from when none is given (built once per
corpus, first stage, encoder and pooling, and found again by every command), the retriever every program of a dataset
shares, and a program under a comparison's budget (each budget item set through the knob the program has, or its
paper's own settings)."""

from __future__ import annotations

from pathlib import Path

import dspy

from multihop.data.loaders import load_corpus
from multihop.retrievers import build_cached, load_retriever

from .base import takes_retriever
from .budget import Budget
from .registry import PROGRAMS


def index_markers(*programs: type) -> tuple[str, ...]:
    """The query markers an index built here keeps whole: those of every declared method, then those of ``programs``
    (a user's class among them) — one set whichever program asks, so that the programs of a corpus share its index."""
    classes = (*(method.program for method in PROGRAMS.declared()), *programs)
    return tuple(dict.fromkeys(token for cls in classes for token in cls.special_tokens))


def cached_index(source: str | Path, first_stage: str, encoder: str, pooling: str = "mean",
                 markers: tuple[str, ...] | None = None, progress: bool = True) -> Path:
    """The folder of the index built for programs (cached under ``MULTIHOP_HOME/indexes``, built on first use): the
    corpus of ``source`` (a corpus file, or a question file's IRCoT corpus) indexed by ``first_stage``; a dense one by
    ``encoder``, pooled by ``pooling``, with the last layer's token states and the query markers ``markers`` (None:
    :func:`index_markers`) kept whole. The first build encodes the corpus once for every pooling (the other one's
    folder is built beside it), with a bar of the passages encoded and the time left on stderr when ``progress``; the
    same request from any command finds the same folder."""
    markers = index_markers() if markers is None else markers
    return Path(build_cached(load_corpus(source), first_stage, encoder=encoder, pooling=pooling, token_layers=(),
                             special_tokens=markers, progress=progress))


def program_index(name: str, source: str | Path, encoder: str, first_stage: str | None = None,
                  progress: bool = True) -> Path:
    """The folder of :func:`cached_index` for program ``name``: with the pooling its class declares (its
    ``index_pooling``), its markers among every declared method's, and its method's declared first stage unless
    ``first_stage`` is given."""
    cls = PROGRAMS[name]
    stage = first_stage or PROGRAMS.declaration(name).first_stage
    return cached_index(source, stage, encoder, cls.index_pooling, index_markers(cls), progress)


def shared_retriever(questions: Path, first_stage: str, encoder: str, pooling: str = "mean",
                     progress: bool = True) -> tuple[dspy.Module, Path]:
    """The retriever the programs of a dataset that ask for ``pooling`` share (a program's ``index_pooling``: those
    asking for another pooling share another), and its index folder: :func:`cached_index` of the question file
    ``questions`` (or a corpus file) with every declared method's markers, so that comparing one more program later
    finds the same index and extends the same runs."""
    folder = cached_index(questions, first_stage, encoder, pooling, progress=progress)
    return load_retriever(folder), folder


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
