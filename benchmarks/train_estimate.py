"""Expected GPU time a training epoch, from a training run measured on this machine (README "Training on a GPU").

A finished ``multihop distill`` folder (``distill.json``) or ``multihop retriever train`` folder
(``multihop-encoder.json``) records the device, the tokens it trained on, its steps, the steps an epoch (for the
released encoder recipe, its schedule's epoch: the questions over the batch) and its seconds. An epoch costs
``tokens × FLOPs a token``, with the FLOPs a token of Kaplan et al. (2020): ``2·N`` for a forward pass over a
model of ``N`` non-embedding parameters, plus ``2·layers·context·width`` for attention; a backward pass costs
twice a forward one. A LoRA student runs one forward and the backward through the activations only (the frozen
weights take no gradient, the adapters' are negligible): 2 forward-passes' worth, 3 with gradient checkpointing
(the forward is run again). The encoder is trained in full through GradCache: a forward pass without gradients,
then a forward and a backward pass with them, 4 forward passes' worth. The GPU time is that count over the GPU's
dense half-precision peak times a model-FLOPs utilisation (MFU) — an assumption (``--mfu``, default 0.35: what
LoRA fine-tuning of a 7B model with packing usually reaches; a 110M encoder at 512 tokens reaches less), not a
measurement: the row says so. The measured run's own rate (FLOP/s reached on the device it ran on, which the row
names) is printed beside it.

``--params N`` also estimates a student of another size on the same rows (the papers' 7–8B students: ``--params
7e9 --layers 32 --width 4096``); its tokenizer would cut the rows into a similar number of tokens (an approximation,
said).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# Dense (no sparsity) fp16/bf16 tensor-core peaks, TFLOP/s, from the vendors' data sheets.
GPU_PEAK_TFLOPS = {"h100-sxm": 989.4, "h100-pcie": 756.0, "h200": 989.4, "a100": 312.0, "l40s": 362.1, "a10g": 125.0}
FORWARDS = {"lora": 2.0, "lora-checkpointing": 3.0, "gradcache": 4.0}  # forward passes' worth of FLOPs a token


def forward_flops_per_token(params: float, layers: int, context: int, width: int) -> float:
    """Kaplan et al.'s forward FLOPs a token: 2·N + 2·layers·context·width."""
    return 2.0 * params + 2.0 * layers * context * width


def epoch_seconds(tokens: float, flops_per_token: float, peak_tflops: float, mfu: float) -> float:
    """Seconds to train ``tokens`` at ``mfu`` of a ``peak_tflops`` GPU."""
    return tokens * flops_per_token / (peak_tflops * 1e12 * mfu)


def measured_run(folder: Path) -> dict:
    """What a finished training folder recorded: the kind of run, the device it ran on, steps trained and an epoch's,
    tokens and seconds a step, the mean tokens a text, and the trained model's shape (:func:`shape`)."""
    from multihop.lm.backends import STUDENT_MANIFEST, resolve_local
    from multihop.lm.models import FINETUNED_STAMP

    student, encoder = folder / STUDENT_MANIFEST, folder / FINETUNED_STAMP
    if not student.exists() and not encoder.exists():
        raise SystemExit(f"{folder} is no finished `multihop distill` or `multihop retriever train` folder")
    info = json.loads((student if student.exists() else encoder).read_text())
    device = info.get("training", {}).get("device") if student.exists() else info.get("device")
    if any(info.get(key) is None for key in ("tokens", "sequences", "seconds", "epoch_steps")) or device is None:
        raise SystemExit(f"{folder} was trained before runs recorded their device, tokens and seconds, or from Python "
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="finished distill / retriever train folders")
    parser.add_argument("--gpu", default="h100-sxm", choices=sorted(GPU_PEAK_TFLOPS))
    parser.add_argument("--mfu", type=float, default=0.35, help="model-FLOPs utilisation assumed on the GPU")
    parser.add_argument("--params", type=float, default=None,
                        help="also estimate a student of this many parameters on the same rows")
    parser.add_argument("--layers", type=int, default=None, help="its layers (with --params)")
    parser.add_argument("--width", type=int, default=None, help="its hidden size (with --params)")
    args = parser.parse_args()
    peak = GPU_PEAK_TFLOPS[args.gpu]
    print(f"| run | model | measured on | steps an epoch | tokens a step | s/epoch (measured) | GFLOP/s (measured) | "
          f"{args.gpu} s/epoch (MFU {args.mfu:.0%}, assumed) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for folder in args.folders:
        run = measured_run(folder)
        shapes = [(f"{run['params'] / 1e6:,.0f}M (measured)", run["params"], run["layers"], run["width"])]
        if args.params and run["kind"].startswith("lora"):
            shapes.append((f"{args.params / 1e9:g}B", args.params, args.layers or run["layers"],
                           args.width or run["width"]))
        for label, params, layers, width in shapes:
            flops = FORWARDS[run["kind"]] * forward_flops_per_token(params, layers, run["context"], width)
            measured = label.endswith("(measured)")
            cpu_epoch = f"{run['step_seconds'] * run['epoch_steps']:,.0f}" if measured else ""
            cpu_rate = f"{run['step_tokens'] * flops / run['step_seconds'] / 1e9:,.1f}" if measured else ""
            gpu = epoch_seconds(run["step_tokens"] * run["epoch_steps"], flops, peak, args.mfu)
            print(f"| {folder.name} ({run['kind']}) | {label} | {run['device'] if measured else ''} | "
                  f"{run['epoch_steps']} | {run['step_tokens']:,.0f} | "
                  f"{cpu_epoch} | {cpu_rate} | {gpu:,.1f} |")


if __name__ == "__main__":
    main()
