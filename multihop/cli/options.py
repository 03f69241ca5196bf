"""Options several commands share, defined once: option groups (:func:`option_group`: the LM and MLflow options
here, the program options in :mod:`multihop.cli.programs`), ``--set`` switches, ``--markers`` and question files."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import typer

from multihop.data.question_sets import DATASETS, question_file
from multihop.lm.defaults import API_KEY_ENV, DEFAULT_ENGINE, DEFAULT_LM, DEFAULT_STRUCTURED, LM_TIMEOUT_ENV
from multihop.lm.options import (
    ADAPTER_HELP,
    API_BASE_HELP,
    API_KEY_HELP,
    ENGINE_HELP,
    LM_HELP,
    MAX_TOKENS_HELP,
    STRUCTURED_HELP,
    TIMEOUT_HELP,
    LMOptions,
)

TRAIN_QUESTIONS = f"a question file, or a dataset name ({', '.join(DATASETS)}) for its train file in MULTIHOP_DATA"
DEV_QUESTIONS = f"a question file, or a dataset name ({', '.join(DATASETS)}) for its dev file in MULTIHOP_DATA"
SET_OPT = typer.Option(None, "--set", help="a constructor switch as key=value (repeatable), e.g. simple_qa=false")
LM_PANEL = "LM options"  # the LM options in their own panel of --help
MARKERS_OPT = typer.Option(None, "--markers", help="a program (e.g. CoopRAG) whose query markers the encoder keeps "
                           "whole as special tokens")


class CommandLM(LMOptions):
    """:class:`LMOptions` whose bad values (an unknown model, a missing adapter folder) end the command with one line
    naming the options to change."""

    def make(self, spec: str | None = None, max_tokens: int | None = None):
        with _lm_errors():
            return super().make(spec, max_tokens)

    def configure(self, spec: str | None = None, max_tokens: int | None = None):
        with _lm_errors():
            return super().configure(spec, max_tokens)


@contextmanager
def _lm_errors():
    try:
        yield
    except (FileNotFoundError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="the LM options (--lm, --adapter, --engine, --structured)"
                                 ) from exc


def option_group(param: str, options: dict[str, tuple[type, typer.models.OptionInfo]],
                 build: Callable[..., object]) -> Callable:
    """Give a command a group of options defined once: typer sees each of ``options`` (name → (type, option)) as a
    parameter of its own, through the signature this sets on the command (``__signature__``), and the command
    receives them together as its one parameter ``param``, ``build(**values)``."""

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command, eval_str=True)
        if param not in signature.parameters:
            raise TypeError(f"{command.__name__} takes no `{param}` parameter for its {param} options")
        kept = [p for p in signature.parameters.values() if p.name != param]
        added = [inspect.Parameter(f"{param}_{name}", inspect.Parameter.KEYWORD_ONLY, default=default,
                                   annotation=kind) for name, (kind, default) in options.items()]

        @functools.wraps(command)
        def run(**kwargs):
            group = build(**{name: kwargs.pop(f"{param}_{name}") for name in options})
            return command(**{param: group}, **kwargs)

        run.__signature__ = signature.replace(parameters=[*kept, *added])
        run.__annotations__ = {p.name: p.annotation for p in run.__signature__.parameters.values()}
        return run

    return decorate


def lm_options(*names: str, help: str = LM_HELP, max_tokens: int | None = None) -> Callable:
    """Give a command the LM options: the LM (``--lm``, or the option ``names``), ``--api-base``, ``--api-key``
    (default: ``$MULTIHOP_API_KEY``), ``--adapter``, ``--max-tokens`` (default ``max_tokens``), ``--engine``,
    ``--lm-timeout`` and ``--structured``. The
    command declares one parameter ``lm`` and receives them in it as an :class:`LMOptions`."""
    return option_group("lm", {
        "lm": (str, typer.Option(DEFAULT_LM, *(names or ("--lm",)), help=help, rich_help_panel=LM_PANEL)),
        "api_base": (str | None, typer.Option(None, "--api-base", help=API_BASE_HELP, rich_help_panel=LM_PANEL)),
        "api_key": (str | None, typer.Option(None, "--api-key", envvar=API_KEY_ENV, show_envvar=False,
                                             help=API_KEY_HELP, rich_help_panel=LM_PANEL)),
        "adapter": (str | None, typer.Option(None, "--adapter", help=ADAPTER_HELP, rich_help_panel=LM_PANEL)),
        "max_tokens": (int | None, typer.Option(max_tokens, "--max-tokens", min=1, help=MAX_TOKENS_HELP,
                                                rich_help_panel=LM_PANEL)),
        "engine": (str, typer.Option(DEFAULT_ENGINE, "--engine", help=ENGINE_HELP, rich_help_panel=LM_PANEL)),
        "timeout": (float | None, typer.Option(None, "--lm-timeout", envvar=LM_TIMEOUT_ENV, min=1.0,
                                               help=TIMEOUT_HELP, rich_help_panel=LM_PANEL)),
        "structured": (str, typer.Option(DEFAULT_STRUCTURED, "--structured", help=STRUCTURED_HELP,
                                         rich_help_panel=LM_PANEL)),
    }, CommandLM)


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
                                         "pip install 'multihop[mlflow]'")),
        "experiment": (str | None, typer.Option(None, "--experiment", help="the MLflow experiment of --mlflow's run "
                                                "(default: multihop)")),
    }, MlflowOptions)


def parse_settings(pairs: list[str]) -> dict:
    """``--set key=value`` constructor switches; values are read as JSON (false, 3, null, "x"), else as text."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--set takes key=value, got {pair!r}")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return settings


def program_special_tokens(program: str | None) -> tuple[str, ...]:
    """The special tokens of ``--markers PROGRAM``: the markers that program writes into its queries (none without)."""
    if program is None:
        return ()
    from multihop.programs import PROGRAMS

    marking = {name: cls for name, cls in PROGRAMS.items() if cls.special_tokens}
    if program not in marking:
        raise typer.BadParameter(f"{program!r} writes no query markers; programs that do: {', '.join(marking)}",
                                 param_hint="--markers")
    return marking[program].special_tokens


def program_index_pooling(program: str | None) -> str:
    """The first-stage pooling of an index built for ``--markers PROGRAM`` (the program's ``index_pooling``)."""
    from multihop.programs import PROGRAMS

    return PROGRAMS[program].index_pooling if program in PROGRAMS else "mean"


def question_path(data: str, split: str) -> Path:
    """A ``--data`` value as a file: a question file, or a dataset name for its ``split`` file in MULTIHOP_DATA."""
    try:
        path = question_file(data, split)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data") from exc
    if not path.is_file():
        raise typer.BadParameter(f"{path}: no such file; give a question file or one of {', '.join(DATASETS)}",
                                 param_hint="--data")
    return path


def file_info(path: Path, examples: list) -> dict:
    """A question file as a manifest records it: path, sha256 and the number of questions used."""
    from multihop.data.folders import sha256_file

    return {"path": str(path), "sha256": sha256_file(path), "questions": len(examples)}
