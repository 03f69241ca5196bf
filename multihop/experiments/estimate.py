"""Expected GPU time a training epoch, from a training run measured on this machine (docs/measurements.md,
"Training on a GPU"; ``multihop estimate``).

A finished ``multihop distill`` folder (``distill.json``) or ``multihop cooprag train`` folder
(``multihop-encoder.json``) records the device, the tokens it trained on, its steps, the steps an epoch (for the
released encoder recipe, its schedule's epoch: the questions over the batch) and its seconds. An epoch costs
``tokens × FLOPs a token``, with the FLOPs a token of Kaplan et al. (2020): ``2·N`` for a forward pass over a
model of ``N`` non-embedding parameters, plus ``2·layers·context·width`` for attention; a backward pass costs
twice a forward one. A LoRA student runs one forward and the backward through the activations only (the frozen
weights take no gradient, the adapters' are negligible): 2 forward-passes' worth, 3 with gradient checkpointing
(the forward is run again). The encoder is trained in full through GradCache: a forward pass without gradients,
then a forward and a backward pass with them, 4 forward passes' worth. The GPU time is that count over the GPU's
dense half-precision peak times a model-FLOPs utilisation (MFU) — an assumption (``mfu``, default 0.35: what
LoRA fine-tuning of a 7B model with packing usually reaches; a 110M encoder at 512 tokens reaches less), not a
measurement: the row says so. The measured run's own rate (FLOP/s reached on the device it ran on, which the row
names) is given beside it.

``params`` also estimates a student of another size on the same rows (the papers' 7–8B students: ``params=7e9,
layers=32, width=4096``); its tokenizer would cut the rows into a similar number of tokens (an approximation, said).

This module is the estimate; :mod:`multihop.cli.estimate` is its command (``multihop estimate``), the command line's
layer over it.
"""

from __future__ import annotations

import json
from pathlib import Path

# Dense (no sparsity) fp16/bf16 tensor-core peaks, TFLOP/s, from the vendors' data sheets.
GPU_PEAK_TFLOPS = {"h100-sxm": 989.4, "h100-pcie": 756.0, "h200": 989.4, "a100": 312.0, "l40s": 362.1, "a10g": 125.0}
FORWARDS = {"lora": 2.0, "lora-checkpointing": 3.0, "gradcache": 4.0}  # forward passes' worth of FLOPs a token
DEFAULT_MFU = 0.35


def forward_flops_per_token(params: float, layers: int, context: float, width: int) -> float:
    """Kaplan et al.'s forward FLOPs a token: 2·N + 2·layers·context·width."""
    return 2.0 * params + 2.0 * layers * context * width


def epoch_seconds(tokens: float, flops_per_token: float, peak_tflops: float, mfu: float) -> float:
    """Seconds to train ``tokens`` at ``mfu`` of a ``peak_tflops`` GPU."""
    return tokens * flops_per_token / (peak_tflops * 1e12 * mfu)


def measured_run(folder: Path) -> dict:
    """What a finished training folder recorded: the kind of run, the device it ran on, steps trained and an epoch's,
    tokens and seconds a step, the mean tokens a text, and the trained model's shape (:func:`shape`). A folder that
    is no finished training, or was trained before runs recorded these, is a ``ValueError``."""
    from multihop.lm.backends import STUDENT_MANIFEST, resolve_local
    from multihop.retrievers.encoder import FINETUNED_STAMP

    folder = Path(folder)
    student, encoder = folder / STUDENT_MANIFEST, folder / FINETUNED_STAMP
    if not student.exists() and not encoder.exists():
        raise ValueError(f"{folder} is no finished `multihop distill` or `multihop cooprag train` folder")
    info = json.loads((student if student.exists() else encoder).read_text())
    device = info.get("training", {}).get("device") if student.exists() else info.get("device")
    if any(info.get(key) is None for key in ("tokens", "sequences", "seconds", "epoch_steps")) or device is None:
        raise ValueError(f"{folder} was trained before runs recorded their device, tokens and seconds, or from Python "
                         "without its steps an epoch: train it again with the command")
    if student.exists():
        kind = "lora-checkpointing" if info["training"]["gradient_checkpointing"] else "lora"
        model = resolve_local(info["base"])
    else:
        kind, model = "gradcache", folder
    steps = info["steps"]
    return {"kind": kind, "device": device, "epoch_steps": info["epoch_steps"], "step_tokens": info["tokens"] / steps,
            "step_seconds": info["seconds"] / steps, "context": info["tokens"] / info["sequences"], **shape(model)}


def shape(folder: Path) -> dict:
    """``params`` (without the embeddings), ``layers`` and ``width`` of the transformers model in ``folder`` (a
    sentence-transformers folder keeps its config at the top), built on the meta device: nothing is loaded."""
    import torch
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModel.from_config(config)
    embeddings = sum(p.numel() for name, p in model.named_parameters() if "embed" in name)
    return {"params": sum(p.numel() for p in model.parameters()) - embeddings,
            "layers": config.num_hidden_layers, "width": config.hidden_size}


def estimate_rows(run: dict, name: str, gpu: str = "h100-sxm", mfu: float = DEFAULT_MFU, params: float | None = None,
                  layers: int | None = None, width: int | None = None) -> list[dict]:
    """The rows of one measured run (:func:`measured_run`) called ``name``: the model as measured, and with ``params``
    (a LoRA run only) a student of that size (``layers`` and ``width`` default to the measured model's). Each row:
    ``run``, ``model``, ``device`` (the measured row's), ``epoch_steps``, ``step_tokens``, ``measured_epoch_s`` and
    ``measured_gflops`` (the measured row's, else None) and ``gpu_epoch_s`` (on ``gpu`` at ``mfu``, assumed)."""
    if gpu not in GPU_PEAK_TFLOPS:
        raise ValueError(f"unknown GPU {gpu!r}; choose one of {', '.join(sorted(GPU_PEAK_TFLOPS))}")
    if not 0 < mfu <= 1:
        raise ValueError(f"the MFU is a share in (0, 1], not {mfu}")
    shapes = [(f"{run['params'] / 1e6:,.0f}M (measured)", run["params"], run["layers"], run["width"], True)]
    if params and run["kind"].startswith("lora"):
        shapes.append((f"{params / 1e9:g}B", params, layers or run["layers"], width or run["width"], False))
    rows = []
    for label, size, depth, hidden, measured in shapes:
        flops = FORWARDS[run["kind"]] * forward_flops_per_token(size, depth, run["context"], hidden)
        rows.append({
            "run": f"{name} ({run['kind']})", "model": label, "device": run["device"] if measured else None,
            "epoch_steps": run["epoch_steps"], "step_tokens": run["step_tokens"],
            "measured_epoch_s": run["step_seconds"] * run["epoch_steps"] if measured else None,
            "measured_gflops": run["step_tokens"] * flops / run["step_seconds"] / 1e9 if measured else None,
            "gpu_epoch_s": epoch_seconds(run["step_tokens"] * run["epoch_steps"], flops, GPU_PEAK_TFLOPS[gpu], mfu),
        })
    return rows


def markdown(rows: list[dict], gpu: str = "h100-sxm", mfu: float = DEFAULT_MFU) -> str:
    """``rows`` (:func:`estimate_rows`) as a Markdown table."""
    lines = ["| run | model | measured on | steps an epoch | tokens a step | s/epoch (measured) | GFLOP/s (measured) "
             f"| {gpu} s/epoch (MFU {mfu:.0%}, assumed) |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        measured_epoch = f"{row['measured_epoch_s']:,.0f}" if row["measured_epoch_s"] is not None else ""
        measured_rate = f"{row['measured_gflops']:,.1f}" if row["measured_gflops"] is not None else ""
        lines.append(f"| {row['run']} | {row['model']} | {row['device'] or ''} | {row['epoch_steps']} | "
                     f"{row['step_tokens']:,.0f} | {measured_epoch} | {measured_rate} | {row['gpu_epoch_s']:,.1f} |")
    return "\n".join(lines)
