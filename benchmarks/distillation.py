"""What distillation gains: the embedded LM alone vs with its gold-trained LoRA student, per stage and end to end,
on dev questions no student was trained on.

    python benchmarks/distillation.py --student DIR [--data musique 2wiki hotpotqa] [--per-stage 8] [--limit 20]

Table 1, per program and stage (:mod:`multihop.optimize.stage_comparison`): the dev questions' gold targets
(:func:`multihop.optimize.gold_targets.gold_targets`, the same builders that trained the student, here on
held-apart questions) are sent to the stage as the program would send them, once on the base LM and once on the
student; the table gives the share of replies the adapter could not parse (format failures) and the stage score
(:mod:`multihop.optimize.stage_scores`: sub-question overlap with the gold decomposition, chain completion accuracy,
verdict accuracy, question or answer F1). At most ``--per-stage`` targets per stage and dataset.

Table 2, end to end on MuSiQue dev (the first ``--limit`` questions; ComposeRAG, which makes ~15 calls a question,
the first ``--compose-limit``): EM/F1/Acc/R@5 of SingleStepRAG, CoopRAG and ComposeRAG on the base LM and with the
student on every stage it was trained for (``set_stage_lm``), with one retriever (MPNet [CLS] + RaLa Eq. 4 over the
questions' paragraphs, CoopRAG's own retriever). Stages that write only the answer are capped at
``--answer-tokens``, the others at ``--max-tokens``. Evaluations resume from ``--out``; LM calls are cached by DSPy.
The student is any ``multihop distill`` folder (``make bench-distillation`` measures the shipped one); "The shipped
student" in docs/concepts/students.md gives the command that builds it, and in docs/measurements.md the measured
tables."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import dspy
from rich.console import Console

from multihop.data.loaders import load_questions, questions_with_corpus
from multihop.evaluation.runner import evaluate, render_table
from multihop.lm import models
from multihop.lm.options import LMOptions
from multihop.optimize.distill import MANIFEST
from multihop.optimize.stage_comparison import per_stage, stage_table
from multihop.optimize.student_stages import trained_stages
from multihop.programs import ComposeRAG, CoopRAG, SingleStepRAG
from multihop.retrievers import RaLa, RerankedRetriever, build_cached, load_retriever

console = Console(width=160)
PROGRAMS = {"SingleStepRAG": SingleStepRAG, "CoopRAG": CoopRAG, "ComposeRAG": ComposeRAG}


def answer_only(predictor: dspy.Predict) -> bool:
    return set(predictor.signature.output_fields) == {"answer"}


def stage_lms(program: dspy.Module, lm: dspy.LM, short: dspy.LM) -> dict[str, dspy.LM]:
    """The LM each stage runs on: ``short`` (the answer cap) for the stages that write only the answer."""
    return {stage: short if answer_only(predictor) else lm for stage, predictor in program.named_predictors()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--student", required=True, help="a `multihop distill` adapter folder")
    parser.add_argument("--data", nargs="+", default=["musique", "2wiki", "hotpotqa"], help="dev sets per stage")
    parser.add_argument("--per-stage", type=int, default=8, help="gold targets per stage and dataset")
    parser.add_argument("--limit", type=int, default=20, help="MuSiQue dev questions end to end")
    parser.add_argument("--compose-limit", type=int, default=6, help="of them for ComposeRAG")
    LMOptions.add_arguments(parser, max_tokens=256)
    parser.add_argument("--answer-tokens", type=int, default=64, help="generation cap of the answer-only stages")
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=list(PROGRAMS))
    parser.add_argument("--skip-e2e", action="store_true", help="the per-stage table only")
    parser.add_argument("--out", default="runs/bench-distillation", help="evaluation folders (a rerun resumes)")
    args = parser.parse_args()

    options = LMOptions.from_args(args)
    base, base_short = options.configure(), options.make(max_tokens=args.answer_tokens)
    student_options = dataclasses.replace(options, adapter=args.student)
    student, student_short = student_options.make(), student_options.make(max_tokens=args.answer_tokens)
    trained = json.loads((Path(args.student) / MANIFEST).read_text())
    weights = models.sha256_file(Path(args.student) / "adapter_model.safetensors")[:8]  # keys the resumed runs
    console.print(f"student {args.student}: stages {', '.join(trained['stages'])}, {trained['rows']} rows, "
                  f"{trained['seconds']} s of training")

    results: dict[tuple[str, str], dict] = {}
    began = time.perf_counter()
    for name in args.programs:
        program = PROGRAMS[name]()
        lms = {"base": stage_lms(program, base, base_short), "student": stage_lms(program, student, student_short)}
        for dataset in args.data:
            scored = per_stage(program, load_questions(dataset), lms, args.per_stage, options.default_adapter())
            if scored:
                results[(name, dataset)] = scored
    console.print(stage_table(results))
    console.print(f"per-stage calls took {time.perf_counter() - began:.0f} s")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stages.json").write_text(json.dumps([{"program": p, "dataset": d, "stage": s, "model": m, **row}
                                                 for (p, d), rows in results.items() for (s, m), row in rows.items()],
                                                indent=2))
    if args.skip_e2e:
        return

    examples, corpus = questions_with_corpus("musique", limit=args.limit)
    first = load_retriever(build_cached(corpus, token_layers=(), special_tokens=CoopRAG.special_tokens,
                                        pooling=CoopRAG.index_pooling))
    retriever = RerankedRetriever(first, RaLa("eq4"), n=20, k=5)
    summaries = {}
    for name in args.programs:
        questions = examples[: args.compose_limit] if name == "ComposeRAG" else examples
        for model, (lm, short) in {"base": (base, base_short), "student": (student, student_short)}.items():
            program = PROGRAMS[name](retriever=retriever)
            own, base_lms = stage_lms(program, lm, short), stage_lms(program, base, base_short)
            chosen = trained_stages(program, args.student) if model == "student" else []
            for stage in program.stage_names():  # the student only where it was trained; the base LM elsewhere
                program.set_stage_lm(stage, own[stage] if stage in chosen else base_lms[stage])
            label = f"{name} ({model})"
            folder = f"{name}-{model}" + (f"-{weights}" if model == "student" else "")
            summaries[label] = evaluate(program, questions, out / folder, name=label)
    console.print(render_table(summaries, title=f"End to end on MuSiQue dev with {base.model}: base vs student"))


if __name__ == "__main__":
    main()
