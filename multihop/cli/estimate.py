"""``multihop estimate``: the GPU time a training epoch should take, scaled from finished training folders; the
command over the estimate itself, :mod:`multihop.experiments.estimate` (docs/measurements.md, "Training on a GPU")."""

from __future__ import annotations

from pathlib import Path

import typer

GPUS = "h100-sxm, h100-pcie, h200, a100, l40s, a10g"


def estimate_cmd(
    folders: list[Path] = typer.Argument(..., exists=True, file_okay=False,
                                         help="finished `multihop distill` / `multihop cooprag train` folders"),
    gpu: str = typer.Option("h100-sxm", help=f"the GPU whose dense fp16/bf16 peak scales the estimate: {GPUS}"),
    mfu: float = typer.Option(0.35, min=0.01, max=1.0, help="model-FLOPs utilisation assumed on the GPU"),
    params: float = typer.Option(None, min=1, help="also estimate a student of this many parameters on the same rows "
                                 "(LoRA runs; the papers' students: 8e9)"),
    layers: int = typer.Option(None, min=1, help="its layers (with --params; default: the measured model's)"),
    width: int = typer.Option(None, min=1, help="its hidden size (with --params; default: the measured model's)"),
):
    """The expected GPU time an epoch of each finished training run, from what it recorded on this machine (an
    assumed MFU, not a measurement), as a Markdown table; ``make train-gpu`` ends with it."""
    from multihop.experiments.estimate import GPU_PEAK_TFLOPS, estimate_rows, markdown, measured_run

    if gpu not in GPU_PEAK_TFLOPS:
        raise typer.BadParameter(f"unknown GPU {gpu!r}; choose one of {GPUS}", param_hint="--gpu")
    rows = [row for folder in folders
            for row in estimate_rows(measured_run(folder), folder.name, gpu, mfu, params, layers, width)]
    typer.echo(markdown(rows, gpu, mfu))
