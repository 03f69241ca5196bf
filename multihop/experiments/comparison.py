"""One comparison of the methods and the baselines on the same data, retriever, LM and budget (``multihop compare``,
``multihop.compare``).

Every program named (default: every declared program compared by default — the five methods, ``NoRetrieval``,
``SingleStepRAG``, IRCoT, FLARE and MetaRAG —, ``PROGRAMS.compared_by_default()``) runs over each dev set (by
name, MuSiQue, HotpotQA and 2Wiki in ``MULTIHOP_DATA``, or a question file) through the resumable evaluation, one
folder per dataset × program under the output folder (``<dataset>/<program>/``): a rerun skips the finished questions
and adding a program runs only that program. Each dataset has one retriever, shared by every program: its IRCoT
corpus (the paragraphs of the whole dev file) indexed once, dense (MPNet by default, keeping the last layer's token
states so the programs' late-interaction rerankers read them instead of encoding candidates again, and every compared
program's query markers as special tokens, which no passage contains) or BM25. Each program keeps its own reranker,
a part of its method.

The budget (:class:`~multihop.experiments.budget.Budget`) is recorded with the results. Under the paper's budget
(``mode="paper"``, ``--budget paper``) each program runs as its paper ran it: its defaults and the settings its method
declares (``Declaration(paper_settings=...)``), recorded per program. Under the shared one (the default) it is applied
wherever a program has the knob: ``k`` passages per retrieval (every retrieving program's ``k``), ``max_iterations``
(the setting each method declares as its loop budget, ``Declaration(loop_budget=...)``; a program that declares none
does not loop) and ``max_tokens`` per LM call (the LM's cap, so every stage of every program). A program's ``student``
(a ``multihop distill`` folder) runs the stages it learnt. Each program's LM has a rollout id of its own, so no program
is served another's replies from the cache and its tokens and seconds are its own.

Each dataset's programs are then tested against one reference program (the first row of its table, or the one named)
on the same questions, one paired test per metric (:func:`paired_runs`). Then the table (``comparison.json``,
``comparison.md``, the papers' numbers beside ours, every mean with its interval, the paired tests), the charts and
``report.html`` are written into the output folder (:mod:`multihop.experiments.comparison`,
:mod:`multihop.experiments.charts`, :mod:`multihop.experiments.report`).

Past one machine (ours, not the papers'): with ``ray`` every (program, dataset) run's questions are answered by Ray
tasks (:func:`~multihop.evaluation.ray_cluster.ray_evaluate_all`), each building its program in the worker from
:func:`worker_program` — the LM travels as its options and is made there, the index as its folder — into the same
folders, rows and tables; with ``shard`` (``"i/n"``) the run takes every n-th question of each dataset from the i-th
into shard run folders, and records its arguments (:mod:`multihop.experiments.shard_runs`) so that ``multihop merge``
joins the n shard folders into the comparison one run writes.
"""

from __future__ import annotations

import contextvars
import dataclasses
import zlib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import dspy
from rich.console import Console

from multihop.data.folders import sha256_file
from multihop.data.jsonl import read_rows
from multihop.data.loaders import load_dataset
from multihop.data.question_sets import DATASETS, question_file
from multihop.evaluation.intervals import paired_test, paired_values
from multihop.evaluation.ray_cluster import ray_evaluate_all, worker_lm, worker_student
from multihop.evaluation.runner import RESULTS, Evaluation, evaluate_all, run_manifest
from multihop.evaluation.sharding import parse_shard, shard_manifest, shard_of
from multihop.experiments.budget import Budget, budget_knobs, paper_settings, program_under_budget
from multihop.experiments.charts import write_charts
from multihop.experiments.program_indexes import program_retriever
from multihop.experiments.report import write_report
from multihop.experiments.shard_runs import record_shard
from multihop.experiments.tables import (
    budget_text,
    console_tables,
    dataset_table,
    knobs_text,
    paper_row,
    summary_row,
    tested_metrics,
    write_table,
)
from multihop.lm.adapter import default_adapter
from multihop.lm.backends import make_lm
from multihop.lm.models import embedded_notice
from multihop.lm.options import LMOptions, served_student
from multihop.optimize.student_stages import use_student
from multihop.programs import PROGRAMS, takes_retriever
from multihop.retrievers import CACHED_FIRST_STAGES, load_retriever


def rollout(name: str) -> int:
    """A program's own rollout id (stable across runs, so a resumed run still finds its own cached replies)."""
    return zlib.crc32(name.encode()) % 1_000_000 + 1


def compare(
    out: str | Path,
    programs: Sequence[str] | None = None,
    datasets: Sequence[str] = DATASETS,
    lm: LMOptions | str | None = None,
    budget: Budget | None = None,
    students: Mapping[str, str | Path] | None = None,
    first_stage: str = "dense",
    encoder: str = "mpnet",
    limit: int | None = None,
    threads: int = 1,
    judge_lm: str | dspy.BaseLM | None = None,
    progress: bool = True,
    console: Console | None = None,
    corpus: str | Path | None = None,
    retriever: str | Path | None = None,
    metric: Callable | Mapping[str, Callable] | None = None,
    reference: str | None = None,
    shard: str | tuple[int, int] | None = None,
    ray: str | None = None,
) -> dict:
    """Compare ``programs`` (default: :meth:`~multihop.programs.registry.ProgramRegistry.compared_by_default`) on the
    dev sets ``datasets`` under one ``budget`` (default :class:`Budget`\\ ()) and write
    the table, charts and report into ``out``; returns the comparison (what ``comparison.json`` holds).

    ``lm`` is an LM spec or :class:`LMOptions` (then DSPy is configured with it, capped at ``budget.max_tokens``), or
    None for the LM DSPy is configured with. ``students`` maps a program to a ``multihop distill`` folder, a LoRA
    adapter of ``lm`` (which must then be a spec or options), or to a served student ``SPEC[@DIR]``
    (:func:`~multihop.lm.options.served_student`: ``openai/<lora-name>`` on the run's server). ``limit``: the first
    N questions of each set; ``threads``: questions at once, of every program and dataset (one pool); ``judge_lm``
    adds LLM Eval. ``console`` prints the budget and the tables. ``corpus`` (a corpus or question file, indexed once
    by ``first_stage``) or ``retriever`` (a saved retriever folder) is the one index every program and dataset
    searches, instead of each dev file's own paragraphs (passage ids are content hashes, so the gold paragraphs of
    the dev files are found in a corpus that holds them); each program runs with its index as ``dspy.settings.rm``,
    which ``dspy.Retrieve`` searches in a program of the user's own. ``metric`` (a DSPy metric or ``{name: fn}``) is
    recorded in every run beside the built-in metrics and shown as a column
    (:func:`multihop.evaluation.runner.evaluate`).
    ``reference`` is the program every other is tested against on each dataset (default: the first row of each
    dataset's table, :func:`paired_tests`). ``shard`` (``"i/n"`` or ``(i, n)``): every n-th question of each dataset
    from the i-th only, into shard run folders that ``multihop merge`` joins (``lm`` then a spec or options, so that
    the merge makes it again). ``ray`` (``auto`` or a cluster's address): the questions answered (judged, scored) by
    Ray tasks, ``threads`` of them at once.
    """
    if corpus is not None and retriever is not None:
        raise ValueError("give compare a --corpus to index or a --retriever folder, not both")
    budget = budget or Budget()
    names = list(PROGRAMS.compared_by_default() if programs is None else programs)
    names = [PROGRAMS.named(name) if isinstance(name, str) else name for name in names]
    students = {PROGRAMS.named(name): folder for name, folder in (students or {}).items()}
    reference = PROGRAMS.named(reference) if reference else None
    check_choices(names, students, first_stage, reference)
    files = dev_files(datasets)
    sharded = parse_shard(shard) if isinstance(shard, str) else shard
    if students and lm is None:
        raise ValueError("students adapt the LM given as a spec: pass lm=<spec> (or LMOptions) with students")
    options, base, judge = run_lms(lm, budget.max_tokens, judge_lm)
    student_lms = {name: options.student(adapter) for name, adapter in students.items()}
    applied = {**budget.as_dict(), "max_tokens": base.kwargs.get("max_tokens")}
    if budget.mode == "paper":  # k and max_iterations are each program's own: not a setting of this run
        del applied["k"], applied["max_iterations"]
    out = Path(out)
    if sharded:
        users_paths = {name: PROGRAMS[name].__dict__.get("_import_path") for name in names}
        record_shard(out, "compare", sharded, {
            "programs": [users_paths[name] or name for name in names],
            "datasets": [key if key in DATASETS else str(Path(files[key]).resolve()) for key in files],
            "lm": options, "budget": dataclasses.asdict(budget), "students": {n: str(f) for n, f in students.items()},
            "first_stage": first_stage, "encoder": encoder, "limit": limit, "judge_lm": judge_lm,
            "corpus": corpus, "retriever": retriever, "metric": metric, "reference": reference})
    comparison: dict = {
        "budget": applied, "lm": base.model, "judge": getattr(judge, "model", None),
        "notice": embedded_notice(base.model),
        "retriever": {"first_stage": first_stage, "encoder": encoder if first_stage == "dense" else None,
                      "indexes": {}},
        "datasets": {}, "programs": {}, "runs": [], "rows": [], "paired": {}, "papers": [], "charts": [],
    }
    # a program of the user's own (package.module:ClassName) may search dspy.settings.rm with dspy.Retrieve
    users = {name for name in names if PROGRAMS[name].__dict__.get("_import_path")}
    retrieving = any(takes_retriever(PROGRAMS[name]) for name in names) or bool(users)
    given = load_retriever(retriever) if retrieving and retriever is not None else None  # every program's index
    loaded = {}  # index folder → its retriever, shared by the programs (and, over --corpus, datasets) that read it
    runs = []  # (dataset, program name, program, its questions, its question file, its index and retriever), in
    # table order
    for key, path in files.items():
        every = load_dataset(path, limit=limit)
        examples = shard_of(every, *sharded) if sharded else every
        comparison["datasets"][key] = {"file": str(path), "questions": len(examples),
                                       "ids": [str(example.id) for example in examples]}
        indexes = {}  # by pooling: each program reads the index pooled as its class asks (CoopRAG's [CLS])
        for name in names:
            searched, index = None, None
            if given is not None:
                searched, index = given, Path(retriever)
            elif retrieving:
                searched, index = program_retriever(name, corpus or path, encoder, first_stage, progress=progress,
                                                    loaded=loaded)
            pooling = PROGRAMS[name].index_pooling if first_stage == "dense" else "mean"
            indexes.setdefault(pooling, str(index) if index else None)
            runs.append((key, name, program_under_budget(name, searched, budget), examples, path, index, searched,
                         every))
        comparison["retriever"]["indexes"][key] = indexes

    evaluations, recipes = [], []
    for key, name, program, examples, path, index, searched, every in runs:
        with dspy.context(lm=base.copy(rollout_id=rollout(name)), rm=searched):  # what dspy.Retrieve searches
            weights = None
            if name in students:
                student, weights = student_lms[name]
                use_student(program, student.copy(rollout_id=rollout(name)), served_student(students[name])[1])
            manifest = run_manifest(program, every, judge, data_sha256=sha256_file(path)[:16], limit=limit,
                                    retriever=index.name if index and (takes_retriever(type(program)) or
                                                                       name in users) else None,
                                    student=weights, budget=applied)
            if sharded:
                manifest = shard_manifest(manifest, every, *sharded)
            recipes.append(partial(worker_program, name, PROGRAMS[name].__dict__.get("_import_path"),
                                   str(Path(index).resolve()) if index is not None and searched is not None else None,
                                   budget, options or base, str(students[name]) if name in students else None,
                                   rollout(name), None if options else dspy.settings.adapter))
            evaluations.append(Evaluation(program, examples, out / key / name, name=name, judge_lm=judge,
                                          manifest=manifest, context=contextvars.copy_context(), metric=metric))
    # every program's questions go through one pool of --threads: one that finishes early leaves its threads to the
    # others (each folder's rows are those of its program run alone)
    if ray:
        summaries = ray_evaluate_all(evaluations, recipes, address=ray, workers=threads, progress=progress)
    else:
        summaries = evaluate_all(evaluations, threads, progress)
    for (key, name, program, *_), summary in zip(runs, summaries, strict=True):
        knobs = ({"paper_settings": paper_settings(name, budget.paper)} if budget.mode == "paper"
                 else {"budget": budget_knobs(name)})
        info = {"kind": PROGRAMS.declaration(name).kind, **knobs, "config": program.config(),
                "student": str(students[name]) if name in students else None}
        path = type(program).__dict__.get("_import_path")  # a user's program, given as package.module:ClassName
        if path:
            info["import_path"] = path
        comparison["programs"].setdefault(name, info)
        comparison["runs"].append({"dataset": key, "program": name, "folder": f"{key}/{name}"})
        comparison["rows"].append(summary_row(key, name, summary))
    comparison["paired"] = paired_tests(out, comparison, reference)
    comparison["papers"] = [paper_row(result) for name in names for result in PROGRAMS.declaration(name).papers
                            if result.dataset in comparison["datasets"]]
    comparison["charts"] = [chart.name for chart in write_charts(out, comparison["rows"])]
    table, markdown = write_table(out, comparison)
    report = write_report(out, comparison)
    if console is not None:
        if comparison["notice"]:
            console.print(f"[yellow]note:[/yellow] {comparison['notice']}")
        console.print(f"budget: {budget_text(applied)}\nbudget knobs: {knobs_text(comparison['programs'])}")
        for rich_table in console_tables(comparison):
            console.print(rich_table)
        console.print(f"table: {markdown} ({table.name})  charts: {', '.join(comparison['charts'])}  report: {report}")
    return comparison


def worker_program(name: str, import_path: str | None, index: str | None, budget: Budget,
                   lm: LMOptions | dspy.BaseLM, student: str | None, rollout_id: int, adapter=None) -> tuple:
    """What a Ray worker of ``compare --ray`` runs one (program, dataset) with: program ``name`` (a user's, imported
    by its ``import_path``) under ``budget`` on the index folder ``index`` (None: no retriever), its LM made here from
    the run's options (an LM object, when the run is given none, as it is) with the program's ``rollout_id``, its
    ``student`` (a ``--student`` value) on its stages; and the DSPy settings it runs under: that LM, the adapter
    (the LM's own, else ``adapter``) and the index as ``rm``."""
    if import_path:
        PROGRAMS.named(import_path)
    searched = load_retriever(index) if index else None
    program = program_under_budget(name, searched, budget)
    base = worker_lm(lm) if isinstance(lm, LMOptions) else lm
    if student is not None:
        student_lm, _ = worker_student(lm, student)
        use_student(program, student_lm.copy(rollout_id=rollout_id), served_student(student)[1])
    adapter = default_adapter(base) if isinstance(lm, LMOptions) else adapter
    return program, {"lm": base.copy(rollout_id=rollout_id), "adapter": adapter, "rm": searched}


def run_rows(folder: str | Path, ids: Sequence[str] | None = None) -> list[dict]:
    """The rows of an evaluation folder (of the questions ``ids`` only, in their order, given them)."""
    found = read_rows(Path(folder) / RESULTS, repair=False)
    return list(found.values()) if ids is None else [found[qid] for qid in ids if qid in found]


def paired_runs(reference: str | Path, other: str | Path, metric: str, ids: Sequence[str] | None = None,
                seed: int = 0) -> dict:
    """The paired test of two evaluation folders on ``metric``: ``other`` minus ``reference`` on the questions both
    answered and both have a value for (of ``ids`` only, given them): the mean difference, its 95% paired bootstrap
    interval, the two-sided p-value and the questions paired
    (:func:`~multihop.evaluation.intervals.paired_test`)."""
    return paired_test(*paired_values(run_rows(reference, ids), run_rows(other, ids), metric), seed=seed)


def paired_tests(out: Path, comparison: dict, reference: str | None = None) -> dict:
    """Per dataset of ``comparison``, each program's paired tests against ``reference`` (default: the first row of the
    dataset's table) on every share and user metric the table shows, from the runs' rows under ``out``:
    ``{dataset: {"reference", "metrics", "programs": {program: {metric: test}}}}``."""
    paired = {}
    for dataset, info in comparison["datasets"].items():
        ours = dataset_table(comparison, dataset)[0]
        folders = {run["program"]: out / run["folder"] for run in comparison["runs"] if run["dataset"] == dataset}
        rows = {program: run_rows(folder, info["ids"]) for program, folder in folders.items()}
        base = reference or ours[0]["program"]
        metrics = tested_metrics(ours)
        paired[dataset] = {"reference": base, "metrics": metrics, "programs": {
            row["program"]: {metric: paired_test(*paired_values(rows[base], rows[row["program"]], metric))
                             for metric in metrics}
            for row in ours if row["program"] != base}}
    return paired


def run_lms(lm: LMOptions | str | None, max_tokens: int | None, judge_lm: str | dspy.BaseLM | None = None
            ) -> tuple[LMOptions | None, dspy.BaseLM, dspy.BaseLM | None]:
    """The LM options, the base LM every program of a run copies (with a rollout id of its own) and the judge: ``lm``
    a spec or options (DSPy is then configured with it, capped at ``max_tokens``), or None for the LM DSPy is
    configured with; ``judge_lm`` a spec (made with the run's options) or an LM."""
    options = LMOptions(lm=lm) if isinstance(lm, str) else lm
    if options is not None:
        options = dataclasses.replace(options, max_tokens=max_tokens or options.max_tokens)
        base = options.configure()
    elif dspy.settings.lm is None:
        raise ValueError("no LM: pass lm=<spec> or dspy.configure(lm=...) first")
    else:
        base = dspy.settings.lm.copy(max_tokens=max_tokens) if max_tokens else dspy.settings.lm
    judge = ((options.make(judge_lm) if options else make_lm(judge_lm)) if isinstance(judge_lm, str) else judge_lm)
    return options, base, judge


def dev_files(datasets: Sequence[str]) -> dict[str, Path]:
    """The question file of each dataset (a dev set's name, or a file) by the name its rows and folders take: the
    dev set's, or the file's stem."""
    files = {}
    for dataset in datasets:
        path = question_file(dataset, "dev")
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such question file; give a dev set ({', '.join(DATASETS)}) or a "
                                    "question file")
        key = dataset if dataset in DATASETS else path.stem
        if key in files:
            raise ValueError(f"two datasets are named {key!r}: give each once (rename a question file)")
        files[key] = path
    return files


def check_choices(names: list, students: dict, first_stage: str, reference: str | None = None) -> None:
    """Refuse programs given as anything but their names, unknown or repeated programs, students of programs not
    compared, a reference program not compared and an unknown first stage."""
    objects = [type(name).__name__ for name in names if not isinstance(name, str)]
    if objects:
        raise TypeError(f"compare takes program names (e.g. {', '.join(PROGRAMS)}), not a {objects[0]}")
    unknown = [name for name in names if name not in PROGRAMS]
    if unknown:
        raise ValueError(f"unknown program(s) {', '.join(unknown)}; choose from {', '.join(PROGRAMS)}")
    if not names or len(set(names)) != len(names):
        raise ValueError(f"name each program to compare once (got {', '.join(names) or 'none'})")
    stray = sorted(set(students) - set(names))
    if stray:
        raise ValueError(f"a student for {', '.join(stray)}, which is not compared; compared: {', '.join(names)}")
    if reference is not None and reference not in names:
        raise ValueError(f"the reference program {reference} is not compared; compared: {', '.join(names)}")
    if first_stage not in CACHED_FIRST_STAGES:
        raise ValueError(f"unknown first stage {first_stage!r}; choose one of {', '.join(CACHED_FIRST_STAGES)}")
