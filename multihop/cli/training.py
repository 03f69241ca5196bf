"""Commands that train any program: compile it with a DSPy optimizer, record teacher trajectories, distill a LoRA
student. A method's own training steps (CoopRAG's encoder fine-tuning, DualRAG's SFT rows, ...) are its package's
command-line module, declared with the method (``Declaration(cli=...)``) and mounted as ``multihop <method>``."""

from __future__ import annotations

from pathlib import Path

import click
import typer

from multihop.cli.config import configurable
from multihop.cli.programs import ProgramOptions, program_options, run_retriever
from multihop.data.question_sets import DEV_QUESTIONS, TRAIN_QUESTIONS, file_info, question_path
from multihop.lm.options import LMOptions, lm_options
from multihop.runtime.console import console


@configurable(after=True)
@lm_options()
@program_options()
def compile_cmd(
    lm: LMOptions,
    spec: ProgramOptions,
    data: str = typer.Option(..., help=f"train questions: {TRAIN_QUESTIONS}"),
    out: Path = typer.Option(..., help="folder to save the compiled program into"),
    optimizer: str = typer.Option("bootstrap", help="the DSPy optimizer"),
    val: str = typer.Option(None, help=f"validation questions (scores before/after): {DEV_QUESTIONS}"),
    val_limit: int = typer.Option(20, help="validation questions used", min=1),
    metric: str = typer.Option("f1", help="em, f1, acc, cover_em or recall@K"),
    limit: int = typer.Option(20, help="train questions used", min=1),
    seed: int = typer.Option(0),
    prompt_lm: str = typer.Option(None, help="LM that writes instructions / reflects (MIPROv2, SIMBA, GEPA)"),
    teacher_lm: str = typer.Option(None, help="LM that runs the program while bootstrapping demos"),
    threads: int = typer.Option(1, min=1, help="questions run at once by the validation and the optimizers that "
                                "evaluate in threads (for a served LM)"),
):
    """Compile a program with a DSPy optimizer on a train split and save it (DSPy state + manifest)."""
    import dspy

    from multihop.data.folders import locked
    from multihop.data.loaders import load_dataset
    from multihop.optimize.compile import compile_program
    from multihop.programs import save

    with locked(out):  # from the start: a second compile into the folder stops at once
        lm.configure()
        data_file = question_path(data, "train")
        val_file = question_path(val, "dev") if val else None
        trainset = load_dataset(data_file, limit=limit)
        valset = load_dataset(val_file, limit=val_limit) if val_file else None
        instance, retriever_path = spec.build(data_file)
        other = {name: lm.make(spec) if spec else None
                 for name, spec in (("prompt_lm", prompt_lm), ("teacher_lm", teacher_lm))}
        with dspy.context(rm=run_retriever(instance, retriever_path)):  # what dspy.Retrieve searches
            compiled = compile_program(instance, trainset, optimizer=optimizer, metric=metric, valset=valset,
                                       seed=seed, threads=threads, **other)
        report = compiled.compile_report
        files = {"train": file_info(data_file, trainset),
                 **({"val": file_info(val_file, valset)} if val_file else {})}
        save(compiled, out, retriever=retriever_path, lm=lm.lm, prompt_lm=prompt_lm, teacher_lm=teacher_lm,
             data=files, **report)
    demos = {name: len(p.demos) for name, p in compiled.named_predictors()}
    scores = f", val {metric} {report['val_before']:.1f} → {report['val_after']:.1f}" if valset else ""
    console.print(f"compiled {spec.program} with {optimizer} ({demos} demos{scores}) → {out}")
    if report.get("unchanged"):
        console.print(f"[yellow]the validation {metric} did not change[/yellow]")


@lm_options("--teacher-lm", "--lm", help="the teacher LM: local:smollm2, local:<path>, or a dspy.LM model string")
@program_options()
def trajectories_cmd(
    lm: LMOptions,
    spec: ProgramOptions,
    data: str = typer.Option(..., help=f"train questions: {TRAIN_QUESTIONS}"),
    out: Path = typer.Option(..., help="folder for one JSON-lines file per stage"),
    load_dir: Path = typer.Option(None, "--load", help="a compiled program folder (instead of --program)"),
    metric: str = typer.Option("f1"),
    min_score: float = typer.Option(1.0, help="keep questions scoring at least this (0: every run, whatever its "
                                    "answer)"),
    limit: int = typer.Option(None, min=1, help="questions read (default: 20 with a teacher, all with --gold)"),
    gold: bool = typer.Option(False, "--gold", help="build the rows from the data's annotations, no teacher LM "
                              "(the stages with a gold builder; the dev files' questions are refused)"),
    seed: int = typer.Option(0, help="--gold: the draw of the distractor passages shown with the gold ones"),
    complete_only: bool = typer.Option(False, help="keep only the runs the program's own test calls complete "
                                       "(its `trajectory_complete`, whose docstring says what of the test is its "
                                       "paper's and what is ours)"),
    threads: int = typer.Option(1, min=1, help="questions the teacher runs at once (for a served LM; the rows are "
                                "the same)"),
):
    """Record every stage call of a program run by a teacher LM, keeping the questions that pass the metric; or,
    with --gold, the stages' targets built from the train file's annotations."""
    import dspy

    from multihop.data.loaders import held_apart_ids, load_dataset
    from multihop.optimize.trajectories import collect, refuse_held_apart
    from multihop.programs import load
    from multihop.programs.saved import read_manifest

    data_file = question_path(data, "train")
    examples = load_dataset(data_file, limit=limit if limit or gold else 20)
    refuse_held_apart(examples, held_apart_ids())  # before any index or LM: dev questions are for measuring
    if gold:
        from multihop.optimize.gold_targets import gold_trajectories
        from multihop.programs.gold_builders import GoldContext

        instance = load(load_dir) if load_dir else spec.build_unindexed()
        with dspy.context(adapter=lm.default_adapter()):  # the rows are rendered as the student's LM is prompted
            manifest = gold_trajectories(instance, examples, out, GoldContext(seed=seed),
                                         data=file_info(data_file, examples))
        console.print(f"gold rows from {manifest['kept']} of {manifest['questions']} questions; rows per stage "
                      f"{manifest['stages']}; without gold: {manifest['without_gold'] or 'none'} → {out}")
        return
    teacher = lm.configure()
    instance, folder = (load(load_dir), read_manifest(load_dir).get("retriever")) if load_dir \
        else spec.build(data_file)
    with dspy.context(rm=run_retriever(instance, folder)):  # what dspy.Retrieve searches
        manifest = collect(instance, examples, out, teacher_lm=teacher, metric=metric, min_score=min_score,
                           data=file_info(data_file, examples), complete_only=complete_only, threads=threads)
    console.print(f"kept {manifest['kept']} of {manifest['questions']} questions ({manifest['incomplete']} "
                  f"incomplete, {manifest['failed']} below the metric); rows per stage "
                  f"{manifest['stages']} → {out}")


@configurable(after=True)
def distill_cmd(
    files: list[Path] = typer.Argument(..., exists=True, dir_okay=False,
                                       help="trajectory files (<stage>.jsonl), one or several stages"),
    out: Path = typer.Option(..., help="adapter folder"),
    preset: str = typer.Option("default", help="default, or a preset a method declares (its paper's LoRA settings)"),
    base: str = typer.Option(None, help="student: registry name or HF folder (default smollm2)"),
    stages: list[str] = typer.Option(None, "--stage", help="train on this stage's rows (repeat for several), "
                                     "leaving the other stages' rows out; default: the stages the preset distils "
                                     "(its `stages`), else every stage"),
    all_stages: bool = typer.Option(False, "--all-stages", help="train on every stage's rows, whatever stages the "
                                    "preset distils"),
    r: int = typer.Option(None, help="LoRA rank (overrides the preset)", min=1),
    alpha: int = typer.Option(None, help="LoRA alpha", min=1),
    dropout: float = typer.Option(None, help="LoRA dropout", min=0.0, max=1.0),
    epochs: int = typer.Option(None, min=1),
    lr: float = typer.Option(None, min=1e-9),
    scheduler: str = typer.Option(None, help="linear, cosine, constant, ..."),
    warmup: float = typer.Option(None, help="share of steps spent warming up", min=0.0, max=1.0),
    batch_size: int = typer.Option(None, help="rows per optimizer step (over every process)", min=1),
    micro_batch: int = typer.Option(None, min=1, help="rows a forward pass of a process, the step's gradients "
                                    "accumulated (default: 1 on a CPU, the step's rows on a GPU)"),
    max_length: int = typer.Option(None, min=16, help="tokens of prompt + completion (default: the engine's "
                                   "context, 8192); a longer prompt is cut inside its documents, counted in the "
                                   "manifest"),
    precision: str = typer.Option(None, help="auto (fp32 on a CPU; bf16 on a CUDA GPU, else fp16), fp32, bf16 or "
                                  "fp16"),
    gradient_checkpointing: bool = typer.Option(None, "--gradient-checkpointing/--no-gradient-checkpointing",
                                                help="recompute activations in the backward pass (default: on with "
                                                "a CUDA GPU)"),
    packing: bool = typer.Option(False, "--packing", help="concatenate a forward pass's rows without padding (on "
                                 "flash attention where flash-attn is installed; without it, it saves little)"),
    load_in_4bit: bool = typer.Option(False, "--load-in-4bit", help="QLoRA: the base in 4-bit NF4 (a CUDA GPU "
                                      "and bitsandbytes, multihop's gpu extra)"),
    checkpoint_every: int = typer.Option(None, min=1, help="optimizer steps between resumable checkpoints (default "
                                         "50); a rerun resumes only a checkpoint written with the same setting"),
):
    """Train a LoRA student on teacher trajectories; use it with --lm local:smollm2 --adapter on the adapter folder.
    On several GPUs: accelerate launch -m multihop.cli distill ... (every process trains, the first one writes)."""
    import json

    from accelerate import PartialState

    from multihop.optimize.distill import MANIFEST, DistillConfig, distill

    if all_stages and stages:
        raise typer.BadParameter("give --stage or --all-stages, not both", param_hint="--all-stages")
    chosen = () if all_stages else tuple(stages) if stages else None  # None: the preset's
    config = DistillConfig.preset(preset, base=base, r=r, alpha=alpha, dropout=dropout, epochs=epochs, lr=lr,
                                  scheduler=scheduler, warmup=warmup, batch_size=batch_size, stages=chosen,
                                  max_length=max_length, precision=precision,
                                  gradient_checkpointing=gradient_checkpointing, packing=packing or None,
                                  load_in_4bit=load_in_4bit or None, micro_batch=micro_batch,
                                  checkpoint_every=checkpoint_every)
    distill(files, out, config)
    if not PartialState().is_main_process:
        return
    trained = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    left_out = ", ".join(f"{stage} ({rows} rows)" for stage, rows in trained["left_out"].items())
    cut, many = trained["truncated"], trained["truncated"]["rows"] > 1
    console.print(f"LoRA adapter ({config.base}, {trained['rows']} rows of {', '.join(trained['stages'])} from "
                  f"{len(files)} files{f'; left out: {left_out}' if left_out else ''}) → {out}")
    if cut["rows"]:
        console.print(f"{cut['rows']} row{'s' * many} cut inside {'their' if many else 'its'} documents "
                      f"({cut['tokens']} tokens) to fit --max-length {config.max_length}")


def describe_presets(command: click.Command) -> None:
    """Name every registered preset, with its settings, in the help of ``distill --preset`` (read from the registry
    when the command is asked for, so the app starts without importing the methods)."""
    from multihop.programs import DISTILL_PRESETS

    option = next(param for param in command.params if param.name == "preset")
    presets = "; ".join(f"{name} ({', '.join(f'{k}={v}' for k, v in settings.items()) or 'DistillConfig defaults'})"
                        for name, settings in DISTILL_PRESETS.items())
    option.help = f"a registered preset: {presets}"
