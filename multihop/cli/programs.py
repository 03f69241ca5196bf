"""A program from command-line options: its registry name, ``--set`` switches and, when it retrieves, an index (a
saved folder, or one built once from a corpus or the questions' own paragraphs); and the retriever a run serves as
``dspy.settings.rm`` (:func:`run_retriever`), so ``dspy.Retrieve`` searches it in any module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

from multihop.cli.shared_options import SET_OPT
from multihop.lm.options import option_group
from multihop.runtime.console import console


@dataclass(frozen=True)
class ProgramOptions:
    """The program a command runs: its registry name and ``--set`` switches, and the index it retrieves from (a saved
    folder, else one built from ``corpus`` or the questions)."""

    program: str = "SingleStepRAG"
    corpus: str | None = None
    retriever: str | None = None
    k: int | None = None
    encoder: str = "mpnet"
    settings: list[str] | None = None

    def build(self, questions: Path):
        """``(program, retriever folder or None)``; the index is built from ``questions`` when none is given."""
        return build_program(self.program, self.retriever, self.corpus, str(questions), self.k, self.encoder,
                             self.settings)

    def build_unindexed(self):
        """The program with no retriever (its stages only: gold rows need no search)."""
        return build_program(self.program, None, None, None, self.k, self.encoder, self.settings, index=False)[0]


def program_options() -> Callable:
    """Give a command the program options: ``--program``, ``--set``, ``--retriever``, ``--corpus``, ``--k`` and
    ``--encoder``. The command declares one parameter ``spec`` and receives them in it as :class:`ProgramOptions`."""
    return option_group("spec", {
        "program": (str, typer.Option("SingleStepRAG", "--program", help="the program: a name, or a program of your "
                                      "own as package.module:ClassName (a MultihopProgram or a dspy.Module "
                                      "importable from the current folder)")),
        "corpus": (str | None, typer.Option(None, "--corpus", help="corpus file (default: the paragraphs of every "
                                            "question of the file, whatever --limit, IRCoT style)")),
        "retriever": (str | None, typer.Option(None, "--retriever", help="a saved retriever folder (overrides "
                                               "--corpus); also dspy.settings.rm, which dspy.Retrieve searches in a "
                                               "module of your own")),
        "k": (int | None, typer.Option(None, "--k", min=1, help="passages retrieved per query (default: the "
                                       "program's own)")),
        "encoder": (str, typer.Option("mpnet", "--encoder", help="encoder of an index built on the fly")),
        "settings": (list[str] | None, SET_OPT),
    }, ProgramOptions)


def build_program(name: str, retriever_dir: str | None, corpus: str | None, data: str | None, k: int | None,
                  encoder: str, settings: list[str] | None = None, index: bool = True):
    """``(program, retriever folder or None)``; ``index=False`` builds a retrieving program without its index."""
    from multihop.programs import PROGRAMS, takes_retriever
    from multihop.programs.switches import SwitchTypeError, parse_settings

    try:
        name = PROGRAMS.named(name)  # a user's package.module:ClassName is imported here
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--program") from None
    if name not in PROGRAMS:
        raise typer.BadParameter(f"unknown program {name!r}; choose from {', '.join(PROGRAMS)}")
    cls = PROGRAMS[name]
    switches = parse_settings(settings or [])
    try:
        switches = cls.typed_settings(switches)
    except SwitchTypeError as exc:
        value = next((pair for pair in settings if pair.partition("=")[0] == exc.switch), exc.switch)
        raise typer.BadParameter(f"{value}: {exc}", param_hint="--set") from exc
    except TypeError as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from exc
    if "k" in switches:
        raise typer.BadParameter("the passages retrieved per query are set with --k", param_hint="--set")
    unknown = sorted(set(switches) - set(cls.settings()))
    if unknown:
        raise typer.BadParameter(f"{name} has no switch {', '.join(unknown)}; its switches: "
                                 f"{', '.join(s for s in cls.settings() if s != 'k') or 'none'}", param_hint="--set")
    if not takes_retriever(cls):  # a module of its own (dspy.Retrieve) searches the index given, as dspy.settings.rm
        try:
            program = cls(**switches)
        except (TypeError, ValueError) as exc:
            raise typer.BadParameter(f"{name}: {exc}", param_hint="--set") from exc
        given = retriever_folder(retriever_dir, corpus, None, encoder, name) if index and (retriever_dir or corpus) \
            else None
        return program, str(given) if given else None
    retriever_path = retriever_folder(retriever_dir, corpus, data, encoder, name) if index else None
    from multihop.retrievers import load_retriever

    try:
        retriever = load_retriever(retriever_path) if retriever_path else None
        sized = {"k": k} if k is not None else {}
        return cls(retriever=retriever, **sized, **switches), str(retriever_path) if retriever_path else None
    except (TypeError, ValueError) as exc:
        raise typer.BadParameter(f"{name}: {exc}") from exc


def run_retriever(program, folder: str | Path | None):
    """The retriever a run of ``program`` serves as ``dspy.settings.rm`` (what ``dspy.Retrieve`` searches in any
    module, and a multihop program given no retriever): the program's own, else the one saved in ``folder`` (an
    ``--retriever`` or ``--corpus`` index, or the one a compiled folder names); None when there is neither."""
    own = getattr(program, "retriever", None)
    if own is not None:
        return own
    if not folder:
        return None
    from multihop.retrievers import load_retriever

    return load_retriever(folder)


def retriever_folder(retriever_dir: str | None, corpus: str | None, data: str | None, encoder: str,
                     program: str) -> Path:
    """An index folder: the one given, or the one built for ``program`` (once, then cached:
    :func:`multihop.experiments.program_indexes.program_index`, the index ``compare`` and ``reproduce`` use for it
    too) from --corpus or the questions (a question file's paragraphs form the IRCoT corpus)."""
    if retriever_dir:
        return Path(retriever_dir)
    from multihop.experiments.program_indexes import program_index

    source = corpus or data
    if source is None:
        raise typer.BadParameter("give --retriever DIR, --corpus FILE or --data FILE to build an index from")
    folder = program_index(program, source, encoder)
    console.print(f"index {folder} (built once, then cached)")
    return folder
