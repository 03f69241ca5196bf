"""The registry of programs: every :class:`~.base.MultihopProgram` subclass by its name (which class), and each declared
program's :class:`Declaration` (its kind, paper, tables, ...). Each method's and baseline's package ends with one
``Declaration(...)``, and every shared place that lists programs reads :data:`PROGRAMS` — ``multihop programs``,
``multihop compare``'s default programs, grouping and loop budget, the papers' numbers beside ours, the command line's
sub-commands, the distillation presets and the first stage an index is built with for the program. So a new method is
its own files and one import line in ``programs/__init__.py`` (docs/design.md, "Adding a method").

A program class without a declaration (a subclass in a notebook, a test's) still runs everywhere a program name is
taken; :meth:`ProgramRegistry.declaration` gives it the defaults: kind ``custom``, a dense first stage, no papers'
numbers, its ``max_iterations`` (when it has one) as its loop budget, not compared by default.

A user's own program is taken by its import path, ``package.module:ClassName`` (:meth:`ProgramRegistry.imported`,
and :meth:`ProgramRegistry.named` for every command's ``--program``): the module is imported with the current folder
on ``sys.path``; a :class:`~.base.MultihopProgram` subclass registers itself as it is defined, and a plain
``dspy.Module`` is registered as a ``MultihopProgram`` of its own name, ``__init__`` and ``forward``. Run manifests
and saved folders record the path (:func:`import_path`), so a saved user's program is imported again on load.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import dspy

from .base import PROGRAM_CLASSES, MultihopProgram, add_program_class, qualified_name
from .distill_presets import DISTILL_PRESETS, register_distill_preset
from .papers import Paper, PaperResult, PaperTable

KINDS = ("method", "baseline", "custom")  # the five papers' methods, the baselines they report, a user's own


@dataclass(frozen=True)
class Declaration:
    """One program's declaration, registered when it is made.

    Args:
        program: the program class (its name is the program's name everywhere: ``--program``, saved folders).
        kind: ``"method"`` for the five papers' methods, ``"baseline"`` for the programs their papers compare
            against (which papers report a baseline is read from the methods' ``paper_baselines``:
            :meth:`ProgramRegistry.reported_by`).
        paper: the paper the program rebuilds (None for the papers' own generic baselines, Direct and NativeRAG).
        papers: the numbers its paper reports (:func:`multihop.programs.papers.reported`), shown beside ours by
            ``compare``.
        distill_preset: the LoRA settings its paper trains students with (``DistillConfig`` fields), registered as
            the preset named after the program in lower case (``multihop distill --preset cirag``).
        loop_budget: the constructor setting ``compare``'s ``max_iterations`` budget sets (its loop's bound), or None
            when it does not loop.
        cli: the module holding its offline step's Typer app (``app``), added as ``multihop <name in lower case>``;
            the module is imported by the command line only.
        first_stage: the first stage of an index built for it on the fly (a name of
            :data:`multihop.retrievers.CACHED_FIRST_STAGES`).
        compare: whether ``multihop compare`` runs it by default.
        paper_baselines: the programs its paper reports as its baselines (Direct and NativeRAG are ``NoRetrieval`` and
            ``SingleStepRAG``); where its baselines need models not here, the nearest program built here, said where
            it is declared.
        paper_settings: the constructor settings its paper ran it with (k, its loop's cap, ...) where they differ
            from or are not fixed by the shared budget; ``multihop compare --budget paper`` runs it with its defaults
            and these, each commented with where the paper gives it.
        tables: its paper's results tables as data (:class:`~.papers.PaperTable`, declared in its package's
            ``tables.py``): each row the program (or a baseline) that runs it, its settings and the paper's numbers.
            A row may name a baseline declared after the method, so its program and settings are checked by the
            tests (``tests/programs/test_papers.py``), not here.
    """

    program: type
    kind: str = "method"
    paper: Paper | None = None
    papers: tuple[PaperResult, ...] = ()
    distill_preset: dict | None = None
    loop_budget: str | None = None
    cli: str | None = None
    first_stage: str = "dense"
    compare: bool = True
    paper_baselines: tuple[str, ...] = ()
    paper_settings: dict = dataclasses.field(default_factory=dict)
    tables: tuple[PaperTable, ...] = ()
    declared: bool = dataclasses.field(default=True, repr=False)  # False: the defaults of an undeclared program

    def __post_init__(self):
        name = self.name
        if self.kind not in KINDS[:2 if self.declared else 3]:
            raise TypeError(f"{name}'s kind must be method or baseline, not {self.kind!r}")
        if self.loop_budget is not None and self.loop_budget not in self.program.settings():
            raise TypeError(f"{name}'s loop budget {self.loop_budget!r} is none of its settings "
                            f"({', '.join(self.program.settings())})")
        unknown = sorted(set(self.paper_settings) - set(self.program.settings()))
        if unknown:
            raise TypeError(f"{name}'s paper settings {', '.join(unknown)} are none of its settings "
                            f"({', '.join(self.program.settings())})")
        object.__setattr__(self, "papers", tuple(dataclasses.replace(result, program=name) for result in self.papers))
        if self.declared:
            PROGRAMS.declare(self)

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


class ProgramRegistry(Mapping):
    """Every registered program class by name (a read-only mapping: ``PROGRAMS["CoopRAG"]`` is the class), and the
    declarations of those that declare themselves (:meth:`declaration`, :meth:`declared`)."""

    def __init__(self):
        self._classes = PROGRAM_CLASSES  # filled as each MultihopProgram subclass is defined (programs/base.py)
        self._declarations: dict[str, Declaration] = {}
        self._imported: dict[str, type] = {}  # an import path → its program class

    def __getitem__(self, name: str) -> type:
        return self._classes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)

    def declare(self, declaration: Declaration) -> None:
        """Register a program's declaration (and its distillation preset); a second class of the name is refused."""
        known = self._declarations.get(declaration.name)
        if known is not None and known.program is not declaration.program:
            raise TypeError(f"a program named {declaration.name} is declared already ({known.program.__module__})")
        add_program_class(declaration.program)
        if declaration.distill_preset is not None:
            register_distill_preset(declaration.preset, **declaration.distill_preset)
        self._declarations[declaration.name] = declaration

    def remove(self, name: str) -> None:
        """Forget program ``name``, its declaration and its distillation preset (a notebook's or a test's)."""
        declaration = self._declarations.pop(name, None)
        self._classes.pop(name, None)
        if declaration is not None and declaration.preset is not None:
            DISTILL_PRESETS.pop(declaration.preset, None)

    def declaration(self, name: str) -> Declaration:
        """The declaration of program ``name``, or the defaults for a program class that declares none; an unknown
        name is a ``KeyError`` listing the programs."""
        if name in self._declarations:
            return self._declarations[name]
        if name not in self._classes:
            raise KeyError(f"unknown program {name!r}; choose from {', '.join(self._classes)}")
        cls = self._classes[name]
        loop = "max_iterations" if "max_iterations" in cls.settings() else None
        return Declaration(cls, kind="custom", loop_budget=loop, compare=False, declared=False)

    def declared(self, kind: str | None = None) -> list[Declaration]:
        """The declarations in declaration order (the methods in their papers' order, then the baselines), of one
        ``kind`` when given."""
        return [declaration for declaration in self._declarations.values() if kind is None or declaration.kind == kind]

    def reported_by(self, name: str) -> list[str]:
        """The methods whose papers report program ``name`` as a baseline."""
        return [method.name for method in self.declared("method") if name in method.paper_baselines]

    def named(self, name: str) -> str:
        """The registered program ``name`` refers to: itself, or the one whose name it spells with other case and
        punctuation (``Iter-RetGen`` → ``IterRetGen``, ``self-ask`` → ``SelfAsk``, as the papers write them); an
        unknown name is returned as it is, for the caller's own error; an import path ``package.module:ClassName``
        is imported (:meth:`imported`) and its program's name returned."""
        if ":" in name:
            return self.imported(name).__name__
        if name in self._classes:
            return name
        matches = [known for known in self._classes if _spelling(known) == _spelling(name)]
        return matches[0] if len(matches) == 1 else name

    def imported(self, path: str) -> type:
        """The program class of import path ``package.module:ClassName``, imported with the current folder on
        ``sys.path`` and registered: a ``MultihopProgram`` subclass as it is, a plain ``dspy.Module`` as a
        ``MultihopProgram`` of the same name (its own ``__init__`` and ``forward``, traced and saved as every program
        is); a path that names no such class is a one-line ``ValueError``."""
        if path in self._imported:
            return self._imported[path]
        module_name, _, class_name = path.partition(":")
        if not module_name or not class_name:
            raise ValueError(f"program {path!r}: give a program name or package.module:ClassName")
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            found = getattr(importlib.import_module(module_name), class_name)
        except ImportError as exc:
            raise ValueError(f"program {path!r}: cannot import {module_name} ({exc})") from None
        except AttributeError:
            raise ValueError(f"program {path!r}: {module_name} has no {class_name}") from None
        except TypeError as exc:  # a MultihopProgram subclass whose name another program has
            raise ValueError(f"program {path!r}: {exc}") from None
        if not (isinstance(found, type) and issubclass(found, dspy.Module)):
            raise ValueError(f"program {path!r} is no dspy.Module subclass")
        if issubclass(found, MultihopProgram):
            cls = found
            if self._classes.get(cls.__name__) is not cls:
                add_program_class(cls)
        else:
            known = self._classes.get(found.__name__)
            if known is not None and getattr(known, "__wrapped_module__", None) is found:
                cls = known
            else:
                if known is not None:
                    raise ValueError(f"program {path!r}: a program named {found.__name__} is registered already "
                                     f"({qualified_name(known)}); rename the class")
                # registered as it is defined (MultihopProgram.__init_subclass__)
                cls = type(found)(found.__name__, (found, MultihopProgram), {
                    "__module__": found.__module__, "__qualname__": found.__qualname__, "__doc__": found.__doc__,
                    "__wrapped_module__": found})
        cls._import_path = f"{module_name}:{class_name}"
        self._imported[path] = cls
        return cls

    def compared_by_default(self) -> list[str]:
        """The programs ``multihop compare`` runs when none are named, in declaration order."""
        return [declaration.name for declaration in self.declared() if declaration.compare]


def _spelling(name: str) -> str:
    return "".join(character for character in name.lower() if character.isalnum())


def import_path(cls: type) -> str | None:
    """The import path ``package.module:ClassName`` a program class is found by outside multihop: the one it was
    imported by (:meth:`ProgramRegistry.imported`), else its module's and name when it can be imported again (not
    multihop's own, a ``__main__`` script's or a function's local class); None for those."""
    given = cls.__dict__.get("_import_path")
    if given:
        return given
    module = cls.__module__
    if module == "__main__" or module.split(".")[0] == "multihop" or "<locals>" in cls.__qualname__:
        return None
    return f"{module}:{cls.__qualname__}"


PROGRAMS = ProgramRegistry()
