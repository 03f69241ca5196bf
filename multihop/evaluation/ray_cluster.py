"""Ray: questions evaluated by tasks across a cluster (``multihop eval|compare|reproduce ... --ray``), and the
connection every Ray job of the library shares (the index build's encoding uses it too,
:mod:`multihop.retrievers.ray_encoding`).

Ray is an optional extra (``pip install 'multihop[ray]'``); without it a ``--ray`` command says how to install it.
``--ray auto`` connects to the cluster ``RAY_ADDRESS`` names, else starts a local one on this machine's cores; any
other value is a cluster's address (``ray://head:10001`` or ``head:6379``). Workers need the library installed as on
the driver (the same image, or a ``runtime_env``), the models installed (``multihop models install``) and, for an
index build, the output folder on a filesystem every node sees.

An evaluation on Ray (``multihop eval --ray``, :func:`ray_evaluate`), and several at once (``multihop compare
--ray``, ``multihop reproduce --ray``: programs or rows × datasets, :func:`ray_evaluate_all`), are
:func:`~multihop.evaluation.runner.evaluate_all`'s runs — each a folder, its manifest, resumable rows and traces, the
summary — whose questions are answered by Ray tasks instead of threads: each task answers a few questions of one
evaluation (:data:`QUESTIONS_PER_TASK`, fewer when every worker would not get one) with the program its evaluation's
recipe builds in the worker (a picklable function returning the program and the DSPy settings it runs under, its
retriever loaded and its LM made there; the LM is served separately when it is a served one), kept there for the
evaluation's next task, and the driver records the rows of each task as it returns, in each evaluation's folder, on
one progress bar. A question's row is the one a single process writes (the same program, the same question); the
timing fields differ. A task whose worker or node dies is retried (:data:`TASK_RETRIES`); one that still fails leaves
its questions unanswered, every other task's rows are recorded, and the run ends in one line
(:class:`RayTasksFailed`) naming the runs and questions to answer again — a rerun of the same command does. An error
of the program's own (its recipe, an LM that cannot serve it) ends the run as it ends a local one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

import dspy
from tqdm.auto import tqdm

from multihop.evaluation.runner import Evaluation, EvaluationRun, run_question
from multihop.lm.options import LMOptions

RAY_EXTRA = "pip install 'multihop[ray]'"
CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT = "MULTIHOP_RAY_TIMEOUT", 30.0  # seconds a cluster's address may take to answer
SHARED_ENV = ("MULTIHOP_HOME", "MULTIHOP_DATA", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM")
QUESTIONS_PER_TASK = 8  # questions of one evaluation a Ray task answers (what a task lost to a dead worker costs)
TASK_RETRIES = 2  # times Ray runs a task again whose worker or node died
BUILT_KEPT = 4  # programs a Ray worker keeps built for its evaluations' next tasks


class RayMissingError(RuntimeError):
    """A ``--ray`` command without Ray installed."""


class RayUnreachableError(ValueError):
    """A ``--ray`` address where no cluster answers (a user error: the address is wrong or the cluster is down)."""


class RayTasksFailed(RuntimeError):
    """Ray tasks that failed for the cluster's reasons (a worker or node died, a task cancelled) after their retries:
    their questions are not answered, every other task's rows are recorded, and a rerun answers theirs."""


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
        env = shared_env()
        ray.init(address=None if local else (None if address == "auto" else address),
                 num_cpus=num_cpus if local else None, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, runtime_env={"env_vars": env})
    return ray


def shared_env() -> dict[str, str]:
    """This process's :data:`SHARED_ENV` variables that are set: what every worker is given."""
    return {name: os.environ[name] for name in SHARED_ENV if name in os.environ}


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
    """The CPUs each of ``workers`` Ray workers (the index build's encoder actors, an evaluation's tasks) can reserve
    so that all of them start on the cluster: ``wanted``, or an equal share of the cluster's CPUs when there are fewer
    (tasks waiting on a served LM need little CPU)."""
    return min(wanted, float(ray.cluster_resources().get("CPU", 1)) / max(1, workers))


def ray_evaluate(program: dspy.Module, recipe: Callable[[], tuple[dspy.Module, dict]],
                 examples: Sequence[dspy.Example], out_dir: str | Path, workers: int = 2, address: str = "auto",
                 name: str | None = None, manifest: dict | None = None, keep_errors: bool = False,
                 progress: bool = True, cpus_per_worker: float = 1.0, judge_lm: dspy.BaseLM | None = None,
                 metric=None) -> dict:
    """:func:`~multihop.evaluation.runner.evaluate` with the questions answered on Ray, ``workers`` tasks at once, each
    building its program with ``recipe`` (``program`` is the driver's, which the run's manifest describes), judged by
    ``judge_lm`` and scored by ``metric`` in the worker: one evaluation of :func:`ray_evaluate_all`. Returns the
    summary."""
    evaluation = Evaluation(program, examples, out_dir, name=name, judge_lm=judge_lm, manifest=manifest,
                            keep_errors=keep_errors, metric=metric)
    return ray_evaluate_all([evaluation], [recipe], address, workers, progress, cpus_per_task=cpus_per_worker)[0]


@functools.lru_cache(maxsize=8)
def worker_lm(options: LMOptions, spec: str | None = None) -> dspy.BaseLM:
    """The LM of ``options`` (of ``spec`` made with them, given one) made once in this process: a worker's programs
    copy it, as the driver's copy the run's one LM, so a local engine loads once a worker."""
    return options.make(spec)


@functools.lru_cache(maxsize=8)
def worker_student(options: LMOptions, student: str) -> tuple:
    """:meth:`LMOptions.student` of ``student`` (a ``--student`` value) made once in this process."""
    return options.student(student)


_built: OrderedDict[str, tuple[dspy.Module, dict]] = OrderedDict()  # in a Ray worker: the programs its tasks built


def _answer_questions(key: str, shared: tuple, examples: Sequence[dspy.Example]) -> list[tuple[dict, list[dict]]]:
    """A Ray task: ``examples`` answered, in order, by the program the recipe of ``shared`` (its evaluation's recipe,
    judge and metrics, put in Ray's object store once) builds under its DSPy settings (built once per ``key`` in this
    worker, the last :data:`BUILT_KEPT` kept), each judged and scored as
    :func:`~multihop.evaluation.runner.run_question` does."""
    recipe, judge, metrics = shared
    if key not in _built:
        _built[key] = recipe()
        while len(_built) > BUILT_KEPT:
            _built.popitem(last=False)
    _built.move_to_end(key)
    program, settings = _built[key]
    with dspy.context(**settings):
        return [run_question(program, example, judge, metrics) for example in examples]


def evaluation_key(evaluation: Evaluation) -> str:
    """What names an evaluation's program in a Ray worker: its folder and manifest."""
    text = json.dumps([str(Path(evaluation.out_dir).resolve()), evaluation.manifest], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ray_evaluate_all(evaluations: Sequence[Evaluation], recipes: Sequence[Callable[[], tuple[dspy.Module, dict]]],
                     address: str = "auto", workers: int = 2, progress: bool = True,
                     questions_per_task: int = QUESTIONS_PER_TASK, retries: int = TASK_RETRIES,
                     cpus_per_task: float = 1.0) -> list[dict]:
    """:func:`~multihop.evaluation.runner.evaluate_all`'s runs — each folder, manifest, resumable rows and traces,
    summary —, their questions answered by Ray tasks of ``questions_per_task`` questions of one evaluation, at most
    ``workers`` at once (each reserving :func:`actor_cpus`), the program of ``evaluations[i]`` built in the worker by
    ``recipes[i]`` (a picklable function returning the program and the DSPy settings it runs under: its LM, adapter
    and ``rm``); fewer questions a task when there are too few to give every worker one. Each evaluation's judge LM
    and metrics travel with its tasks (a metric of a module in the current folder, whole). Each task's rows are
    recorded as it returns; returns the summaries in order. A task lost to the cluster after ``retries`` runs again
    ends the run, once every other task is recorded, in one line (:class:`RayTasksFailed`) naming what a rerun
    answers; a program's own error ends it as a local run ends."""
    if len(recipes) != len(evaluations):
        raise ValueError(f"{len(evaluations)} evaluations but {len(recipes)} recipes: give each evaluation its recipe")
    if any(evaluation.retriever is not None for evaluation in evaluations):
        raise ValueError("on Ray a run's retriever is its recipe's (the DSPy settings it returns, rm): give it there")
    ray = connect(address)
    from ray.exceptions import RayError, RayTaskError

    task = ray.remote(_answer_questions).options(
        num_cpus=actor_cpus(ray, workers, cpus_per_task), max_retries=retries,
        runtime_env={"env_vars": shared_env()})  # where the models, indexes and data are, as this process sees them
    failed: list[tuple[EvaluationRun, list, BaseException]] = []
    with ExitStack() as stack:
        bar = stack.enter_context(tqdm(total=sum(len(e.examples) for e in evaluations), desc="evaluating on Ray",
                                       unit="q", disable=not progress))
        runs = [stack.enter_context(EvaluationRun(e.program, e.examples, e.out_dir, progress, e.name, e.judge_lm,
                                                  e.manifest, e.keep_errors, bar, e.metric)) for e in evaluations]
        by_value(fn for run in runs for fn in run.metrics.values())
        keys = [evaluation_key(evaluation) for evaluation in evaluations]
        shared = [ray.put((recipe, run.judge, run.metrics)) for recipe, run in zip(recipes, runs, strict=True)]
        todo = sum(len(run.todo) for run in runs)  # tasks small enough that every worker has one
        size = max(1, min(questions_per_task, -(-todo // max(1, workers))))
        waiting = deque((i, run.todo[start:start + size]) for i, run in enumerate(runs)
                        for start in range(0, len(run.todo), size))
        pending: dict = {}  # task → (its evaluation's index, its questions)
        try:
            while waiting or pending:
                while waiting and len(pending) < max(1, workers):
                    i, examples = waiting.popleft()
                    pending[task.remote(keys[i], shared[i], examples)] = (i, examples)
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    i, examples = pending.pop(ref)
                    try:
                        answers = ray.get(ref)
                    except RayTaskError as exc:  # the program's own error, raised in the worker
                        raise (exc.cause if isinstance(exc.cause, Exception) else exc) from None
                    except RayError as exc:  # the cluster's: a dead worker or node, a cancelled task
                        failed.append((runs[i], examples, exc))
                        continue
                    for row, trace in answers:
                        runs[i].record(row, trace)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    if failed:
        raise RayTasksFailed(failed_line(failed))
    return [run.summary for run in runs]


def by_value(functions) -> None:
    """Have Ray send the user's metric ``functions`` whole, with the module each is defined in, when that module is
    one of the current folder's (what ``--metric module:function`` imports), which the workers could not import."""
    from ray import cloudpickle

    here = Path.cwd().resolve()
    for fn in functions:
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        path = getattr(module, "__file__", None)
        if module is not None and path and Path(path).resolve().is_relative_to(here) and module.__name__ != "__main__":
            cloudpickle.register_pickle_by_value(module)


def failed_line(failed: Sequence[tuple[EvaluationRun, list, BaseException]]) -> str:
    """The one line of :class:`RayTasksFailed`: how many tasks and questions, the first failure, the runs they were
    of, and that a rerun of the same command answers them."""
    questions = sum(len(examples) for _, examples, _ in failed)
    run, examples, error = failed[0]
    reason = " ".join(str(error).split())
    reason = reason if len(reason) <= 200 else reason[:199] + "…"
    folders = list(dict.fromkeys(str(run.out) for run, _, _ in failed))
    ids = ", ".join(str(example.id) for example in examples[:4]) + (", …" if len(examples) > 4 else "")
    return (f"{len(failed)} Ray task(s) failed, {questions} question(s) unanswered (the first: {run.name or run.out} "
            f"on {ids}: {type(error).__name__}: {reason}); every other question is recorded: rerun the same command "
            f"to answer those of {', '.join(folders[:3])}{' and more' if len(folders) > 3 else ''}")
