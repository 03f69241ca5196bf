"""Options several shared commands take, defined once where no lower layer holds their concept: the MLflow options
(:func:`mlflow_options`), ``--set`` (:data:`SET_OPT`; its values are read by
:func:`multihop.programs.switches.parse_settings`) and ``--markers`` (:data:`MARKERS_OPT`). A method's own command takes
``--set`` or ``--markers`` by naming it (:class:`multihop.programs.command_kit.SharedOption`): :data:`SHARED_OPTIONS`.
The LM options are :func:`multihop.lm.options.lm_options`, the program options :mod:`multihop.cli.programs`' and the
question files' help :mod:`multihop.data.question_sets`'."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import contextmanager

import typer

from multihop.lm.options import option_group

SET_OPT = typer.Option(None, "--set", help="a constructor switch as key=value (repeatable), e.g. simple_qa=false; "
                       "none (any case) or null is None, e.g. rerank=none")
MARKERS_OPT = typer.Option(None, "--markers", help="a program (e.g. CoopRAG) whose query markers the encoder keeps "
                           "whole as special tokens")
SHARED_OPTIONS = {"--set": SET_OPT, "--markers": MARKERS_OPT}  # by flag, for a method's command that names one


@dataclasses.dataclass(frozen=True)
class MlflowOptions:
    """``--mlflow URI`` and ``--experiment NAME``: where a run is logged (:mod:`multihop.evaluation.mlflow_runs`),
    or nowhere without a URI."""

    uri: str | None = None
    experiment: str | None = None

    def __post_init__(self):
        """Refuse, before any work, a run that could not be logged: MLflow missing, or a server that is not there."""
        if self.uri is not None:
            from multihop.evaluation.mlflow_runs import check_tracking_uri, require_mlflow

            require_mlflow()
            check_tracking_uri(self.uri)

    @contextmanager
    def run(self, name: str):
        """An MLflow run named ``name`` with DSPy tracing on while it lasts, or nothing without ``--mlflow``; yields
        whether a run is open."""
        if self.uri is None:
            yield False
            return
        from multihop.evaluation.mlflow_runs import mlflow_run

        with mlflow_run(self.uri, self.experiment, name):
            yield True


def mlflow_options() -> Callable:
    """Give a command ``--mlflow URI`` and ``--experiment NAME``, received as one :class:`MlflowOptions` parameter
    ``mlflow``."""
    return option_group("mlflow", {
        "uri": (str | None, typer.Option(None, "--mlflow", help="log the run to MLflow at this tracking URI (e.g. "
                                         "sqlite:///mlflow.db, http://host:5000): the manifest as parameters, the "
                                         "summary as metrics, the folder as artifacts, a trace per question; needs "
                                         "pip install 'multihop\\[mlflow]'")),
        "experiment": (str | None, typer.Option(None, "--experiment", help="the MLflow experiment of --mlflow's run "
                                                "(default: multihop)")),
    }, MlflowOptions)


def program_index_pooling(program: str | None) -> str:
    """The first-stage pooling of an index built for ``--markers PROGRAM`` (the program's ``index_pooling``)."""
    from multihop.programs import PROGRAMS

    return PROGRAMS[program].index_pooling if program in PROGRAMS else "mean"
