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

from multihop.papers import PaperResult

from .base import PROGRAMS, MultihopProgram
from .students import register_distill_preset

METHODS: dict[str, Method] = {}


@dataclass(frozen=True)
class Method:
    """One method's declaration, registered when it is made.

    Args:
        program: the program class (its name is the method's name everywhere: ``--program``, saved folders).
        papers: the numbers its paper reports (:func:`multihop.papers.reported`), shown beside ours by ``compare``.
        distill_preset: the LoRA settings its paper trains students with (``DistillConfig`` fields), registered as
            the preset named after the method in lower case (``multihop distill --preset cirag``).
        loop_budget: the constructor setting ``compare``'s ``max_iterations`` budget sets (its loop's bound), or None
            when it does not loop.
        cli: the module holding its offline step's Typer app (``app``), added as ``multihop <name in lower case>``;
            the module is imported by the command line only.
        first_stage: the first stage of an index built for it on the fly (a name of
            :data:`multihop.retrievers.CACHED_FIRST_STAGES`).
        compare: whether ``multihop compare`` runs it by default.
    """

    program: type[MultihopProgram]
    papers: tuple[PaperResult, ...] = ()
    distill_preset: dict | None = None
    loop_budget: str | None = None
    cli: str | None = None
    first_stage: str = "dense"
    compare: bool = True
    declared: bool = dataclasses.field(default=True, repr=False)  # False: the defaults of an undeclared program

    def __post_init__(self):
        name = self.name
        if self.loop_budget is not None and self.loop_budget not in self.program.settings():
            raise TypeError(f"{name}'s loop budget {self.loop_budget!r} is none of its settings "
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


def compared_by_default() -> list[str]:
    """The programs ``multihop compare`` runs when none are named, in declaration order."""
    return [name for name, method in METHODS.items() if method.compare]
