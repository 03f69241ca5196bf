"""``multihop hanrag``: the Revelator's training data from the train files' annotations (§4.2, App. B)."""

from __future__ import annotations

from pathlib import Path

import typer

from multihop.data.question_sets import DATASETS, TRAIN_QUESTIONS, file_info, question_path
from multihop.lm.options import LMOptions, lm_options
from multihop.programs.command_kit import CommandKit
from multihop.runtime.console import console

app = typer.Typer(help="HANRAG's Revelator training data (§4.2, App. B).", no_args_is_help=True)


@app.command("revelator-data")
@lm_options(help="the Revelator's LM: the rows are rendered as its adapter prompts it (local:smollm2 by default)")
def hanrag_revelator_data(
    lm: LMOptions,
    kit: CommandKit,
    data: list[str] = typer.Option(["musique", "2wiki", "hotpotqa"], help=f"train questions: {TRAIN_QUESTIONS}; "
                                   "repeat the option for several files"),
    out: Path = typer.Option(..., help="folder for one sub-folder of JSON-lines files (one per stage) per --data"),
    limit: int = typer.Option(None, min=1, help="questions read from each --data"),
    seed: int = typer.Option(0, help="the draw of the single-step hop and the distractor paragraph of each question"),
    paper_demos: bool = typer.Option(True, help="render the rows with the App. G examples as demos, as HANRAG's "
                                     "default stages are prompted (--no-paper-demos for HANRAG(paper_demos=False))"),
):
    """The Revelator's router, decomposer, refiner, relevance and ending rows from the train files' annotations,
    rendered as HANRAG's adapter sends them; train one multi-task LoRA Revelator on them with `multihop distill
    OUT/*/*.jsonl --preset hanrag`."""
    import dspy

    from multihop.data.loaders import held_apart_ids, load_dataset
    from multihop.programs import HANRAG
    from multihop.programs.gold_builders import GoldContext

    program, held_apart = HANRAG(paper_demos=paper_demos), held_apart_ids()
    for source in data:
        data_file = question_path(source, "train")
        examples = load_dataset(data_file, limit=limit)
        folder = out / (source if source in DATASETS else data_file.stem)
        with dspy.context(adapter=lm.default_adapter()):
            manifest = kit.gold_trajectories(program, examples, folder, GoldContext(seed=seed), held_apart=held_apart,
                                         data=file_info(data_file, examples))
        console.print(f"{source}: rows from {manifest['kept']} of {manifest['questions']} questions; rows per stage "
                      f"{manifest['stages']} → {folder}")
    console.print(f"train the Revelator: multihop distill {out}/*/*.jsonl --out REVELATOR --preset hanrag")
