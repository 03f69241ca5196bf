"""Student trainers A/B (issue 36): the hand-written LoRA loop ``multihop distill`` ran before TRL against TRL's
``SFTTrainer`` (this checkout), on the same rows with the same settings, in one process.

    python benchmarks/distill_trainers.py --rows DIR/answer.jsonl --reference OLD/optimize/distill.py
                                          [--train 80] [--held 20] [--batch-size 4] [--epochs 1] [--out FILE]

``--reference`` is the ``optimize/distill.py`` of a checkout from before issue 36 (e.g. a ``git worktree`` of it),
loaded as a module of this package so its relative imports resolve. The rows file is split by question: the first
``--train`` questions' rows train both students, the last ``--held`` questions' rows (questions neither saw) are
decoded greedily (transformers engine, fp32, no schema, at most ``--max-tokens``) by both adapters. Both train
SmolLM2-135M (registry ``smollm2``) in fp32 on this machine's CPU with the same LoRA (r 16, α 32, dropout 0.05,
q/k/v/o), AdamW (lr 2e-4, weight decay 0.01, linear schedule, no warm-up, no clipping), seed 0 and batch, one after the
other (``--order``). Reported: seconds a step, final loss (both: the mean over a step's rows of each row's mean
completion-token loss), and on the held rows how many outputs of the two adapters are identical, their mean token
agreement (positions with the same token, over the longer output) and each one's exact match with the gold
completion; plus the rows and tokens the new path cut to fit (``truncated``) and the rows the old one would have cut
from the left at its 2,048 tokens. The machine's load (``os.getloadavg``) is printed before and after; ``--threads 1``
on cores another job keeps busy.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from unittest.mock import patch

from rich.console import Console
from rich.table import Table

from multihop import checkpoints
from multihop.lm.backends import chat_request, make_lm, resolve_local
from multihop.optimize.distill import DistillConfig, distill

console = Console(width=150)
OLD_LENGTH = 2048  # the hand-written loop's max_length, cut from the left


def load_checkpoint(path: Path) -> dict:
    """The old loop's checkpoint loader (gone from :mod:`multihop.data.checkpoints` with it), given to its import only."""
    import torch

    return torch.load(path, weights_only=True)


def load_reference(path: Path):
    """The old ``optimize/distill.py`` at ``path`` as ``multihop.optimize._reference_distill``; its
    ``from multihop.data.checkpoints import load_checkpoint`` gets :func:`load_checkpoint`, for the import only."""
    spec = importlib.util.spec_from_file_location("multihop.optimize._reference_distill", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    with patch.object(checkpoints, "load_checkpoint", load_checkpoint, create=True):
        spec.loader.exec_module(module)
    return module


def split_rows(path: Path, train: int, held: int) -> tuple[list[dict], list[dict]]:
    """The rows of the first ``train`` questions and of the last ``held`` ones (by ``question_id``, in file order)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = list(dict.fromkeys(row["question_id"] for row in rows))
    if train + held > len(questions):
        raise SystemExit(f"{path} has {len(questions)} questions: fewer than --train {train} + --held {held}")
    first, last = set(questions[:train]), set(questions[-held:])
    return [row for row in rows if row["question_id"] in first], [row for row in rows if row["question_id"] in last]


def outputs(adapter: Path, rows: list[dict], max_tokens: int) -> list[str]:
    """Greedy replies of SmolLM2 with ``adapter`` to each row's messages."""
    lm = make_lm("local:smollm2", adapter=adapter, engine="transformers", constrained=False, cache=False,
                 max_tokens=max_tokens)
    return [lm(chat_request(lm, row["messages"])).text for row in rows]


def agreement(tokenizer, first: list[str], second: list[str]) -> float:
    """Mean over pairs of the share of positions, up to the longer reply's tokens, where both have the same token."""
    shares = []
    for a, b in zip(first, second, strict=True):
        ids_a, ids_b = (tokenizer(text, add_special_tokens=False)["input_ids"] for text in (a, b))
        longest = max(len(ids_a), len(ids_b))
        shares.append(1.0 if not longest else sum(x == y for x, y in zip(ids_a, ids_b, strict=False)) / longest)
    return sum(shares) / len(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=Path, required=True, help="a trajectory file (one stage's rows)")
    parser.add_argument("--reference", type=Path, required=True, help="the old optimize/distill.py")
    parser.add_argument("--train", type=int, default=80, help="questions whose rows train both students")
    parser.add_argument("--held", type=int, default=20, help="last questions whose rows are decoded")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--order", default="reference,trl", help="which trainer runs first")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default torch's; 1 on cores "
                        "another job keeps busy: two threads then wait on each other)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the rows and adapters (default: temp)")
    parser.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = parser.parse_args()
    import torch
    from transformers import AutoTokenizer

    if args.threads:
        torch.set_num_threads(args.threads)

    load_before = os.getloadavg()
    work = args.work or Path(tempfile.mkdtemp(prefix="multihop-trainers-"))
    train, held = split_rows(args.rows, args.train, args.held)
    (work / "rows").mkdir(parents=True, exist_ok=True)
    rows_file = work / "rows" / args.rows.name
    rows_file.write_text("".join(json.dumps(row) + "\n" for row in train), encoding="utf-8")
    reference = load_reference(args.reference)
    settings = {"base": "smollm2", "epochs": args.epochs, "batch_size": args.batch_size, "checkpoint_every": 10_000}
    trainers = {"reference": lambda out: reference.distill([rows_file], out, reference.DistillConfig(**settings)),
                "trl": lambda out: distill([rows_file], out, DistillConfig(**settings))}
    manifests, replies = {}, {}
    for name in args.order.split(","):
        adapter = trainers[name](work / name)
        manifests[name] = json.loads((adapter / "distill.json").read_text(encoding="utf-8"))
        replies[name] = outputs(adapter, held, args.max_tokens)
    tokenizer = AutoTokenizer.from_pretrained(resolve_local("smollm2"))
    longer = sum(len(tokenizer.apply_chat_template(row["messages"], add_generation_prompt=True, tokenize=True,
                                                   return_dict=True)["input_ids"]) > OLD_LENGTH for row in train)
    same = sum(a == b for a, b in zip(replies["reference"], replies["trl"], strict=True))
    result = {
        "rows": len(train), "held_rows": len(held), "load_before": load_before, "load_after": os.getloadavg(),
        "threads": torch.get_num_threads(),
        "agreement": {"identical": same, "of": len(held),
                      "token_agreement": agreement(tokenizer, replies["reference"], replies["trl"])},
        "prompts_over_2048": longer,
        "trainers": {name: {"steps": m["steps"], "seconds": m["seconds"],
                            "seconds_per_step": round(m["seconds"] / m["steps"], 2), "final_loss": m["final_loss"],
                            "loss": m["loss"], "truncated": m.get("truncated"),
                            "exact_vs_gold": sum(reply.strip() == row["completion"].strip()
                                                 for reply, row in zip(replies[name], held, strict=True))}
                     for name, m in manifests.items()},
        "replies": replies,
    }
    table = Table(title=f"{args.rows} — {len(train)} rows trained, {len(held)} held-apart rows decoded; "
                        f"{result['threads']} torch threads, load {load_before[0]:.1f} → {result['load_after'][0]:.1f}")
    for column in ("trainer", "steps", "s/step", "final loss", "truncated (rows/tokens)", "exact vs gold"):
        table.add_column(column, justify="left" if column == "trainer" else "right")
    for name, numbers in result["trainers"].items():
        cut = numbers["truncated"] or {}
        table.add_row(name, str(numbers["steps"]), f"{numbers['seconds_per_step']:.2f}",
                      f"{numbers['final_loss']:.4f}",
                      f"{cut.get('rows', '-')}/{cut.get('tokens', '-')}" if cut else f"-/- ({longer} over 2048)",
                      f"{numbers['exact_vs_gold']}/{len(held)}")
    console.print(table)
    console.print(f"identical replies: {same}/{len(held)}; mean token agreement "
                  f"{result['agreement']['token_agreement']:.3f}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
