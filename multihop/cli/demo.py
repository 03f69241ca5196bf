"""``multihop demo`` (``make run``): the main job on the embedded defaults; the command over the job itself,
:mod:`multihop.experiments.demo`."""

from __future__ import annotations

from pathlib import Path

import typer

from multihop.experiments.demo import DEMO_MAX_TOKENS, SHIPPED_STUDENT, run_demo
from multihop.lm.defaults import DEFAULT_LM
from multihop.lm.options import LMOptions, lm_options
from multihop.runtime.console import console


@lm_options(max_tokens=DEMO_MAX_TOKENS)
def demo_cmd(
    lm: LMOptions,
    out: Path = typer.Option(Path("runs/demo"), help="output folder"),
    train: int = typer.Option(20, help="train questions to compile on", min=1),
    dev: int = typer.Option(20, help="dev questions to evaluate", min=1),
    student: Path = typer.Option(SHIPPED_STUDENT, show_default="the shipped gold-trained student",
                                 help="a `multihop distill` student of the LM whose rows include "
                                 "SingleStepRAG's reader (default: the shipped gold-trained one)"),
    no_student: bool = typer.Option(False, "--no-student", help="no SingleStepRAG (student) row"),
):
    """The main job: install models, index MuSiQue, compile SingleStepRAG, evaluate it, NoRetrieval, CoopRAG and
    SingleStepRAG with the gold-trained student as its reader."""
    if no_student or lm.adapter or lm.api_base or (student == SHIPPED_STUDENT and lm.lm != DEFAULT_LM):
        student = None  # a student is a LoRA of one local model: the shipped one, of the default LM
    run_demo(out, train=train, dev=dev, lm=lm, console=console, student=student)
