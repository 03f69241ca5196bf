"""Resumable, parallel evaluation of any program over a question set (docs/design.md, "Evaluation"): :func:`evaluate`,
its asyncio form :func:`aevaluate` (one signature, the parameters documented once on :func:`evaluate`) and
:func:`evaluate_all` for several programs through one pool.

Each finished question is appended to ``out_dir/results.jsonl`` at once (flushed and fsynced) and its stage trace is
written to ``out_dir/traces/<id>.json``; a rerun on the same folder skips the questions already there, so a run that
dies loses nothing. An exception in one question is recorded in its row and the run goes on. The summary (the
papers' metrics, per-question costs and counts, and how the program declares its counts are shown: its
``count_display``) is printed as a table and saved as ``out_dir/summary.json``. Given a judge
LM, each answer is also judged (ComposeRAG's "LLM Eval", ``multihop.evaluation.metrics.LLMJudge``) outside the program's
trace, so the judge's calls never count as the program's.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
import json
import logging
import re
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path

import dspy
from dspy.utils.exceptions import (
    LMAuthError,
    LMBillingError,
    LMRateLimitError,
    LMServerError,
    LMTimeoutError,
    LMTransportError,
)
from rich.console import Console
from rich.table import Table
from tqdm.auto import tqdm

from multihop.data.folders import RUN_MANIFEST, check_run, locked
from multihop.data.jsonl import append_row, read_rows, rows_text
from multihop.data.paths import atomic_write_text
from multihop.evaluation.intervals import (
    ANSWER_METRICS,
    DEFAULT_COUNTS,
    GRADED_METRICS,
    mean,
    metric_interval,
    metric_values,
)
from multihop.evaluation.metrics import LLMJudge, answer_scores, ndcg_at_k, recall_at_k, reciprocal_rank
from multihop.lm.backends import lm_api_base
from multihop.lm.engines.local_engine import LogprobsUnavailable
from multihop.lm.engines.served import StructuredOutputRefused
from multihop.runtime.tracing import TracedModule, in_worker, jsonable, record_trace

logger = logging.getLogger(__name__)
RESULTS = "results.jsonl"
MAX_ENDPOINT_FAILURES = 10  # questions in a row whose LM endpoint failed: the run stops
ENDPOINT_ERRORS = (LMTransportError, LMTimeoutError, LMServerError, LMRateLimitError, LMAuthError, LMBillingError)
SUMMARY = "summary.json"
METRIC_COLUMNS = [("em", "EM"), ("f1", "F1"), ("acc", "Acc"), ("cover_em", "Cover-EM"), ("llm_eval", "LLM Eval"),
                  ("recall@2", "R@2"), ("recall@5", "R@5"), ("recall@k", "R@k"), ("ndcg@10", "nDCG@10"),
                  ("mrr", "MRR")]
COST_COLUMNS = [("llm_calls", "LLM calls/q"), ("retrieval_calls", "retrievals/q"), ("tokens", "tokens/q"),
                ("cached_prompt_tokens", "prefill saved/q"), ("seconds", "s/q")]
RATES = {"em", "f1", "acc", "cover_em", "llm_eval"}  # and every recall@k: shares of questions, shown in percent
RANKING = {"ndcg@10", "mrr"}  # scores in [0, 1], shown ×100 as recall is
OPTIONAL = {"llm_eval"}  # shown only when some summary has it
BUILT_IN = {"em", "f1", "acc", "cover_em", "llm_eval", "recall@2", "recall@5", "recall@k", "ndcg@10", "mrr"}


def metric_functions(metric: Callable | Mapping[str, Callable] | None) -> dict[str, Callable]:
    """The metrics a user brings, by name: a DSPy metric ``fn(example, prediction, trace=None)`` (named by its
    ``__name__``) or a ``{name: fn}`` mapping; a name the runner already records is refused."""
    if metric is None:
        return {}
    named = dict(metric) if isinstance(metric, Mapping) else {getattr(metric, "__name__", "metric"): metric}
    for name, fn in named.items():
        if not callable(fn):
            raise ValueError(f"metric {name!r} is not a function")
        if name in BUILT_IN or not str(name).strip():
            raise ValueError(f"metric name {name!r} is taken: name it other than {', '.join(sorted(BUILT_IN))}")
    return named


def require_module(program, what: str) -> None:
    """Refuse anything but a ``dspy.Module`` in one line (a ``(program, report)`` tuple would otherwise fail on every
    question)."""
    if not isinstance(program, dspy.Module):
        raise TypeError(f"{what} takes a dspy.Module (a program), not a {type(program).__name__}")


def trace_path(out_dir: Path, qid: str) -> Path:
    return out_dir / "traces" / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', qid)}.json"


def run_question(program: dspy.Module, example: dspy.Example, judge: LLMJudge | None = None,
                 metrics: Mapping[str, Callable] | None = None, retriever=None) -> tuple[dict, list[dict]]:
    """Answer one question and score it (and judge it, given a judge); never raises but for an LM that cannot serve
    the program at all — a server that refuses the stages' schemas
    (:class:`~multihop.lm.engines.served.StructuredOutputRefused`), an LM without the token log-probabilities a program
    reads (:class:`~multihop.lm.engines.local_engine.LogprobsUnavailable`) —, which stops the run. A module
    that traces its own calls (:class:`~multihop.runtime.tracing.TracedModule`, every multihop program) gives its
    stage records and counts with its prediction; any other ``dspy.Module`` is traced here, so it gets them too.
    ``recall@k`` is the recall over every passage the program read (k: its own count on that question); ``ndcg@10``
    and ``mrr`` rank those passages in the order it read them (:func:`~multihop.evaluation.metrics.ndcg_at_k`,
    :func:`~multihop.evaluation.metrics.reciprocal_rank`). Each of
    ``metrics`` (a user's DSPy metrics, by name) scores the prediction as ``fn(example, prediction)``; one that raises
    records None and its error under ``metric_errors``, and the run goes on. Given a ``retriever``, the program runs
    with it as ``dspy.settings.rm`` (what ``dspy.Retrieve`` and a program given no retriever search); the passages a
    module read through ``dspy.Retrieve`` are those of its trace, as for any retrieval."""
    start = time.perf_counter()
    row = {"id": example.id, "question": example.question, "answers": list(example.answers)}
    trace: list[dict] = []
    try:
        with dspy.context(rm=retriever) if retriever is not None else nullcontext():
            if isinstance(program, TracedModule):
                prediction = program(**example.inputs())
                trace, counts = prediction.stage_trace, dict(prediction.counts)
            else:
                with record_trace(program) as recorded:
                    prediction = program(**example.inputs())
                trace, counts = recorded.to_list(), recorded.counts()
        # a program's own passage_ids, even empty, are what it used; the retriever's outputs only when it names none
        ids = list((prediction.passage_ids or []) if "passage_ids" in prediction else counts.get("passage_ids") or [])
        counts.pop("passage_ids", None)
        row.update(prediction=prediction.answer or "", passage_ids=ids, counts=counts, error=None)
        row["metrics"] = answer_scores(row["prediction"], example.answers)
        gold = example.get("gold_passage_ids") or []
        retrieved = bool(ids or counts.get("retrieval_calls"))  # a program that never retrieves has no recall
        row["metrics"].update({f"recall@{k}": recall_at_k(ids, gold, k) if retrieved else None for k in (2, 5)})
        row["metrics"]["recall@k"] = recall_at_k(ids, gold, len(ids)) if retrieved else None
        row["metrics"]["ndcg@10"] = ndcg_at_k(ids, gold, 10) if retrieved else None
        row["metrics"]["mrr"] = reciprocal_rank(ids, gold) if retrieved else None
        if judge is not None:
            row["metrics"]["llm_eval"] = judge(example.question, row["prediction"], example.answers)
        for name, fn in (metrics or {}).items():
            try:
                value = fn(example, prediction)
                row["metrics"][name] = None if value is None else float(value)
            except Exception as exc:  # a broken metric must not end the run
                row["metrics"][name] = None
                row.setdefault("metric_errors", {})[name] = f"{type(exc).__name__}: {exc}"
    except (StructuredOutputRefused, LogprobsUnavailable):
        raise  # every question would fail the same way: the run stops with its one line
    except Exception as exc:  # one broken question must not end the run
        row.update(prediction="", passage_ids=[], counts={}, metrics={}, error=f"{type(exc).__name__}: {exc}",
                   endpoint_error=isinstance(exc, ENDPOINT_ERRORS))
        row["traceback"] = traceback.format_exc(limit=8)
    row["seconds"] = round(time.perf_counter() - start, 3)
    return row, trace


def summarize(rows: Sequence[dict], count_display: dict[str, str] | None = None,
              metric_names: Sequence[str] = ()) -> dict:
    """Averages over questions: errored questions score 0 on answer metrics and on each user metric of
    ``metric_names`` (listed as the summary's ``metrics``; a question whose metric raised is left out of its mean);
    recall, nDCG@10 and MRR only over questions with gold, LLM Eval only over judged questions; every numeric count
    a program reports (its events too) per question (each question's value:
    :func:`multihop.evaluation.intervals.question_values`).
    ``intervals`` holds the 95% bootstrap interval ``[low, high]`` of each of these means (None where fewer than two
    questions have a value; :func:`multihop.evaluation.intervals.bootstrap_interval`). The program's
    ``count_display`` (how tables show its counts) is kept as the summary's. A run with errored questions also
    counts them by exception type (``error_types``, the most frequent first) and keeps the first one's
    ``"<id>: <Type>: <message>"`` (``first_error``)."""
    n = len(rows)
    errored = [r for r in rows if r.get("error")]
    summary: dict = {"questions": n, "errors": len(errored), "count_display": dict(count_display or {})}
    if errored:
        kinds = Counter(r["error"].partition(":")[0] for r in errored)
        summary["error_types"] = dict(kinds.most_common())
        summary["first_error"] = f"{errored[0]['id']}: {errored[0]['error']}"
    if metric_names:
        summary["metrics"] = list(metric_names)
    if not n:
        return summary
    counted = {key for r in rows for key, value in r["counts"].items() if isinstance(value, int | float)}
    keys = dict.fromkeys((*metric_names, *ANSWER_METRICS, *GRADED_METRICS, *sorted(counted | set(DEFAULT_COUNTS)),
                          "seconds"))
    summary.update({key: mean(metric_values(rows, key)) for key in keys})
    summary["judged"] = sum(1 for r in rows if r["metrics"].get("llm_eval") is not None)
    summary["intervals"] = {key: metric_interval(rows, key) for key in keys}
    return summary


def declared_rates(summaries: Sequence[dict]) -> set[str]:
    """The counts some summary's program declares a rate (a share of questions)."""
    return {key for s in summaries for key, display in s.get("count_display", {}).items() if display == "rate"}


def user_metrics(summaries: Sequence[dict]) -> list[str]:
    """The user metrics of the summaries, in their order."""
    return list(dict.fromkeys(name for s in summaries for name in s.get("metrics", [])))


def default_columns(summaries: Sequence[dict]) -> list[tuple[str, str]]:
    """The metric columns, the user metrics, then every count the summaries' programs declare (a rate as ``name %``,
    any other as ``name/q``), then the cost columns."""
    rates = declared_rates(summaries)
    declared = sorted({key for s in summaries for key in s.get("count_display", {})})
    users = [(name, name) for name in user_metrics(summaries)]
    counts = [(key, f"{key} %" if key in rates else f"{key}/q") for key in declared]
    return [*METRIC_COLUMNS, *users, *counts, *COST_COLUMNS]


def render_table(summaries: dict[str, dict], title: str = "multihop evaluation",
                 columns: Sequence[tuple[str, str]] | None = None, label: str = "program") -> Table:
    """One row per summary; metric rates, recall, nDCG and MRR and the counts a program declares a rate in percent;
    an optional column only when some summary has it. ``columns`` (key, header) default to :func:`default_columns`."""
    rates = RATES | declared_rates(summaries.values())
    users = set(user_metrics(list(summaries.values())))
    columns = default_columns(list(summaries.values())) if columns is None else columns
    table = Table(title=title, padding=0)  # the rules keep the cells apart: a 150-column log keeps every header
    table.add_column(label)
    table.add_column("n", justify="right")
    columns = [(key, header) for key, header in columns
               if key not in OPTIONAL or any(s.get(key) is not None for s in summaries.values())]
    for _, header in columns:
        table.add_column(header, justify="right")
    for name, summary in summaries.items():
        cells = []
        for key, _ in columns:
            value = summary.get(key)
            if value is None:
                cells.append("–")
            elif key in users:
                cells.append(f"{value:.3f}")
            elif key in rates or key in RANKING or key.startswith("recall@"):
                cells.append(f"{100 * value:.1f}")
            else:
                cells.append(f"{value:.1f}" if key != "seconds" else f"{value:.2f}")
        errors = f" ({summary['errors']} err)" if summary.get("errors") else ""
        table.add_row(name, f"{summary['questions']}{errors}", *cells)
    return table


class EndpointDownError(RuntimeError):
    """The LM endpoint failed on :data:`MAX_ENDPOINT_FAILURES` questions in a row."""


GROWING = frozenset({"questions", "count", "limit"})  # what a rerun over a superset of the questions may change


def run_manifest(program: dspy.Module, examples: Sequence[dspy.Example], judge_lm: dspy.BaseLM | None = None,
                 **extra) -> dict:
    """What makes an evaluation folder's rows mean something: the program and its settings, the LM (its model
    string keys the engine, decoding and weights; ``lm_settings`` its cap, temperature and the server it is reached at,
    :func:`~multihop.lm.backends.lm_api_base`), the judge, the questions (their ids, so a limit counts), and what
    the caller adds (``extra``: a data file's checksum, a compiled program's, a retriever's); and the checksums of the
    files its settings name (``program.setting_files()``: a classifier folder, labels), when it has any, so a file
    rewritten under the same name is another run; a user's program given by its import path records it
    (``import_path``)."""
    lm = dspy.settings.lm
    settings = {"max_tokens": lm.kwargs.get("max_tokens"), "temperature": lm.kwargs.get("temperature"),
                "api_base": lm_api_base(lm)} if lm else None
    files = program.setting_files() if hasattr(program, "setting_files") else {}
    path = type(program).__dict__.get("_import_path")  # a user's program, given as package.module:ClassName
    imported = {"import_path": path} if path else {}
    return {"program": type(program).__name__, "config": program.config() if hasattr(program, "config") else None,
            "lm": getattr(lm, "model", None), "lm_settings": settings, "judge": getattr(judge_lm, "model", None),
            "questions": questions_hash(examples), "count": len(examples),
            **({"setting_files": files} if files else {}), **imported, **extra}


def questions_hash(examples: Sequence[dspy.Example]) -> str:
    """What a run manifest keys its questions by: their ids, in order."""
    return hashlib.sha256("\n".join(str(example.id) for example in examples).encode()).hexdigest()[:16]


def evaluate(
    program: dspy.Module,
    examples: Sequence[dspy.Example],
    out_dir: str | Path,
    threads: int = 1,
    progress: bool = True,
    name: str | None = None,
    console: Console | None = None,
    judge_lm: dspy.BaseLM | None = None,
    manifest: dict | None = None,
    keep_errors: bool = False,
    metric: Callable | Mapping[str, Callable] | None = None,
    retriever: Callable | None = None,
) -> dict:
    """Evaluate ``program`` on ``examples``, writing rows and traces to ``out_dir`` as they finish; returns the summary.

    The folder is locked while the run writes (:func:`multihop.data.folders.locked`) and keeps the run's manifest:
    rerunning with the same manifest resumes, rerunning on more questions of the same run (a larger ``--limit``:
    every recorded question among them, nothing else changed) extends it, keeping the recorded rows and asking only
    the new questions, and another is refused. When the LM endpoint fails on :data:`MAX_ENDPOINT_FAILURES` questions
    in a row the run stops (``EndpointDownError``) without recording them, so a rerun retries them. A program that
    reads more of an example than its question (an oracle's gold label) says so with ``prepare_examples(examples)``,
    applied first. :func:`evaluate_all` runs several evaluations through one pool; :func:`aevaluate` is this run for
    asyncio code, with these parameters.

    Args:
        program: the program, any ``dspy.Module``.
        examples: the questions (``dspy.Example`` with an ``id`` and a ``question``, and the gold fields the metrics
            read).
        out_dir: the run's folder (``results.jsonl``, ``traces/``, ``summary.json``, the manifest).
        threads: questions run at once, each in a copy of the caller's context, so ``dspy.context(...)`` settings and
            traces stay per question.
        progress: show a progress bar.
        name: the program's name in the summary and on the bar (default: its class name).
        console: where the summary's table is printed (None: not printed).
        judge_lm: an LM that judges each answer (LLM Eval in each row), outside the program's trace.
        manifest: what the run's rows mean (default: :func:`run_manifest`), compared when the folder is run again.
        keep_errors: on a rerun, keep the questions that ended in an error instead of retrying them.
        metric: a DSPy metric ``fn(example, prediction, trace=None)`` or ``{name: fn}``, recorded in each row's
            ``metrics`` under its name and averaged in the summary; its names are part of the run's manifest.
        retriever: the retriever the questions run with as ``dspy.settings.rm``: what ``dspy.Retrieve`` searches in
            any module (a multihop retriever answers with its passages' ids, recorded with the row) and what a
            multihop program given no retriever searches; None: the caller's ``dspy.settings.rm``.
    """
    evaluation = Evaluation(program, examples, out_dir, name, judge_lm, manifest, keep_errors, metric=metric,
                            retriever=retriever)
    return _shown(evaluate_all([evaluation], threads, progress)[0], console)


def signature_of(function: Callable, **renamed: tuple[str, object]) -> Callable:
    """A decorator giving the decorated function ``function``'s parameters, those in ``renamed`` (``old=(new,
    default)``) under another name and default, as the signature ``help()``, IDEs and the docs site show
    (docs/hooks/docstrings.py reads this decorator). The decorated function names the parameters it takes
    positionally (the renamed ones among them) and takes the others by keyword as ``**options``, checked against
    that signature by :func:`bound_options`."""
    signature = inspect.signature(function)

    def decorate(decorated: Callable) -> Callable:
        own = inspect.signature(decorated).parameters
        parameters = [parameter.replace(name=renamed[parameter.name][0], default=renamed[parameter.name][1])
                      if parameter.name in renamed else parameter if parameter.name in own
                      else parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                      for parameter in signature.parameters.values()]
        decorated.__signature__ = signature.replace(parameters=parameters)
        return decorated

    return decorate


def bound_options(function: Callable, /, **arguments) -> dict:
    """The ``arguments`` of a call of ``function`` (decorated with :func:`signature_of`) by name, with the defaults of
    those not given; a name its signature does not take is a ``TypeError``, as in any call."""
    bound = inspect.signature(function).bind(**arguments)
    bound.apply_defaults()
    return bound.arguments


def _shown(summary: dict, console: Console | None) -> dict:
    if console is not None:
        console.print(render_table({summary["program"]: summary}))
    return summary


@dataclass
class Evaluation:
    """One evaluation of :func:`evaluate_all`: what :func:`evaluate` takes, and the ``context`` its questions run in
    (``contextvars.copy_context()`` taken inside its ``dspy.context(...)``; None: the caller's)."""

    program: dspy.Module
    examples: Sequence[dspy.Example]
    out_dir: str | Path
    name: str | None = None
    judge_lm: dspy.BaseLM | None = None
    manifest: dict | None = None
    keep_errors: bool = False
    context: contextvars.Context | None = None
    metric: Callable | Mapping[str, Callable] | None = None
    retriever: Callable | None = None


def evaluate_all(evaluations: Sequence[Evaluation], threads: int = 1, progress: bool = True) -> list[dict]:
    """Run several evaluations as :func:`evaluate` runs one, every question of every one through one pool of
    ``threads`` (``multihop compare``: the programs run together, and one that finishes early leaves its threads to
    the others), each in its evaluation's context; returns their summaries in order. Each folder's rows are those of
    its evaluation run alone. An error or an interrupt cancels every question not yet started."""
    contexts = [evaluation.context or contextvars.copy_context() for evaluation in evaluations]
    with ExitStack() as stack:
        bar = None if len(evaluations) == 1 else stack.enter_context(
            tqdm(total=sum(len(e.examples) for e in evaluations), desc="evaluating", unit="q", disable=not progress))
        runs = [context.run(stack.enter_context, EvaluationRun(e.program, e.examples, e.out_dir, progress, e.name,
                                                               e.judge_lm, e.manifest, e.keep_errors, bar, e.metric,
                                                               e.retriever))
                for e, context in zip(evaluations, contexts, strict=True)]
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            futures = {pool.submit(context.copy().run, run_question, run.program, example, run.judge, run.metrics,
                                   run.retriever): run
                       for run, context in zip(runs, contexts, strict=True) for example in run.todo}
            try:
                for future in as_completed(futures):
                    futures[future].record(*future.result())
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    return [run.summary for run in runs]


@signature_of(evaluate, threads=("in_flight", 8))
async def aevaluate(program: dspy.Module, examples: Sequence[dspy.Example], out_dir: str | Path, in_flight: int = 8,
                    **options) -> dict:
    """:func:`evaluate` for asyncio code (a server that hosts a program), with the same parameters, documented there,
    but ``in_flight`` in place of ``threads`` (the options after it by keyword): ``in_flight`` questions at once
    under a semaphore, each awaited as ``program.acall`` awaits a call (:func:`~multihop.runtime.tracing.in_worker`),
    with the same rows, traces, resumption and stops. The folder's lock, the manifest and the summary are written
    off the event loop.

    Args:
        in_flight: questions awaited at once.
    """
    options = bound_options(aevaluate, program=program, examples=examples, out_dir=out_dir, in_flight=in_flight,
                            **options)
    console, in_flight = options.pop("console"), options.pop("in_flight")
    run = EvaluationRun(**options)
    await asyncio.to_thread(run.__enter__)
    gate = asyncio.Semaphore(max(1, in_flight))

    async def answer(example: dspy.Example) -> tuple[dict, list[dict]]:
        async with gate:
            return await in_worker(run_question, program, example, run.judge, run.metrics, run.retriever)

    tasks = [asyncio.ensure_future(answer(example)) for example in run.todo]
    try:
        for finished in asyncio.as_completed(tasks):
            await asyncio.to_thread(run.record, *await finished)  # the row and trace writes block
    except BaseException as exc:
        for task in tasks:
            task.cancel()
        await asyncio.to_thread(run.__exit__, type(exc), exc, exc.__traceback__)
        raise
    await asyncio.to_thread(run.__exit__, None, None, None)
    return _shown(run.summary, console)


class EvaluationRun:
    """One evaluation in its locked folder: the questions still to answer (``todo``), each finished row and trace
    recorded as it comes (:meth:`record`), and the summary (:meth:`finish`)."""

    def __init__(self, program, examples, out_dir, progress, name, judge_lm, manifest, keep_errors, bar=None,
                 metric=None, retriever=None):
        require_module(program, "evaluate")
        prepare = getattr(program, "prepare_examples", None)
        self.program, self.examples = program, prepare(examples) if prepare is not None else examples
        self.out, self.name, self.judge_lm, self.keep_errors = Path(out_dir), name, judge_lm, keep_errors
        self.manifest, self.progress = manifest, progress
        self.judge = LLMJudge(judge_lm) if judge_lm is not None else None
        self.metrics = metric_functions(metric)
        self.retriever = retriever  # dspy.settings.rm while a question runs
        self.streak: list[tuple[dict, list]] = []
        self.summary: dict = {}
        self.shared_bar = bar  # several runs' progress on one bar (evaluate_all)

    def __enter__(self) -> EvaluationRun:
        self._lock = locked(self.out)
        self._lock.__enter__()
        try:
            self._open()
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def _open(self) -> None:
        out, examples = self.out, self.examples
        recorded = read_rows(out / RESULTS)
        if not recorded:  # nothing recorded yet (or a run that stopped before any row): a new run
            (out / RUN_MANIFEST).unlink(missing_ok=True)
        asked = {str(example.id): example.question for example in examples}
        superset = all(asked.get(qid) == row.get("question") for qid, row in recorded.items())  # the same questions
        manifest = self.manifest or run_manifest(self.program, examples, self.judge_lm)
        if self.metrics:  # other metrics make another run
            manifest = {**manifest, "metrics": sorted(self.metrics)}
        if check_run(out / RUN_MANIFEST, manifest,
                     kind="evaluation", growing=GROWING if superset else frozenset()):
            logger.info("%s: the run grows from %d recorded questions to %d", out, len(recorded), len(examples))
        self.rows = resumable_rows(out / RESULTS, self.keep_errors)
        self.todo = [ex for ex in examples if ex.id not in self.rows]
        (out / "traces").mkdir(parents=True, exist_ok=True)
        self.sink = open(out / RESULTS, "a", encoding="utf-8")  # noqa: SIM115 - closed by __exit__
        if self.shared_bar is not None:
            self.bar = self.shared_bar
            self.bar.update(len(examples) - len(self.todo))
        else:
            self.bar = tqdm(total=len(examples), initial=len(examples) - len(self.todo),
                            desc=self.name or "evaluating", unit="q", disable=not self.progress)

    def record(self, row: dict, trace: list[dict]) -> None:
        """Keep a finished question; rows of a streak of endpoint failures wait until a question succeeds, and are
        dropped when the streak stops the run (``EndpointDownError``)."""
        self.streak.append((row, trace))
        self.bar.update(1)
        if row.get("endpoint_error"):
            if len(self.streak) >= MAX_ENDPOINT_FAILURES:
                self.streak, streak = [], self.streak
                raise EndpointDownError(
                    f"the LM endpoint failed on {len(streak)} questions in a row (last: {row['error'][:200]}); "
                    "they are not recorded, so a rerun retries them")
            return
        self._write_streak()

    def _write_streak(self) -> None:
        for row, trace in self.streak:  # rows are written by one thread only, as they finish
            atomic_write_text(trace_path(self.out, row["id"]), json.dumps(jsonable(trace), indent=1))
            append_row(self.sink, row)
            self.rows[row["id"]] = row
        self.streak = []

    def __exit__(self, kind, error, traceback_) -> None:
        try:
            if kind is None:
                self._write_streak()  # the run ended before the streak grew long: keep its rows
            if self.shared_bar is None:
                self.bar.close()
            self.sink.close()
            if kind is None:
                self.summary = summarize([self.rows[ex.id] for ex in self.examples if ex.id in self.rows],
                                         getattr(self.program, "count_display", {}), list(self.metrics))
                self.summary["program"] = self.name or type(self.program).__name__
                atomic_write_text(self.out / SUMMARY, json.dumps(self.summary, indent=2))
        finally:
            self._lock.__exit__(kind, error, traceback_)


def resumable_rows(path: Path, keep_errors: bool) -> dict[str, dict]:
    """The rows a rerun keeps, one per id (the latest); rows that ended in an error are dropped from the file (and so
    retried) unless ``keep_errors``."""
    rows = read_rows(path)
    kept = rows if keep_errors else {qid: row for qid, row in rows.items() if not row.get("error")}
    if path.exists() and len(kept) != sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line):
        atomic_write_text(path, rows_text(kept.values()))
    return dict(kept)
