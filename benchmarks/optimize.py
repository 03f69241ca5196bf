"""Optimization benchmark: prompt optimizers and LoRA distillation on real MuSiQue questions with local LMs.

    python benchmarks/optimize.py [--train FILE] [--val FILE] [--limit-train 10] [--limit-val 10]
                                  [--teacher local:qwen-coder-0.5b] [--prompt-lm SPEC] [--optimizers bootstrap,mipro]

Table 1: SingleStepRAG (MPNet index over the questions' paragraphs) scored on the validation questions before and
after each optimizer, with the compile time; MIPROv2, SIMBA and GEPA write instructions with ``--prompt-lm`` (default:
the teacher — SmolLM2-135M cannot follow MIPROv2's proposer signatures).

Table 2: a teacher runs SingleStepRAG over the train questions, its ``answer``-stage trajectories are split 75/25, a
LoRA student (SmolLM2-135M, HANRAG preset) is trained on the first part, and on the held-out rows the student's output
is compared with the teacher's (exact and token F1) before and after the adapter, with training time and examples per
second. Every row of the teacher is kept (``min_score=0``):
reproduction of the teacher is measured, not correctness.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from multihop.data.loaders import build_corpus, load_questions
from multihop.evaluation.metrics import f1
from multihop.lm.backends import chat_request
from multihop.lm.options import LMOptions
from multihop.optimize.compile import compile_program, validation_score
from multihop.optimize.distill import DistillConfig, distill
from multihop.optimize.trajectories import collect
from multihop.programs import SingleStepRAG
from multihop.retrievers import build_cached, load_retriever

console = Console(width=150)


def prompt_table(args, options: LMOptions, retriever) -> Table:
    train = load_questions(args.train, "train", limit=args.limit_train)
    val = load_questions(args.val, "dev", limit=args.limit_val)
    options.configure()
    table = Table(title=f"SingleStepRAG, {len(train)} train / {len(val)} validation questions, LM {args.lm}")
    for column in ("optimizer", "val F1", "val EM", "compile s", "demos", "new instruction"):
        table.add_column(column, justify="left" if column == "optimizer" else "right")
    prompt_lm = options.make(args.prompt_lm or args.teacher, max_tokens=256)
    base = SingleStepRAG(retriever=retriever)
    table.add_row("none", f"{validation_score(base, val, 'f1'):.1f}", f"{validation_score(base, val, 'em'):.1f}",
                  "-", "0", "no")
    for name in args.optimizers.split(","):
        start = time.perf_counter()
        try:
            compiled = compile_program(SingleStepRAG(retriever=retriever), train, optimizer=name, metric="f1",
                                       prompt_lm=prompt_lm)
        except Exception as exc:  # a benchmark reports a failing optimizer and goes on
            table.add_row(name, "failed", type(exc).__name__, f"{time.perf_counter() - start:.0f}", str(exc)[:40])
            continue
        seconds = time.perf_counter() - start
        demos = sum(len(p.demos) for _, p in compiled.named_predictors())
        rewritten = compiled.answer.signature.instructions != base.answer.signature.instructions
        table.add_row(name, f"{validation_score(compiled, val, 'f1'):.1f}",
                      f"{validation_score(compiled, val, 'em'):.1f}", f"{seconds:.0f}", str(demos),
                      "yes" if rewritten else "no")
    return table


def reproduction(lm, rows: list[dict]) -> tuple[float, float]:
    """Share of rows whose output equals the teacher's completion, and mean token F1 against it (0–100)."""
    outputs = [lm(chat_request(lm, row["messages"])).text.strip() for row in rows]
    exact = sum(out == row["completion"].strip() for out, row in zip(outputs, rows, strict=True))
    overlap = sum(f1(out, [row["completion"]]) for out, row in zip(outputs, rows, strict=True))
    return 100 * exact / len(rows), 100 * overlap / len(rows)


def distill_table(args, options: LMOptions, retriever, work: Path) -> Table:
    train = load_questions(args.train, "train", limit=args.distill_questions)
    teacher = options.configure(args.teacher, max_tokens=64)
    start = time.perf_counter()
    collect(SingleStepRAG(retriever=retriever), train, work / "traj", teacher_lm=teacher, metric="f1", min_score=0.0)
    teacher_s = time.perf_counter() - start
    rows = [json.loads(line) for line in (work / "traj" / "answer.jsonl").read_text().splitlines()]
    cut = max(1, int(len(rows) * 0.75))
    (work / "fit.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows[:cut]))
    held_out = rows[cut:]
    before = reproduction(options.make(max_tokens=64), held_out)
    config = DistillConfig.preset("hanrag", epochs=args.epochs, batch_size=2)
    adapter = distill([work / "fit.jsonl"], work / "adapter", config)
    manifest = json.loads((adapter / "distill.json").read_text())
    after = reproduction(dataclasses.replace(options, adapter=str(adapter)).make(max_tokens=64), held_out)
    table = Table(title=f"LoRA student ({args.lm}) reproducing teacher {args.teacher} on {len(held_out)} held-out "
                        f"answer-stage rows ({cut} trained, {args.epochs} epochs; teacher run {teacher_s:.0f} s)")
    for column in ("student", "exact %", "token F1", "train s", "examples/s", "final loss"):
        table.add_column(column, justify="left" if column == "student" else "right")
    table.add_row("before LoRA", f"{before[0]:.1f}", f"{before[1]:.1f}", "-", "-", "-")
    table.add_row("after LoRA", f"{after[0]:.1f}", f"{after[1]:.1f}", f"{manifest['seconds']:.0f}",
                  f"{manifest['examples_per_second']:.2f}", f"{manifest['final_loss']:.3f}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", default="musique", help="train question file or dataset name (default: MuSiQue)")
    parser.add_argument("--val", default="musique", help="validation question file or dataset name (its dev file)")
    parser.add_argument("--limit-train", type=int, default=10)
    parser.add_argument("--limit-val", type=int, default=10)
    parser.add_argument("--optimizers", default="bootstrap,mipro")
    LMOptions.add_arguments(parser, max_tokens=32)  # the program LM and the distillation student
    parser.add_argument("--teacher", default="local:qwen-coder-0.5b")
    parser.add_argument("--prompt-lm", default=None, help="LM that writes instructions (default: --teacher)")
    parser.add_argument("--distill-questions", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--parts", default="prompt,distill", help="which tables to produce")
    args = parser.parse_args()
    options = LMOptions.from_args(args)
    questions = load_questions(args.train, "train", limit=max(args.limit_train, args.distill_questions))
    questions += load_questions(args.val, "dev", limit=args.limit_val)
    retriever = load_retriever(build_cached(build_corpus(questions)))  # MPNet, cached under MULTIHOP_HOME
    if "prompt" in args.parts:
        console.print(prompt_table(args, options, retriever))
    if "distill" in args.parts:
        console.print(distill_table(args, options, retriever, Path(tempfile.mkdtemp(prefix="multihop-distill-"))))


if __name__ == "__main__":
    main()
