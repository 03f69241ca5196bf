"""``multihop cooprag``: CoopRAG's training loop (§3.6) on the command line — ``unroll`` unrolls the train questions
once (step 1), ``train`` fine-tunes the encoder on them with the difficulty-aware loss (step 2). The steps themselves
are :mod:`.training`'s (CoopRAG's samples and weights) over the shared encoder trainer
(:mod:`multihop.retrievers.finetune`, RaLa's loss)."""

from __future__ import annotations

from pathlib import Path

import typer

from multihop.data.question_sets import TRAIN_QUESTIONS, question_path
from multihop.lm.options import LMOptions, lm_options
from multihop.programs.command_kit import SharedOption, program_special_tokens, takes_config
from multihop.runtime.console import console

app = typer.Typer(help="CoopRAG's training loop (§3.6).", no_args_is_help=True)


@app.command("unroll")
@lm_options()
def cooprag_unroll(
    lm: LMOptions,
    data: str = typer.Argument(..., help=f"train questions: {TRAIN_QUESTIONS}"),
    out: Path = typer.Option(..., help="JSON-lines file to write (rerun to resume)"),
    uncertainty_mask: bool = typer.Option(True, help="--no-uncertainty-mask: §4.6's unrolling without <UNCERTAIN>"),
    limit: int = typer.Option(None, help="first N questions only", min=1),
    threads: int = typer.Option(1, min=1, help="questions unrolled at once (for a served LM; the file is the same)"),
):
    """Unroll train questions (sub-questions, masked chain, query U of Eq. 1) for `multihop cooprag train
    --unrolled`."""
    from multihop.data.loaders import load_dataset
    from multihop.programs import CoopRAG
    from multihop.programs.cooprag.training import unroll_questions

    lm.configure()
    examples = load_dataset(question_path(data, "train"), limit=limit)
    rows = unroll_questions(CoopRAG(uncertainty_mask=uncertainty_mask, rerank=None), examples, out,
                            threads=threads)
    fallbacks = sum(rows[ex.id]["fallback"] for ex in examples)
    console.print(f"unrolled {len(examples)} questions ({fallbacks} fell back to the raw question) → {out}")


@app.command("train")
@takes_config(after=True)
def cooprag_train(
    data: list[str] = typer.Argument(..., help=f"train questions with supporting paragraphs: {TRAIN_QUESTIONS}"),
    out: Path = typer.Option(..., help="folder for the fine-tuned encoder (and its resumable checkpoints)"),
    recipe: str = typer.Option("paper", help="paper (our reading of §3.6, App. A, F) or released (the authors' "
                               "RaLa code: learnt temperature, symmetric loss, fixed ω layers [0, 4, 7, 11], "
                               "punctuation zeroed, no random negative, lr 1e-6 with 400 warm-up steps, fp16 on a "
                               "GPU, 10 epochs); the README lists the differences"),
    encoder: str = typer.Option("mpnet", help="encoder to start from"),
    unrolled: Path = typer.Option(None, help="JSON lines {id, unrolled}: train on unrolled questions"),
    limit: int = typer.Option(None, help="questions read per file", min=1),
    batch_size: int = typer.Option(None, help="questions per mini-batch (App. F.1 and released: 40)", min=1),
    micro_batch: int = typer.Option(8, min=1,
                                    help="texts per forward pass (memory only; the loss is the full batch's)"),
    epochs: int = typer.Option(None, min=1, help="paper 5 (App. A), released 10 (train_musique.sh)"),
    max_steps: int = typer.Option(None, min=1),
    lr: float = typer.Option(None, min=1e-9, help="paper 2e-5 (constant), released 1e-6 (linear, 400 warm-up steps)"),
    tau: float = typer.Option(None, help="InfoNCE temperature, 0.05 (App. F.2); released: where the learnt one starts",
                              min=1e-6),
    alpha: bool = typer.Option(True, help="difficulty-aware weight α (--no-alpha: the w/o α ablation)"),
    alpha_from: str = typer.Option("sub_questions", help="what |S| in α counts: sub_questions (Eq. 6) or chain "
                                   "(Table 19)"),
    omega: bool = typer.Option(True, help="gap-aware weight ω in the score (--no-omega: the w/o ω ablation)"),
    loss: str = typer.Option(None, help="infonce (Eq. 5) or, paper only, bce (Table 20's cross-entropy baseline)"),
    score: str = typer.Option(None, help="training score: eq4 (score_o) or, paper only, eq3 (Table 17; rerank with "
                              "rala-eq3)"),
    markers: str = SharedOption("--markers"),
    buckets: int = typer.Option(None, min=1, help="paper only: RaLa layer buckets contrasted in training, 4 "
                                "(Table 23; rerank with the same)"),
    seed: int = typer.Option(0, help="the samples' draw and order and the per-bucket layer draw (rerank with the "
                             "same)"),
    checkpoint_every: int = typer.Option(50, min=1, help="steps between resumable checkpoints (an interrupted run "
                                         "restarts from the last)"),
):
    """Difficulty-aware fine-tuning of the retriever's encoder (CoopRAG §3.6); the output folder works wherever an
    encoder name does, and records the RaLa layers it contrasted, which a RaLa reranker over it must draw too."""
    from multihop.data.loaders import load_dataset
    from multihop.programs.cooprag.training import check_alpha_from, fine_tune, read_unrolled, training_questions
    from multihop.retrievers.finetune import TrainConfig

    check_alpha_from(alpha_from, recipe)  # before the train files load
    config = TrainConfig.for_recipe(recipe, encoder=encoder, batch_size=batch_size, micro_batch=micro_batch,
                                    epochs=epochs, max_steps=max_steps, lr=lr, tau=tau, alpha=alpha, omega=omega,
                                    seed=seed, buckets=buckets, loss=loss, score=score,
                                    checkpoint_every=checkpoint_every, special_tokens=program_special_tokens(markers))
    examples = [e for path in data for e in load_dataset(question_path(path, "train"), limit=limit)]
    questions = training_questions(examples, read_unrolled(unrolled) if unrolled else None, seed=seed,
                                   alpha_from=alpha_from, recipe=recipe)
    console.print(f"{len(questions)} training questions of {len(examples)} ({recipe} recipe)")
    fine_tune(questions, out, config)
    console.print(f"fine-tuned encoder → {out}")
