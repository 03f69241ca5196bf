"""What a method's command-line sub-app (its package's ``cli`` module, declared with ``Declaration(cli=...)`` and
mounted as ``multihop <method>``) takes from outside its package.

The sub-app lies in its method's package, in the programs layer: under the layers that index a corpus for a program
(experiments) and write trajectory and gold rows (optimize), and under the command line that mounts it. So a command
says what it needs of them, and the command line gives it when it mounts the app
(:func:`multihop.cli.app.method_apps`):

- a parameter annotated :class:`CommandKit` (no option: the command line fills it) receives those higher layers'
  steps, the same functions the shared commands call;
- :func:`takes_config` asks for ``--config FILE``, the configuration the command resolved written into its ``out``
  folder, as the shared commands that write a folder have it (:func:`multihop.cli.config.configurable`);
- a :class:`SharedOption` default stands for an option the shared commands declare (``--set``, ``--markers``): the
  command line puts its declaration there, so one option reads the same everywhere and is declared once, in the
  command line, which starts without importing the programs.

The rest a command needs lies in the layers below it, next to its concept: the LM options
(:func:`multihop.lm.options.lm_options`), the question files (:func:`multihop.data.question_sets.question_path`),
the values of ``--set`` (:func:`multihop.programs.switches.parse_settings`), the console
(:mod:`multihop.runtime.console`); and here, the special tokens of ``--markers PROGRAM``
(:func:`program_special_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

CONFIG_REQUEST = "takes_config"  # the attribute :func:`takes_config` sets on a command: configurable()'s arguments


@dataclass(frozen=True)
class CommandKit:
    """The steps of the layers above programs that a method's command runs, given by the command line.

    Attributes:
        retriever_folder: ``(retriever_dir, corpus, data, encoder, program) -> Path``: the index folder given, else
            the program's own index built once from ``corpus`` or the question file ``data`` and cached (the one
            ``eval``, ``compare`` and ``reproduce`` use: :func:`multihop.experiments.program_indexes.program_index`);
            the console says which folder.
        gold_trajectories: the stage rows derived from a train file's annotations, written as a trajectory folder
            (:func:`multihop.optimize.gold_targets.gold_trajectories`).
        read_collection: a trajectory folder's rows by stage and its manifest
            (:func:`multihop.optimize.trajectories.read_collection`).
        render_call: one stage call as a training row in an adapter's format
            (:func:`multihop.optimize.trajectories.render_call`).
        write_trajectories: a trajectory folder written whole
            (:func:`multihop.optimize.trajectories.write_trajectories`).
        refuse_held_apart: ``(examples, held_apart)``: a ``ValueError`` when a question is among the ids held apart for
            measuring (:func:`multihop.optimize.trajectories.refuse_held_apart`).
    """

    retriever_folder: Callable[[str | None, str | None, str | None, str, str], Path]
    gold_trajectories: Callable[..., dict]
    read_collection: Callable[[str | Path], tuple[dict[str, list[dict]], dict]]
    render_call: Callable[..., dict]
    write_trajectories: Callable[[Path, dict[str, list[dict]], dict], dict]
    refuse_held_apart: Callable[..., None]


def takes_config(out: str = "out", after: bool = False) -> Callable:
    """Ask the command line for ``--config FILE`` on this command: the file's keys become the options' defaults, and
    the configuration the command resolved is written into its folder (the parameter ``out``) before it runs, or
    ``after`` it succeeded (:func:`multihop.cli.config.configurable`, applied when the method's app is mounted)."""

    def request(command: Callable) -> Callable:
        setattr(command, CONFIG_REQUEST, {"out": out, "after": after})
        return command

    return request


@dataclass(frozen=True)
class SharedOption:
    """The default of a method command's parameter that takes a shared command's option, by its flag
    (``settings: list[str] = SharedOption("--set")``): the command line replaces it with that option's declaration
    (its help and default) when it mounts the app."""

    flag: str


def program_special_tokens(program: str | None) -> tuple[str, ...]:
    """The special tokens of ``--markers PROGRAM``: the markers that program writes into its queries (none without);
    a program that writes none is a ``typer.BadParameter`` naming those that do."""
    if program is None:
        return ()
    from multihop.programs import PROGRAMS

    marking = {name: cls for name, cls in PROGRAMS.items() if cls.special_tokens}
    if program not in marking:
        raise typer.BadParameter(f"{program!r} writes no query markers; programs that do: {', '.join(marking)}",
                                 param_hint="--markers")
    return marking[program].special_tokens

