"""``multihop cooprag``: the first step of CoopRAG's training loop (§3.6), unrolling the train questions for
``multihop retriever train --unrolled``."""

from __future__ import annotations

from pathlib import Path

import typer

from multihop.cli.console import console
from multihop.cli.options import TRAIN_QUESTIONS, lm_options, question_path
from multihop.lm.options import LMOptions

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
    """Unroll train questions (sub-questions, masked chain, query U of Eq. 1) for `multihop retriever train
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
