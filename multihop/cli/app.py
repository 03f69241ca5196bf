"""The ``multihop`` app: ``--verbose``, the command groups and the commands, each defined in the module of its job
(resources, training, runs, traces, demo)."""

from __future__ import annotations

import logging

import typer

from multihop.cli import demo, resources, runs, serving, traces, training

app = typer.Typer(help="Multi-hop RAG methods as DSPy programs.", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False)


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
app.add_typer(training.cooprag_app, name="cooprag")
app.add_typer(training.dualrag_app, name="dualrag")
app.add_typer(training.hanrag_app, name="hanrag")
app.add_typer(training.cirag_app, name="cirag")
app.command("eval")(runs.eval_cmd)
app.command("compare")(runs.compare_cmd)
app.command("compile")(training.compile_cmd)
app.command("trajectories")(training.trajectories_cmd)
app.command("distill")(training.distill_cmd)
app.command("ask")(runs.ask_cmd)
app.command("demo")(demo.demo_cmd)
app.command("serve")(serving.serve_cmd)
