"""Ray: questions evaluated by actors across a cluster (``multihop eval ... --ray``), and the connection every Ray job
of the library shares (the index build's encoding uses it too, :mod:`multihop.retrievers.ray_encoding`).

Ray is an optional extra (``pip install 'multihop[ray]'``); without it a ``--ray`` command says how to install it.
``--ray auto`` connects to the cluster ``RAY_ADDRESS`` names, else starts a local one on this machine's cores; any
other value is a cluster's address (``ray://head:10001`` or ``head:6379``). Workers need the library installed as on
the driver (the same image, or a ``runtime_env``), the models installed (``multihop models install``) and, for an
index build, the output folder on a filesystem every node sees.

An evaluation on Ray is :func:`~multihop.evaluation.runner.evaluate`'s run — one folder, its manifest, resumable rows
and traces, the summary — whose questions are answered by ``workers`` actors instead of threads: each actor builds the
program once from a recipe (a picklable function returning the program and the DSPy settings it runs under, its
retriever loaded and its LM configured; the LM is served separately when it is a served one), answers one question
per call, and the driver records the rows as they come back. A question's row is the one a single process writes
(the same program, the same question); the timing fields differ.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import dspy

from multihop.evaluation.runner import EvaluationRun, run_question

RAY_EXTRA = "pip install 'multihop[ray]'"
CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT = "MULTIHOP_RAY_TIMEOUT", 30.0  # seconds a cluster's address may take to answer
SHARED_ENV = ("MULTIHOP_HOME", "MULTIHOP_DATA", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM")


class RayMissingError(RuntimeError):
    """A ``--ray`` command without Ray installed."""


class RayUnreachableError(ValueError):
    """A ``--ray`` address where no cluster answers (a user error: the address is wrong or the cluster is down)."""


def require_ray():
    """The ``ray`` module, or :class:`RayMissingError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RayMissingError(f"--ray needs Ray, which is not installed: {RAY_EXTRA}") from None
    return ray


def connect(address: str = "auto", num_cpus: int | None = None):
    """Ray, connected: to the cluster at ``address``, or with ``auto`` to ``RAY_ADDRESS``'s, else to a local cluster
    started on ``num_cpus`` cores (default: all). The workers get this process's :data:`SHARED_ENV` variables (where
    the models, indexes and data are). A connection already open is kept."""
    ray = require_ray()
    if not ray.is_initialized():
        local = address == "auto" and not os.environ.get("RAY_ADDRESS")
        if not local:
            check_reachable(os.environ["RAY_ADDRESS"] if address == "auto" else address)
        env = {name: os.environ[name] for name in SHARED_ENV if name in os.environ}
        ray.init(address=None if local else (None if address == "auto" else address),
                 num_cpus=num_cpus if local else None, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, runtime_env={"env_vars": env})
    return ray


def check_reachable(address: str, timeout: float | None = None) -> None:
    """Refuse, in at most ``timeout`` seconds (default :data:`CONNECT_TIMEOUT`, or ``MULTIHOP_RAY_TIMEOUT``), a
    cluster ``address`` (``ray://host:port``, ``host:port``) where nothing accepts a connection — Ray itself retries
    such an address for minutes. A port that answers is left to Ray."""
    timeout = float(os.environ.get(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT)) if timeout is None else timeout
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise RayUnreachableError(f"--ray {address}: a cluster's address is host:port (the head's GCS, e.g. "
                                  "head:6379) or ray://host:port (Ray's client, e.g. ray://head:10001), or auto")
    deadline, reason = time.monotonic() + timeout, "no answer"
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
                return
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
        if time.monotonic() >= deadline:
            raise RayUnreachableError(
                f"--ray {address}: no Ray cluster answers there ({reason.lower()} for {timeout:g} s); start one with "
                f"`ray start --head` on that machine, or use --ray auto for a local cluster on this one "
                f"({CONNECT_TIMEOUT_ENV} sets how long to wait)")
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def actor_cpus(ray, workers: int, wanted: float = 1.0) -> float:
    """The CPUs each of ``workers`` actors can reserve so that all of them start on the cluster: ``wanted``, or an
    equal share of the cluster's CPUs when there are fewer (actors waiting on a served LM need little CPU)."""
    return min(wanted, float(ray.cluster_resources().get("CPU", 1)) / max(1, workers))


class _QuestionWorker:
    """A Ray actor: the program its recipe builds, answering one question a call under the recipe's DSPy settings."""

    def __init__(self, recipe: Callable[[], tuple[dspy.Module, dict]]):
        self.program, self.settings = recipe()

    def answer(self, example: dspy.Example) -> tuple[dict, list[dict]]:
        with dspy.context(**self.settings):
            return run_question(self.program, example)


def ray_evaluate(program: dspy.Module, recipe: Callable[[], tuple[dspy.Module, dict]],
                 examples: Sequence[dspy.Example], out_dir: str | Path, workers: int = 2, address: str = "auto",
                 name: str | None = None, manifest: dict | None = None, keep_errors: bool = False,
                 progress: bool = True, cpus_per_worker: float = 1.0) -> dict:
    """:func:`~multihop.evaluation.runner.evaluate` with the questions answered by ``workers`` Ray actors, each building
    its program with ``recipe`` (``program`` is the driver's, which the run's manifest describes); more workers than the
    cluster's CPUs share them (:func:`actor_cpus`), so all start. Returns the summary."""
    ray = connect(address)
    worker = ray.remote(num_cpus=actor_cpus(ray, workers, cpus_per_worker))(_QuestionWorker)
    with EvaluationRun(program, examples, out_dir, progress, name, None, manifest, keep_errors) as run:
        actors = [worker.remote(recipe) for _ in range(max(0, min(workers, len(run.todo))))]
        try:
            answers = ray.util.ActorPool(actors).map_unordered(lambda actor, example: actor.answer.remote(example),
                                                               run.todo) if actors else []
            for row, trace in answers:
                run.record(row, trace)
        finally:
            for actor in actors:
                ray.kill(actor)
    return run.summary
