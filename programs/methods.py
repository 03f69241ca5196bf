"""The registry of methods: each method's package ends with one :class:`Method` declaration, and every shared place
that lists methods reads it — ``multihop compare``'s default programs and loop budget, the papers' numbers beside
ours, the command line's sub-commands, the distillation presets and the first stage an index is built with for the
program. So a new method is its own files and one import line in ``programs/__init__.py`` (DESIGN.md, "Adding a
method").

A program class without a declaration (a subclass in a notebook, a test's) still runs everywhere a program name is
taken (:data:`~.base.PROGRAMS`); :func:`method_of` gives it the defaults: a dense first stage, no papers' numbers, its
``max_iterations`` (when it has one) as its loop budget, not compared by default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import dspy

from multihop.data.loaders import load_corpus
from multihop.programs.budget import Budget
from multihop.programs.papers import PaperResult
from multihop.retrievers import build_cached, load_retriever

from .base import PROGRAMS, MultihopProgram, takes_retriever
from .students import register_distill_preset

METHODS: dict[str, Method] = {}


@dataclass(frozen=True)
class Method:
    """One method's declaration, registered when it is made.

    Args:
        program: the program class (its name is the method's name everywhere: ``--program``, saved folders).
        papers: the numbers its paper reports (:func:`multihop.programs.papers.reported`), shown beside ours by ``compare``.
        distill_preset: the LoRA settings its paper trains students with (``DistillConfig`` fields), registered as
            the preset named after the method in lower case (``multihop distill --preset cirag``).
        loop_budget: the constructor setting ``compare``'s ``max_iterations`` budget sets (its loop's bound), or None
            when it does not loop.
        cli: the module holding its offline step's Typer app (``app``), added as ``multihop <name in lower case>``;
            the module is imported by the command line only.
        first_stage: the first stage of an index built for it on the fly (a name of
            :data:`multihop.retrievers.CACHED_FIRST_STAGES`).
        compare: whether ``multihop compare`` runs it by default.
        paper_baselines: the programs its paper reports as its baselines (Direct and NativeRAG are ``NoRetrieval`` and
            ``SingleStepRAG``), which its benchmark prints beside it under the same retriever and LM; where its
            baselines need models not here, the nearest program built here, said where it is declared.
        paper_settings: the constructor settings its paper ran it with (k, its loop's cap, ...) where they differ
            from or are not fixed by the shared budget; ``multihop compare --budget paper`` runs it with its defaults
            and these, each commented with where the paper gives it.
    """

    program: type[MultihopProgram]
    papers: tuple[PaperResult, ...] = ()
    distill_preset: dict | None = None
    loop_budget: str | None = None
    cli: str | None = None
    first_stage: str = "dense"
    compare: bool = True
    paper_baselines: tuple[str, ...] = ()
    paper_settings: dict = dataclasses.field(default_factory=dict)
    declared: bool = dataclasses.field(default=True, repr=False)  # False: the defaults of an undeclared program

    def __post_init__(self):
        name = self.name
        if self.loop_budget is not None and self.loop_budget not in self.program.settings():
            raise TypeError(f"{name}'s loop budget {self.loop_budget!r} is none of its settings "
                            f"({', '.join(self.program.settings())})")
        unknown = sorted(set(self.paper_settings) - set(self.program.settings()))
        if unknown:
            raise TypeError(f"{name}'s paper settings {', '.join(unknown)} are none of its settings "
                            f"({', '.join(self.program.settings())})")
        object.__setattr__(self, "papers", tuple(dataclasses.replace(result, program=name) for result in self.papers))
        if not self.declared:
            return
        known = METHODS.get(name)
        if known is not None and known.program is not self.program:
            raise TypeError(f"a method named {name} is declared already ({known.program.__module__})")
        if self.distill_preset is not None:
            register_distill_preset(self.preset, **self.distill_preset)
        METHODS[name] = self

    @property
    def name(self) -> str:
        return self.program.__name__

    @property
    def preset(self) -> str | None:
        """The name of its distillation preset (None without one)."""
        return self.name.lower() if self.distill_preset is not None else None

    @property
    def command(self) -> str:
        """The name of its command-line sub-app."""
        return self.name.lower()


def method_of(name: str) -> Method:
    """The declaration of program ``name``, or the defaults for a program class that declares none; an unknown name
    is a ``KeyError`` listing the programs."""
    if name in METHODS:
        return METHODS[name]
    if name not in PROGRAMS:
        raise KeyError(f"unknown program {name!r}; choose from {', '.join(PROGRAMS)}")
    cls = PROGRAMS[name]
    loop = "max_iterations" if "max_iterations" in cls.settings() else None
    return Method(cls, loop_budget=loop, compare=False, declared=False)


def program_named(name: str) -> str:
    """The registered program ``name`` refers to: itself, or the one whose name it spells with other case and
    punctuation (``Iter-RetGen`` → ``IterRetGen``, ``self-ask`` → ``SelfAsk``, as the papers write them); an unknown
    name is returned as it is, for the caller's own error."""
    if name in PROGRAMS:
        return name
    matches = [known for known in PROGRAMS if _spelling(known) == _spelling(name)]
    return matches[0] if len(matches) == 1 else name


def _spelling(name: str) -> str:
    return "".join(character for character in name.lower() if character.isalnum())


def compared_by_default() -> list[str]:
    """The programs ``multihop compare`` runs when none are named, in declaration order."""
    return [name for name, method in METHODS.items() if method.compare]


def shared_retriever(questions: Path, first_stage: str, encoder: str) -> tuple[dspy.Module, Path]:
    """The retriever every program of a dataset shares, and its index folder (cached under ``MULTIHOP_HOME``): the
    IRCoT corpus of the question file ``questions`` indexed by ``first_stage``, a dense one by ``encoder`` with the
    token states and the query markers of every declared method (whichever are compared, so that comparing one more
    program later finds the same index and extends the same runs)."""
    corpus = load_corpus(questions)
    markers = tuple(dict.fromkeys(token for method in METHODS.values() for token in method.program.special_tokens))
    folder = build_cached(corpus, first_stage, encoder=encoder, token_layers=(), special_tokens=markers)
    return load_retriever(folder), Path(folder)


def budget_knobs(name: str) -> dict[str, str | None]:
    """The constructor setting each budget item sets in program ``name`` (None: it has no such knob): ``k`` when it
    has one, and the loop budget its method declares; ``max_tokens`` is the LM's, so every program's."""
    return {"k": "k" if "k" in PROGRAMS[name].settings() else None, "max_iterations": method_of(name).loop_budget}


def program_under_budget(name: str, retriever: dspy.Module | None, budget: Budget, **switches) -> dspy.Module:
    """Program ``name`` on the shared ``retriever``: with its defaults but the budget's knobs (a shared budget), or
    with its defaults and its paper's settings (``budget.mode == "paper"``); ``switches`` set those of its settings
    it has (``rerank="maxsim", n=50`` reaches only the programs with a reranker)."""
    cls = PROGRAMS[name]
    if budget.mode == "paper":
        values = dict(method_of(name).paper_settings)
    else:
        values = {setting: getattr(budget, item) for item, setting in budget_knobs(name).items() if setting}
    values.update({key: value for key, value in switches.items() if key in cls.settings()})
    return cls(retriever=retriever, **values) if takes_retriever(cls) else cls(**values)
