"""Commands that run a program: evaluate it on a question set, compare programs on the dev sets, or answer one question
with a saved one."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections import Counter
from functools import partial
from pathlib import Path

import typer

from multihop.cli.config import configurable
from multihop.cli.programs import ProgramOptions, program_options, run_retriever
from multihop.cli.shared_options import MlflowOptions, mlflow_options
from multihop.cli.traces import print_trace
from multihop.data.question_sets import DATASETS, DEV_QUESTIONS, question_path
from multihop.lm.models import embedded_notice
from multihop.lm.options import LMOptions, lm_options
from multihop.runtime.console import console

SHARD_HELP = ("i/n: run every n-th question of each dataset from the i-th only (1-based) into --out, a shard of the "
              "run split over machines; `multihop merge OUT SHARD_DIR...` joins the n folders into the folder one run "
              "writes, tables included")
RAY_HELP = ("answer the questions on Ray tasks (--threads at once, each a few questions of one run, its program built "
            "in the worker): auto (RAY_ADDRESS's cluster, else a local one) or a cluster address; needs Ray "
            "(multihop's ray extra)")


@configurable()
@lm_options()
@program_options()
@mlflow_options()
def eval_cmd(
    lm: LMOptions,
    spec: ProgramOptions,
    mlflow: MlflowOptions,
    data: str = typer.Option(..., help=f"questions to evaluate: {DEV_QUESTIONS}"),
    out: Path = typer.Option(..., help="output folder (rerun to resume)"),
    load: Path = typer.Option(None, help="a compiled program folder from `multihop compile` (instead of --program)"),
    limit: int = typer.Option(None, help="first N questions only", min=1),
    threads: int = typer.Option(1, help="questions evaluated at once", min=1),
    judge_lm: str = typer.Option(None, help="an LM that judges each answer (LLM Eval, ComposeRAG §5.1)"),
    keep_errors: bool = typer.Option(False, help="on a rerun, keep the rows that ended in an error instead of "
                                     "retrying them"),
    shard: str = typer.Option(None, help="i/n: evaluate every n-th question from the i-th only (1-based), for a run "
                              "split over machines; `multihop merge` joins the n folders"),
    ray: str = typer.Option(None, help="answer the questions on Ray tasks (`--threads` at once): auto (RAY_ADDRESS's "
                            "cluster, else a local one) or a cluster address; needs Ray (multihop's ray extra)"),
    trec_run: Path = typer.Option(None, "--trec-run", help="write the run's retrievals to this file as a TREC run "
                                  "(qid Q0 docid rank score tag: the passages each question read, in order), and the "
                                  "questions' gold passages beside it as TREC qrels (.qrels), for ranx or trec_eval"),
    metric: list[str] = typer.Option(None, "--metric", help="module:function, a DSPy metric fn(example, prediction, "
                                     "trace=None) importable from the current folder, recorded beside the built-in "
                                     "metrics (repeatable)"),
    allow_errors: bool = typer.Option(False, help="exit 0 even when questions ended in an error (their count and "
                                      "the first error are still printed)"),
):
    """Evaluate a program on a question file; prints the metrics table and saves rows, traces and summary. A rerun
    into the same folder resumes the same run (another program, LM, data or limit is refused) and retries the
    questions that ended in an error. Exits 3 when some questions ended in an error and 4 when every one did, with a
    line counting them by type and the first one's message (--allow-errors: 0)."""
    from multihop.data.loaders import load_dataset
    from multihop.evaluation.runner import evaluate, render_table, run_manifest
    from multihop.evaluation.sharding import parse_shard, shard_manifest, shard_of

    if ray and mlflow.uri:
        console.print("[yellow]note:[/yellow] questions answered on Ray are logged to MLflow without traces")
    metrics = import_metrics(metric)
    sharded = parse_shard(shard) if shard else None
    notice = embedded_notice(lm.configure().model)
    if notice:
        console.print(f"[yellow]note:[/yellow] {notice}")
    judge = lm.make(judge_lm) if judge_lm else None
    data_file = question_path(data, "dev")
    examples = load_dataset(data_file, limit=limit)
    if load:
        from multihop.programs import load as load_program
        from multihop.programs.saved import read_manifest

        instance, retriever = load_program(load), read_manifest(load).get("retriever")
        if retriever:
            console.print(f"[yellow]note:[/yellow] {load} searches the index it was compiled with ({retriever}); "
                          "to search another, compile against it (--retriever)")
    else:
        instance, retriever = spec.build(data_file)
    manifest = run_manifest(instance, examples, judge, data_sha256=checksum(data_file), limit=limit,
                            compiled=folder_checksum(load), retriever=folder_checksum(retriever))
    if sharded:
        manifest, examples = shard_manifest(manifest, examples, *sharded), shard_of(examples, *sharded)
    with mlflow.run(type(instance).__name__) as logging:
        if ray:
            from multihop.evaluation.ray_cluster import ray_evaluate

            absolute = {name: str(Path(value).resolve()) for name in ("retriever", "corpus")  # the actors' folders
                        if (value := getattr(spec, name)) and Path(value).exists()}
            recipe = partial(worker_program, lm, dataclasses.replace(spec, **absolute), Path(data_file).resolve(),
                             load.resolve() if load else None)
            summary = ray_evaluate(instance, recipe, examples, out, workers=threads, address=ray,
                                   name=type(instance).__name__, manifest=manifest, keep_errors=keep_errors,
                                   judge_lm=judge, metric=metrics or None)
            console.print(render_table({summary["program"]: summary}))
        else:
            summary = evaluate(instance, examples, out, threads=threads, name=type(instance).__name__,
                               console=console, judge_lm=judge, manifest=manifest, keep_errors=keep_errors,
                               metric=metrics or None, retriever=run_retriever(instance, retriever))
        if logging:
            from multihop.evaluation.mlflow_runs import log_outcome

            log_outcome(manifest, summary, out)
    console.print(f"rows: {out / 'results.jsonl'}  traces: {out / 'traces'}")
    if trec_run:
        from multihop.evaluation.results import write_trec_files

        run_file, qrels = write_trec_files(out, examples, trec_run, tag=type(instance).__name__)
        console.print(f"TREC run: {run_file}  qrels: {qrels}")
    exit_on_errors({summary.get("program", str(out)): summary}, allow_errors)


def worker_program(lm: LMOptions, spec: ProgramOptions, data_file: Path, load: Path | None) -> tuple:
    """What a Ray worker of ``eval --ray`` answers with: the program the driver evaluates, built in the worker (a
    compiled folder loaded, or the program and its index from the options), and its DSPy settings: its LM's, and the
    run's retriever as ``rm`` (:func:`~multihop.cli.programs.run_retriever`)."""
    from multihop.lm.adapter import default_adapter

    if load:
        from multihop.programs import load as load_program
        from multihop.programs.saved import read_manifest

        program, folder = load_program(load), read_manifest(load).get("retriever")
    else:
        program, folder = spec.build(data_file)
    made = lm.make()
    return program, {"lm": made, "adapter": default_adapter(made), "rm": run_retriever(program, folder)}


@configurable()
@lm_options()
@mlflow_options()
def compare_cmd(
    lm: LMOptions,
    mlflow: MlflowOptions,
    out: Path = typer.Option(..., help="output folder: an evaluation folder per dataset and program, the table, the "
                             "charts and report.html (rerun to resume; name another program to run only it)"),
    programs: str = typer.Option(None, help="programs to compare, comma-separated (default: every method declared to "
                                 "be compared by default, and the baselines); a program of your own as "
                                 "package.module:ClassName"),
    datasets: str = typer.Option(",".join(DATASETS), help="dev sets, comma-separated: dataset names "
                                 f"({', '.join(DATASETS)}) or question files"),
    budget: str = typer.Option("shared", help="shared: every program gets --k and --max-iterations; paper: each runs "
                               "with its own paper's settings (k, loop caps); paper:METHOD (paper:DualRAG): each as "
                               "that method's paper ran it (its tables' rows), recorded in the table"),
    k: int = typer.Option(5, "--k", min=1, help="budget: passages per retrieval, for every program"),
    max_iterations: int = typer.Option(4, min=1, help="budget: rounds of each program's loop (the setting its method "
                                       "declares as its loop budget)"),
    student: list[str] = typer.Option(None, "--student", help="PROGRAM=ADAPTER_DIR: run the stages that student "
                                      "learnt (a `multihop distill` folder) in that program; PROGRAM=SPEC\\[@DIR]: a "
                                      "served student (openai/<lora-name> on --api-base, the stages its DIR learnt, "
                                      "else every stage) (repeatable)"),
    first_stage: str = typer.Option("dense", help="the first stage every program shares"),
    encoder: str = typer.Option("mpnet", help="encoder of the shared dense index"),
    corpus: Path = typer.Option(None, exists=True, dir_okay=False, help="one corpus (or question) file every program "
                                "and dataset searches, indexed once by --first-stage (default: each dev file's own "
                                "paragraphs)"),
    retriever: Path = typer.Option(None, exists=True, file_okay=False, help="one saved retriever folder (`multihop "
                                   "index build`) every program and dataset searches"),
    limit: int = typer.Option(None, help="first N questions of each dev set", min=1),
    threads: int = typer.Option(1, help="questions evaluated at once", min=1),
    judge_lm: str = typer.Option(None, help="an LM that judges each answer (LLM Eval, ComposeRAG §5.1)"),
    metric: list[str] = typer.Option(None, "--metric", help="module:function, a DSPy metric fn(example, prediction, "
                                     "trace=None) importable from the current folder, recorded beside the built-in "
                                     "metrics (repeatable)"),
    reference: str = typer.Option(None, help="the program every other is tested against on the same questions (the "
                                  "paired tests; default: the first row of each dataset's table)"),
    shard: str = typer.Option(None, help=SHARD_HELP),
    ray: str = typer.Option(None, help=RAY_HELP),
    allow_errors: bool = typer.Option(False, help="exit 0 even when questions ended in an error (their count and "
                                      "the first error are still printed)"),
):
    """Compare programs on the same dev sets, retriever, LM and budget (--k, --max-iterations and --max-tokens, the
    cap of every LM call; --budget paper: each program's own paper's settings instead of --k and --max-iterations;
    program names as the papers write them work too, e.g. Iter-RetGen): prints the budget and the tables, and writes
    comparison.md/.json, the charts and report.html (every question's answers and stage traces) into --out. A rerun
    resumes. Exits 3 when questions of some run ended in an error and 4 when every question did (--allow-errors:
    0)."""
    from multihop.experiments.budget import Budget
    from multihop.experiments.comparison import compare

    # each program's own rollout id keys its cache entries apart; DSPy warns that it leaves greedy replies the same
    warnings.filterwarnings("ignore", message="rollout_id has no effect", category=UserWarning)
    students = student_pairs(student)
    metrics = import_metrics(metric)
    with mlflow.run("compare") as logging:
        comparison = compare(
            out, programs=[name.strip() for name in programs.split(",") if name.strip()] if programs else None,
            datasets=[name.strip() for name in datasets.split(",") if name.strip()], lm=lm,
            budget=Budget.parse(budget, k=k, max_iterations=max_iterations, max_tokens=lm.max_tokens),
            students=students, first_stage=first_stage, encoder=encoder, limit=limit, threads=threads,
            judge_lm=judge_lm, console=console, corpus=corpus, retriever=retriever, metric=metrics or None,
            reference=reference, shard=shard, ray=ray)
        if logging:
            from multihop.evaluation.mlflow_runs import log_outcome

            settings = {key: comparison[key] for key in ("budget", "lm", "judge", "retriever", "programs")}
            log_outcome(settings, {f"{row['dataset']}.{row['program']}": row for row in comparison["rows"]}, out)
    exit_on_errors(run_summaries(out), allow_errors)


@configurable()
@lm_options()
def reproduce_cmd(
    lm: LMOptions,
    paper: str = typer.Argument(None, help="the method whose paper's tables to run (CoopRAG, DualRAG, ComposeRAG, "
                                "HANRAG, CIRAG); with --list, all papers when left out"),
    tables: list[str] = typer.Argument(None, help="more tables of the paper, after it or after --table "
                                       "(`reproduce CoopRAG --table 3 5 19`)", show_default=False),
    table: list[str] = typer.Option(None, "--table", help="a table of the paper: 2, 'Table 2', 'Fig. 5', 'App. E' "
                                    "(repeatable; default: every declared table)"),
    list_tables: bool = typer.Option(False, "--list", help="show the papers' tables, their rows and which run here"),
    datasets: str = typer.Option(None, help="dev sets, comma-separated, of those the tables report "
                                 f"({', '.join(DATASETS)}; default: all of them)"),
    limit: int = typer.Option(None, help="first N questions of each dev set", min=1),
    out: Path = typer.Option(None, help="output folder: each table's .md/.json, and per table its rows' evaluation "
                             "folders, report and charts (rerun to resume; default: runs/reproduce-<paper>)"),
    threads: int = typer.Option(1, help="questions evaluated at once, of every row", min=1),
    encoder: str = typer.Option("mpnet", help="encoder of the dense indexes"),
    judge_lm: str = typer.Option(None, help="an LM that judges each answer (LLM Eval)"),
    student: list[str] = typer.Option(None, "--student", help="PROGRAM=ADAPTER_DIR (a `multihop distill` folder) or "
                                      "PROGRAM=SPEC\\[@DIR] (a served student): the rows that run stages of PROGRAM on "
                                      "a student run those stages on it; PROGRAM@PAPER_LM=...: for the rows of a "
                                      "paper LM you mapped with --lm-for (repeatable)"),
    metric: list[str] = typer.Option(None, "--metric", help="module:function, a DSPy metric fn(example, prediction, "
                                     "trace=None) importable from the current folder, recorded beside the built-in "
                                     "metrics (repeatable)"),
    lm_for: list[str] = typer.Option(None, "--lm-for", help="PAPER_LM=SPEC: the rows (and stages) the paper ran on "
                                     "PAPER_LM run on SPEC (repeatable; a \\[lm-for] table in --config); rows of an LM "
                                     "of their own left unmapped run once on --lm, labelled with it"),
    artifact: list[str] = typer.Option(None, "--artifact", help="NAME=DIR or NAME@DATASET=DIR: an artifact the rows "
                                       "need (a fine-tuned encoder, a classifier, a triple cache; --list names "
                                       "them), for every dataset or one (repeatable)"),
    build: bool = typer.Option(False, "--build", help="make every missing artifact that can be made here (under "
                               "OUT/artifacts, resumable) before the rows run"),
    build_limit: int = typer.Option(None, min=2, help="--build: train questions of each dataset (default: all; "
                                    "the paper's scale wants a GPU)"),
    first_stage: str = typer.Option(None, help="dense or bm25 for every row that does not name its own first stage "
                                    "(default: each table's)"),
    shard: str = typer.Option(None, help=SHARD_HELP),
    ray: str = typer.Option(None, help=RAY_HELP),
    allow_errors: bool = typer.Option(False, help="exit 0 even when questions ended in an error (their count and "
                                      "the first error are still printed)"),
):
    """Run a paper's results tables again: every declared row a program here runs, with the settings the paper gave
    it, on the dev sets the table reports; prints and writes each table as the paper prints it, ours beside the
    paper's number in every cell (and the difference). Rows that need what cannot run here show the paper's number
    alone, with the reason. A rerun resumes. Exits 3 when questions of some row ended in an error and 4 when every
    question did (--allow-errors: 0)."""
    from multihop.experiments.reproduce import describe_tables, paper_of, reproduce, select_tables
    from multihop.programs import PROGRAMS

    if list_tables:
        methods = [paper_of(paper)] if paper else [m for m in PROGRAMS.declared("method") if m.tables]
        wanted = [*(table or ()), *(tables or ())]
        chosen = {table.number for table in select_tables(methods[0], wanted)} if paper and wanted else None
        for info in describe_tables(methods):
            if chosen is not None and info["table"] not in chosen:
                continue
            states = Counter(row["state"] for row in info["rows"] if not row["stand_in"])
            console.print(f"[bold]{info['paper']} {info['table']}[/bold]: {info['title']} — datasets "
                          f"{', '.join(info['datasets'])} (run here: {', '.join(info['runs_on']) or 'none'}); rows: "
                          + ", ".join(f"{count} {state}" for state, count in states.items()))
            for row in info["rows"]:
                settings = ", ".join(f"{key}={value}" for key, value in row["settings"].items())
                why = f": {row['why_not'] or '; '.join(row['substitutes'])}" if row["why_not"] or row["substitutes"] \
                    else ""
                lm = f" on {row['lm']}" if row["lm"] and not row["stand_in"] else ""
                console.print(f"    {row['label']}{lm}: {row['program']}({settings})  [dim]({row['state']}{why})[/dim]")
        return
    if paper is None:
        raise typer.BadParameter("give a PAPER (CoopRAG, DualRAG, ComposeRAG, HANRAG, CIRAG), or --list")
    metrics = import_metrics(metric)
    out = out or Path("runs") / f"reproduce-{paper_of(paper).name.lower()}"
    warnings.filterwarnings("ignore", message="rollout_id has no effect", category=UserWarning)
    reproduce(paper, out, tables=[*(table or ()), *(tables or ())] or None, lm=lm, limit=limit, threads=threads,
              encoder=encoder,
              datasets=[name.strip() for name in datasets.split(",") if name.strip()] if datasets else None,
              judge_lm=judge_lm, console=console, students=student_pairs(student), metric=metrics or None,
              lm_for=key_values(lm_for, "--lm-for", "PAPER_LM=SPEC"),
              artifacts=key_values(artifact, "--artifact", "NAME[@DATASET]=DIR"), build=build, build_limit=build_limit,
              first_stage=first_stage, shard=shard, ray=ray)
    exit_on_errors(reproduced_summaries(out), allow_errors)


def reproduced_summaries(out: Path) -> dict[str, dict]:
    """The summaries of the rows that ran in the tables ``out/reproduce.json`` lists, by run."""
    index = out / "reproduce.json"
    tables = json.loads(index.read_text(encoding="utf-8"))["tables"] if index.is_file() else []
    summaries: dict[str, dict] = {}
    for table in tables:
        summaries.update(run_summaries(out / Path(table["report"]).parent))
    return summaries


def run_summaries(folder: Path) -> dict[str, dict]:
    """The summaries of the runs a comparison in ``folder`` lists (its ``comparison.json``), by run folder (resolved:
    a run two tables share is one entry); a run without a summary is left out."""
    from multihop.evaluation.runner import SUMMARY
    from multihop.experiments.tables import TABLE_JSON

    table = Path(folder) / TABLE_JSON
    if not table.is_file():
        return {}
    summaries = {}
    for run in json.loads(table.read_text(encoding="utf-8")).get("runs", []):
        path = (Path(folder) / run["folder"]).resolve()
        if (path / SUMMARY).is_file():
            summaries[str(path)] = json.loads((path / SUMMARY).read_text(encoding="utf-8"))
    return summaries


def exit_on_errors(summaries: dict[str, dict], allow_errors: bool = False) -> None:
    """End a command whose runs (their summaries, by name) finished with errored questions: one line on stderr
    counting the errors by type with the first one's message, and exit code :data:`~multihop.cli.errors.ERRORED`
    (some questions) or :data:`~multihop.cli.errors.ALL_ERRORED` (every question); with ``allow_errors`` the line is
    a warning and the command exits 0. Runs without errors: nothing."""
    import sys

    from multihop.cli.errors import ALL_ERRORED, ERRORED

    errored = {name: summary for name, summary in summaries.items() if summary.get("errors")}
    if not errored:
        return
    questions = sum(summary.get("questions", 0) for summary in summaries.values())
    errors = sum(summary["errors"] for summary in errored.values())
    kinds: Counter = Counter()
    for summary in errored.values():
        kinds.update(summary.get("error_types") or {})
    name, summary = next(iter(errored.items()))
    first = " ".join(str(summary.get("first_error") or "").split())
    first = first if len(first) <= MAX_ERROR_CHARS else first[:MAX_ERROR_CHARS - 1] + "…"
    where = f"{'/'.join(Path(name).parts[-2:])} " if len(summaries) > 1 else ""  # a run folder as dataset/row
    text = (f"{errors} of {questions} questions ended in an error ("
            + ", ".join(f"{kind}: {count}" for kind, count in kinds.most_common()) + f"); the first: {where}{first}")
    if allow_errors:
        print(f"warning: {text}", file=sys.stderr)
        return
    print(f"error: {text} (--allow-errors exits 0)", file=sys.stderr)
    raise typer.Exit(ALL_ERRORED if errors == questions else ERRORED)


MAX_ERROR_CHARS = 300  # of the first error's message on the errors' line


def import_metrics(specs: list[str] | None) -> dict:
    """The metrics of ``--metric module:function`` options, by function name, each imported with the current folder
    on ``sys.path``; a spec that does not name an importable function is one line."""
    import importlib
    import os
    import sys

    from multihop.evaluation.runner import metric_functions

    metrics = {}
    for spec in specs or ():
        module_name, _, function = spec.partition(":")
        if not module_name or not function:
            raise typer.BadParameter(f"--metric {spec!r}: give module:function (e.g. my_metrics:answer_match)")
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            fn = getattr(importlib.import_module(module_name), function)
        except ImportError as exc:
            raise typer.BadParameter(f"--metric {spec!r}: cannot import {module_name} ({exc})") from None
        except AttributeError:
            raise typer.BadParameter(f"--metric {spec!r}: {module_name} has no {function}") from None
        if function in metrics:
            raise typer.BadParameter(f"--metric {spec!r}: a metric named {function} is already given")
        metrics[function] = fn
    try:
        return metric_functions(metrics)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def key_values(pairs: list[str] | None, option: str, form: str) -> dict[str, str]:
    """The ``KEY=VALUE`` values of a repeatable option, by key (a value may hold ``=``; a key given twice is
    refused)."""
    values = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise typer.BadParameter(f"takes {form}, got {pair!r}", param_hint=option)
        if key.strip() in values:
            raise typer.BadParameter(f"{key.strip()} is given twice", param_hint=option)
        values[key.strip()] = value.strip()
    return values


def student_pairs(pairs: list[str] | None) -> dict[str, str]:
    """``--student PROGRAM=ADAPTER_DIR`` / ``PROGRAM=SPEC[@DIR]`` values by program."""
    return key_values(pairs, "--student", "PROGRAM=ADAPTER_DIR or PROGRAM=SPEC[@DIR]")


def checksum(path: Path | None) -> str | None:
    """A file's short sha256 for a run manifest, or None when there is no such file."""
    from multihop.data.folders import sha256_file

    return sha256_file(path)[:16] if path and Path(path).is_file() else None


def folder_checksum(folder: str | Path | None) -> str | None:
    """A saved folder's short checksum for a run manifest: its list of files with their sha256 (its manifest when
    it was saved without one), or None."""
    from multihop.data.folders import INVENTORY

    if not folder:
        return None
    folder = Path(folder)
    return checksum(folder / INVENTORY) or checksum(folder / "manifest.json")


@lm_options()
def ask_cmd(
    lm: LMOptions,
    question: str = typer.Argument(...),
    load: Path = typer.Option(..., exists=True, file_okay=False, help="a compiled program folder"),
):
    """Answer one question with a saved program and print its stage trace."""
    from multihop.programs import load as load_program

    lm.configure()
    prediction = load_program(load)(question=question)
    print_trace(prediction.stage_trace)
    console.print(f"[bold]answer:[/bold] {prediction.answer!r}")
    console.print(json.dumps({k: v for k, v in prediction.counts.items() if k != "passage_ids"}))


def merge_cmd(
    out: Path = typer.Argument(..., help="folder to write the merged run into"),
    shards: list[Path] = typer.Argument(..., help="the folders of `multihop eval|compare|reproduce --shard i/n`, one "
                                        "per shard"),
):
    """Join the folders of a run made in shards (`multihop eval|compare|reproduce --shard i/n`) into the folder one
    unsharded run writes: the rows, traces, run manifests and summaries, and for compare and reproduce their tables,
    charts and reports (the command run again on the merged folder, where every question is answered: it needs the
    shards' question files, indexes and LM spec, and asks the LM nothing; questions that ended in an error are
    counted in a warning). Shards of different runs, a missing or repeated shard and an unfinished one are
    refused."""
    from multihop.evaluation.runner import render_table
    from multihop.evaluation.sharding import merge_shards
    from multihop.experiments.shard_merge import merge_shard_runs
    from multihop.experiments.shard_runs import is_shard_run

    if any(is_shard_run(folder) for folder in shards):
        warnings.filterwarnings("ignore", message="rollout_id has no effect", category=UserWarning)
        merged = merge_shard_runs(out, shards, console=console)
        console.print(f"{len(shards)} shards → {out}")
        exit_on_errors(run_summaries(out) if "rows" in merged else reproduced_summaries(out), allow_errors=True)
        return
    summary = merge_shards(out, shards)
    console.print(render_table({summary["program"]: summary}))
    console.print(f"{len(shards)} shards, {summary['questions']} questions → {out}")

