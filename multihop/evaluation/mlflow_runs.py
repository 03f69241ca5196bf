"""An evaluation logged as an MLflow run (``multihop eval/compare --mlflow URI [--experiment NAME]``).

:func:`mlflow_run` opens a run in the experiment at a tracking URI with MLflow's DSPy tracing on
(``mlflow.dspy.autolog()``), so each question answered in it is a trace — a span per module and LM call, typed
retriever and reranker spans with their documents (:mod:`multihop.runtime.spans`) — linked to the run;
:func:`log_outcome` then logs the run manifest as parameters, the summary's numbers as metrics and the output folder
(rows, traces, summary, report) as artifacts. An experiment it creates on a local database (``sqlite:///DIR/x.db``)
keeps its artifacts (the output folders, the traces' data) beside the database, in ``DIR/mlartifacts/<experiment>``
(:func:`artifact_location`), not in ``./mlruns`` of the current folder, MLflow's own default; a tracking server keeps
them where it is configured to. MLflow is an optional extra: ``pip install 'multihop[mlflow]'``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

CONNECT_TIMEOUT = 5.0  # seconds to wait for a tracking server's port before refusing its URI
MAX_PARAM_LENGTH = 6000  # MLflow refuses longer parameter values
DEFAULT_EXPERIMENT = "multihop"


class MlflowUnavailableError(ValueError):
    """MLflow is not installed, or its tracking server does not answer."""


def require_mlflow():
    """The ``mlflow`` package, or a one-line error saying how to install it."""
    try:
        import mlflow
        import mlflow.dspy  # noqa: F401 - the DSPy flavour, for autolog
    except ImportError:
        raise MlflowUnavailableError("--mlflow needs MLflow: pip install 'multihop[mlflow]'") from None
    return mlflow


def check_tracking_uri(uri: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse, within ``timeout`` seconds, an ``http(s)`` tracking URI whose port accepts no connection (MLflow's
    client would retry it for minutes); other URIs (``sqlite:///…``, ``databricks``) are left to MLflow."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname or "localhost", port), timeout=timeout):
            return
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        raise MlflowUnavailableError(f"--mlflow {uri}: no tracking server answers there ({reason}); start one with "
                                     "`mlflow server`, or log to a local database: --mlflow sqlite:///mlflow.db") \
            from None


def artifact_location(uri: str, experiment: str) -> str | None:
    """Where a new ``experiment`` at tracking ``uri`` keeps its artifacts: for a local SQLite database, the folder
    ``mlartifacts/<experiment>`` beside it (as a ``file://`` URI); for any other store (a server, another database),
    None: the store's own choice."""
    if not uri.startswith("sqlite:///"):
        return None
    database = uri.removeprefix("sqlite:///").partition("?")[0]
    if not database or database == ":memory:":
        return None
    folder = re.sub(r"[^\w.-]", "_", experiment).strip(".") or "experiment"
    return (Path(database).resolve().parent / "mlartifacts" / folder).as_uri()


def use_experiment(mlflow, experiment: str, uri: str, artifacts: str | Path | None = None) -> None:
    """Make ``experiment`` the active one, creating it — its artifacts in ``artifacts``, else at
    :func:`artifact_location` — when it does not exist yet; an existing experiment keeps its own location."""
    if mlflow.get_experiment_by_name(experiment) is None:
        location = Path(artifacts).resolve().as_uri() if artifacts else artifact_location(uri, experiment)
        if location is not None:
            try:
                mlflow.create_experiment(experiment, artifact_location=location)
            except mlflow.exceptions.MlflowException:
                if mlflow.get_experiment_by_name(experiment) is None:  # not another process creating it first
                    raise
    mlflow.set_experiment(experiment)


@contextmanager
def mlflow_run(uri: str, experiment: str | None = None, run_name: str | None = None,
               artifacts: str | Path | None = None) -> Iterator[Any]:
    """An active MLflow run in ``experiment`` (default ``multihop``) at tracking ``uri``, with DSPy tracing on while
    it lasts; traces still being written are flushed when it ends (``mlflow.flush_trace_async_logging()``), so a
    search after it finds them all. An experiment it creates keeps its artifacts in ``artifacts`` if given, else
    beside a local database (:func:`artifact_location`)."""
    mlflow = require_mlflow()
    mlflow.set_tracking_uri(uri)
    use_experiment(mlflow, experiment or DEFAULT_EXPERIMENT, uri, artifacts)
    mlflow.dspy.autolog(log_traces=True, log_traces_from_compile=False, log_traces_from_eval=True, silent=True)
    try:
        with mlflow.start_run(run_name=run_name) as run:
            yield run
    finally:
        mlflow.flush_trace_async_logging()
        mlflow.dspy.autolog(disable=True, silent=True)


def flat(mapping: Mapping, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as one level, its keys joined with dots."""
    items: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            items.update(flat(value, f"{name}."))
        else:
            items[name] = value
    return items


def key_name(key: str) -> str:
    """``key`` spelled as MLflow accepts a parameter or metric name (``recall@5`` → ``recall_at_5``)."""
    return re.sub(r"[^\w\-. /:]", "_", key.replace("@", "_at_"))


def params(manifest: Mapping) -> dict[str, str]:
    """A run manifest as MLflow parameters: flattened, each value as text cut to MLflow's limit."""
    return {key_name(key): str(value)[:MAX_PARAM_LENGTH] for key, value in flat(manifest).items()}


def metrics(summary: Mapping) -> dict[str, float]:
    """The numbers of a summary (flattened) as MLflow metrics; text, flags and missing values are left out."""
    return {key_name(key): float(value) for key, value in flat(summary).items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


def log_outcome(manifest: Mapping, summary: Mapping, out: str | Path) -> None:
    """Log to the active run: ``manifest`` as parameters, ``summary``'s numbers as metrics, ``out`` as artifacts."""
    mlflow = require_mlflow()
    mlflow.log_params(params(manifest))
    mlflow.log_metrics(metrics(summary))
    mlflow.log_artifacts(str(out))
