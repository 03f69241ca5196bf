"""The ``multihop`` app: ``--verbose``, the command groups and the commands, each defined in the module of its job
(resources, training, runs, traces, demo), and each method's own offline step (``multihop cirag extract``, ...), the
Typer app its declaration names (``Declaration(cli=...)``), found in the registry when the command line asks for it."""

from __future__ import annotations

import logging
from importlib import import_module

import click
import typer
from typer.core import TyperGroup

from multihop.cli import choices, demo, estimate, listing, resources, runs, serving, traces, training


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

    return {method.command: import_module(method.cli).app for method in PROGRAMS.declared() if method.cli}


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
app.add_typer(training.retriever_app, name="retriever")
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
