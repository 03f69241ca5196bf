"""Commands that run a program: evaluate it on a question set, or answer one question with a saved one."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from multihop.benchmarks.common import LMOptions
from multihop.cli.console import console
from multihop.cli.options import DEV_QUESTIONS, lm_options, question_path
from multihop.cli.programs import ProgramOptions, program_options
from multihop.cli.traces import print_trace


@lm_options()
@program_options()
def eval_cmd(
    lm: LMOptions,
    spec: ProgramOptions,
    data: str = typer.Option(..., help=f"questions to evaluate: {DEV_QUESTIONS}"),
    out: Path = typer.Option(..., help="output folder (rerun to resume)"),
    load: Path = typer.Option(None, help="a compiled program folder from `multihop compile` (instead of --program)"),
    limit: int = typer.Option(None, help="first N questions only", min=1),
    threads: int = typer.Option(1, help="questions evaluated at once", min=1),
    judge_lm: str = typer.Option(None, help="an LM that judges each answer (LLM Eval, ComposeRAG §5.1)"),
    keep_errors: bool = typer.Option(False, help="on a rerun, keep the rows that ended in an error instead of "
                                     "retrying them"),
):
    """Evaluate a program on a question file; prints the metrics table and saves rows, traces and summary. A rerun
    into the same folder resumes the same run (another program, LM, data or limit is refused) and retries the
    questions that ended in an error."""
    from multihop.data import load_dataset
    from multihop.evaluation import evaluate, run_manifest

    lm.configure()
    judge = lm.make(judge_lm) if judge_lm else None
    data_file = question_path(data, "dev")
    examples = load_dataset(data_file, limit=limit)
    if load:
        from multihop.programs import load as load_program
        from multihop.programs.saved import read_manifest

        instance, retriever = load_program(load), read_manifest(load).get("retriever")
    else:
        instance, retriever = spec.build(data_file)
    manifest = run_manifest(instance, examples, judge, data_sha256=checksum(data_file), limit=limit,
                            compiled=folder_checksum(load), retriever=folder_checksum(retriever))
    evaluate(instance, examples, out, threads=threads, name=type(instance).__name__, console=console, judge_lm=judge,
             manifest=manifest, keep_errors=keep_errors)
    console.print(f"rows: {out / 'results.jsonl'}  traces: {out / 'traces'}")


def checksum(path: Path | None) -> str | None:
    """A file's short sha256 for a run manifest, or None when there is no such file."""
    from multihop.models import sha256_file

    return sha256_file(path)[:16] if path and Path(path).is_file() else None


def folder_checksum(folder: str | Path | None) -> str | None:
    """A saved folder's short checksum for a run manifest: its list of files with their sha256 (its manifest when
    it was saved without one), or None."""
    from multihop.folders import INVENTORY

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
