"""``multihop dualrag``: DualRAG-FT's per-module training sets (§3.2), from a teacher's trajectories or the
annotations."""

from __future__ import annotations

from pathlib import Path

import typer

from multihop.data.question_sets import TRAIN_QUESTIONS, file_info, question_path
from multihop.lm.options import LMOptions, lm_options
from multihop.programs.command_kit import CommandKit
from multihop.runtime.console import console

app = typer.Typer(help="DualRAG-FT's training sets (§3.2).", no_args_is_help=True)


@app.command("sft")
@lm_options(help="the student's LM: the rows are rendered as its adapter prompts it (local:smollm2 by default)")
def dualrag_sft(
    lm: LMOptions,
    kit: CommandKit,
    teachers: list[Path] = typer.Argument(None, exists=True, file_okay=False,
                                          help="teacher trajectory folders (`multihop trajectories --program DualRAG "
                                          "--teacher-lm ...`); none with --gold"),
    data: str = typer.Option(..., help=f"the train questions the teacher ran on: {TRAIN_QUESTIONS}"),
    out: Path = typer.Option(..., help="folder for one JSON-lines file per stage, for `multihop distill`"),
    gold: bool = typer.Option(False, "--gold", help="targets from the train file's annotations, no teacher"),
    limit: int = typer.Option(None, min=1, help="questions read from --data"),
    encoder: str = typer.Option("mpnet", help="the encoder that links entities to the gold titles"),
    threshold: float = typer.Option(0.5, help="least cosine for an entity to link to a gold title"),
    min_score: float = typer.Option(1.0, help="keep the questions the teacher scored at least this on"),
    seed: int = typer.Option(0, help="--gold: the draw of the distractor documents shown with the gold ones"),
    k: int = typer.Option(10, min=1, help="--gold: documents a summarizer row shows (the program keeps 10 an entity)"),
):
    """DualRAG-FT's per-module SFT rows: the teacher's right trajectories with entities linked to the gold titles and
    empty summaries repaired from the gold documents, or (--gold) the targets derived from the annotations alone."""
    import json

    import dspy

    from multihop.data.loaders import held_apart_ids, load_dataset
    from multihop.programs import DualRAG

    data_file = question_path(data, "train")
    examples = load_dataset(data_file, limit=limit)
    kit.refuse_held_apart(examples, held_apart_ids())
    if gold == bool(teachers):
        raise typer.BadParameter("give teacher trajectory folders, or --gold and none")
    student_adapter = lm.default_adapter()  # every row is rendered as the student's LM will be prompted
    if gold:
        from multihop.programs.gold_builders import GoldContext

        with dspy.context(adapter=student_adapter):
            manifest = kit.gold_trajectories(DualRAG(k=k), examples, out, GoldContext(seed=seed),
                                         data=file_info(data_file, examples))
        console.print(f"gold rows from {manifest['kept']} of {manifest['questions']} questions; rows per stage "
                      f"{manifest['stages']} → {out}")
        return
    from multihop.programs.dualrag.sft import encoder_similarity, sft_rows
    from multihop.retrievers import Encoder

    rows, teacher_names = {}, []
    for folder in teachers:
        collection, manifest = kit.read_collection(folder)
        if manifest.get("program") != "DualRAG":
            raise typer.BadParameter(f"{folder} holds {manifest.get('program')!r} trajectories, not DualRAG's")
        teacher_names.append(manifest.get("teacher"))
        for stage, stage_rows in collection.items():
            rows.setdefault(stage, []).extend(stage_rows)
    predictors = dict(DualRAG().named_predictors())

    def render(row: dict, inputs: dict, outputs: dict) -> dict:
        return kit.render_call(predictors[row["stage"]], inputs, outputs, student_adapter)

    built, stats = sft_rows(rows, {str(e.id): e for e in examples}, encoder_similarity(Encoder(encoder)), render,
                            threshold=threshold, min_score=min_score)
    if not built:
        raise typer.BadParameter("no teacher row is left: none of the teacher's questions is in --data or scored "
                                 f"at least {min_score}")
    manifest = kit.write_trajectories(out, built, {"program": "DualRAG", "teacher": ",".join(map(str, teacher_names)),
                                               "processing": dict(stats), "data": file_info(data_file, examples)})
    console.print(f"rows per stage {manifest['stages']}; {json.dumps(dict(stats))} → {out}")
