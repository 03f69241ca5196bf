"""The ``multihop`` app: ``--verbose``, the command groups and the commands, each defined in the module of its job
(resources, training, runs, traces, demo), and each method's own commands (``multihop cooprag train``, ``multihop cirag
extract``, ...), the Typer app its declaration names (``Declaration(cli=...)``), found in the registry when the command
line asks for it and mounted with what its commands ask of the command line (:mod:`multihop.programs.command_kit`: a
:class:`~multihop.programs.command_kit.CommandKit` parameter filled, ``--config`` where a command takes it)."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

import click
import typer
from typer.core import TyperGroup

from multihop.cli import choices, demo, estimate, listing, resources, runs, serving, traces, training
from multihop.cli.config import configurable

if TYPE_CHECKING:  # the programs load when a method's command is asked for
    from multihop.programs.command_kit import CommandKit


class MethodCommands(TyperGroup):
    """The app's commands, and each declared method's sub-app under its name in lower case. The registry (which
    imports every program) is read only when a name is not one of the app's own commands or the commands are listed,
    so ``multihop eval ...`` starts without it."""

    def invoke(self, ctx):
        self._arguments = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # the sub-command's, before it runs
        return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *sorted(method_apps())]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if name == "distill":
            training.describe_presets(command)
        if command is not None and choices.wanted(getattr(self, "_arguments", [])):
            choices.describe_choices(command)
        if command is None and name in method_apps():
            command = typer.main.get_group(method_apps()[name])  # a group even when the app has one command
            command.name = name
        return command


def method_apps() -> dict[str, typer.Typer]:
    """The Typer app of every declared method that has one, by its command name."""
    from multihop.programs import PROGRAMS

    return {method.command: mounted(import_module(method.cli).app) for method in PROGRAMS.declared() if method.cli}


def mounted(app: typer.Typer) -> typer.Typer:
    """A method's ``app`` with what its commands ask of the command line (:func:`provided`), once per app."""
    if not getattr(app, "_mounted", False):
        for info in app.registered_commands:
            info.callback = provided(info.callback)
        for group in app.registered_groups:
            mounted(group.typer_instance)
        app._mounted = True
    return app


def provided(command: Callable) -> Callable:
    """``command`` given what it declares (:mod:`multihop.programs.command_kit`): its parameters annotated
    :class:`~multihop.programs.command_kit.CommandKit` receive :func:`method_kit` (and are no options), those whose
    default is a :class:`~multihop.programs.command_kit.SharedOption` take that shared option
    (:data:`multihop.cli.shared_options.SHARED_OPTIONS`), and ``--config`` where it asked for it with
    :func:`~multihop.programs.command_kit.takes_config`."""
    from multihop.cli.shared_options import SHARED_OPTIONS
    from multihop.programs.command_kit import CONFIG_REQUEST, CommandKit, SharedOption

    signature = inspect.signature(command, eval_str=True)
    kits = [p.name for p in signature.parameters.values() if p.annotation is CommandKit]
    params = []
    for param in signature.parameters.values():
        if isinstance(param.default, SharedOption):
            if param.default.flag not in SHARED_OPTIONS:
                raise TypeError(f"{command.__name__}: no shared option {param.default.flag}; the shared options: "
                                f"{', '.join(SHARED_OPTIONS)}")
            param = param.replace(default=SHARED_OPTIONS[param.default.flag])
        if param.name not in kits:
            params.append(param)

    @functools.wraps(command)
    def run(**kwargs):
        return command(**(dict.fromkeys(kits, method_kit()) if kits else {}), **kwargs)

    run.__signature__ = signature.replace(parameters=params)
    run.__annotations__ = {p.name: p.annotation for p in params}
    request = getattr(command, CONFIG_REQUEST, None)
    return configurable(**request)(run) if request else run


def method_kit() -> CommandKit:
    """The :class:`~multihop.programs.command_kit.CommandKit` a method's command receives: the functions of the
    experiments and optimize layers the shared commands call."""
    from multihop.cli.programs import retriever_folder
    from multihop.optimize.gold_targets import gold_trajectories
    from multihop.optimize.trajectories import read_collection, refuse_held_apart, render_call, write_trajectories
    from multihop.programs.command_kit import CommandKit

    return CommandKit(retriever_folder=retriever_folder, gold_trajectories=gold_trajectories,
                      read_collection=read_collection, render_call=render_call, write_trajectories=write_trajectories,
                      refuse_held_apart=refuse_held_apart)


app = typer.Typer(cls=MethodCommands, help="Multi-hop RAG methods as DSPy programs.", no_args_is_help=True,
                  add_completion=True, pretty_exceptions_enable=False)


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v",
                                      help="log what multihop does (INFO); other libraries log warnings only"),
         debug: bool = typer.Option(False, "--debug", help="show the traceback of an error (also MULTIHOP_DEBUG=1)")):
    configure_logging(verbose)


def configure_logging(verbose: bool) -> None:
    """Log records go to stderr: multihop's from INFO with ``verbose``, everything else from WARNING."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("multihop").setLevel(logging.INFO if verbose else logging.WARNING)


app.add_typer(resources.models_app, name="models")
app.add_typer(resources.data_app, name="data")
app.add_typer(resources.index_app, name="index")
app.add_typer(traces.trace_app, name="trace")
app.command("programs")(listing.programs_cmd)
app.command("cite")(listing.cite_cmd)
app.command("eval")(runs.eval_cmd)
app.command("compare")(runs.compare_cmd)
app.command("reproduce")(runs.reproduce_cmd)
app.command("merge")(runs.merge_cmd)
app.command("compile")(training.compile_cmd)
app.command("trajectories")(training.trajectories_cmd)
app.command("distill")(training.distill_cmd)
app.command("estimate")(estimate.estimate_cmd)
app.command("ask")(runs.ask_cmd)
app.command("demo")(demo.demo_cmd)
app.command("serve")(serving.serve_cmd)
