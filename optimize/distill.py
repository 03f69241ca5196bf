"""Distil program stages into a LoRA student from teacher trajectories (DualRAG §3.2, HANRAG App. B/D, CIRAG §3.5).

:func:`distill` trains one ``peft`` LoRA adapter on one or several stages' trajectory files (multi-task, as HANRAG
trains its Revelator) over a Hugging Face causal LM (default SmolLM2-135M-Instruct from the model registry). Each
row becomes the student's chat template over the stage's messages plus the teacher's completion; the loss covers
the completion tokens only. Presets are the papers' settings, each registered by its method's package
(:data:`multihop.programs.DISTILL_PRESETS`; ``multihop distill --preset NAME``), the stages its paper distils among
them (``stages``; none named: every stage); the rows of other stages in the files are left out and counted in the
manifest (``left_out``). Checkpoints
(adapter, optimizer, scheduler, step) are written atomically and resumed. The output folder is a ``peft`` adapter
plus ``distill.json`` (base model and checksum, stages, trajectory files with checksums, config, loss per step);
use it with ``make_lm("local:smollm2", adapter=DIR)`` and ``program.set_stage_lm(stage, lm)``.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from tqdm.auto import tqdm

from multihop import models
from multihop.checkpoints import load_checkpoint
from multihop.folders import locked, write_inventory
from multihop.lms import STUDENT_MANIFEST, base_checksum, resolve_local
from multihop.paths import atomic_dir, atomic_write_text
from multihop.programs import DISTILL_PRESETS  # the package: every method has registered its preset

from .trajectories import MANIFEST as ROWS_MANIFEST
from .trajectories import EmptyTrajectoriesError

MANIFEST = STUDENT_MANIFEST
CHECKPOINT = "checkpoint"


@dataclass
class DistillConfig:
    base: str = "smollm2"
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    epochs: int = 1
    lr: float = 2e-4
    scheduler: str = "linear"
    warmup: float = 0.0
    batch_size: int = 4
    max_length: int = 2048
    seed: int = 0
    checkpoint_every: int = 50
    stages: tuple[str, ...] = ()  # the stages trained, their rows only; (): every stage of the files

    @classmethod
    def preset(cls, name: str, **overrides) -> DistillConfig:
        """The preset ``name`` with ``overrides`` (None: the preset's value)."""
        if name not in DISTILL_PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(DISTILL_PRESETS)}")
        values = {**DISTILL_PRESETS[name], **{k: v for k, v in overrides.items() if v is not None}}
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown distillation settings: {sorted(unknown)}")
        return cls(**values)


def read_rows(files: list[str | Path]) -> list[dict]:
    """Every trajectory row of ``files``."""
    rows = []
    for path in map(Path, files):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                row["messages"], row["completion"], row["stage"]  # noqa: B018 - required fields
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a trajectory row ({exc})") from None
            rows.append(row)
    if not rows:
        raise EmptyTrajectoriesError(f"no trajectory rows in {', '.join(map(str, files))}")
    return rows


def select_stages(rows: list[dict], stages: tuple[str, ...] | list[str]) -> tuple[list[dict], dict[str, int]]:
    """The rows of ``stages`` (every row when it is empty) and the rows left out, counted by stage. A stage with no
    row among ``rows`` is refused, naming those there: a misspelt stage would train on nothing of it."""
    if not stages:
        return rows, {}
    present = sorted({row["stage"] for row in rows})
    missing = [stage for stage in stages if stage not in present]
    if missing:
        raise ValueError(f"no rows of stage(s) {', '.join(missing)} in the files (their stages: {', '.join(present)})")
    left_out: dict[str, int] = {}
    for row in rows:
        if row["stage"] not in stages:
            left_out[row["stage"]] = left_out.get(row["stage"], 0) + 1
    return [row for row in rows if row["stage"] in stages], dict(sorted(left_out.items()))


def encode_row(tokenizer, row: dict, max_length: int) -> tuple[list[int], list[int]]:
    """Token ids of prompt + completion and labels masking the prompt (-100); the prompt is cut from the left."""
    prompt = tokenizer.apply_chat_template(row["messages"], add_generation_prompt=True, tokenize=True,
                                           return_dict=True)["input_ids"]
    completion = tokenizer(row["completion"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    prompt = prompt[-max(1, max_length - len(completion)):]
    return prompt + completion, [-100] * len(prompt) + completion


def load_student(config: DistillConfig):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve_local(config.base)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device)
    lora = LoraConfig(task_type="CAUSAL_LM", r=config.r, lora_alpha=config.alpha, lora_dropout=config.dropout,
                      target_modules=_targets(config.target_modules))
    torch.manual_seed(config.seed)  # LoRA's initial A matrices and the dropout masks: the same rows rebuild the adapter
    return folder, tokenizer, get_peft_model(model, lora)


def _targets(names: tuple[str, ...]) -> str | list[str]:
    """peft takes ``"all-linear"`` as a string, module names as a list."""
    return "all-linear" if tuple(names) == ("all-linear",) else list(names)


def completion_loss(model, input_ids: list[int], labels: list[int]) -> torch.Tensor:
    device = next(model.parameters()).device
    ids = torch.tensor([input_ids], device=device)
    return model(input_ids=ids, labels=torch.tensor([labels], device=device)).loss


def distill(files: list[str | Path], out_dir: str | Path, config: DistillConfig | None = None) -> Path:
    """Train a LoRA adapter on the rows of ``config.stages`` (every row when empty) in the trajectory ``files`` and save
    it to ``out_dir``; resumes a checkpoint there."""
    from transformers import get_scheduler

    config = config or DistillConfig()
    out_dir = Path(out_dir)
    with locked(out_dir):
        rows, left_out = select_stages(read_rows(files), config.stages)
        _, tokenizer, model = load_student(config)
        encoded = [encode_row(tokenizer, row, config.max_length) for row in rows]
        order = [i for epoch in range(config.epochs) for i in _shuffled(len(encoded), config.seed + epoch)]
        steps = -(-len(order) // config.batch_size)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=config.lr)
        scheduler = get_scheduler(config.scheduler, optimizer, num_warmup_steps=int(config.warmup * steps),
                                  num_training_steps=steps)
        history: list[float] = []
        inputs = {str(path): models.sha256_file(Path(path)) for path in files}
        identity = {"config": asdict(config), "files": inputs}  # what a checkpoint resumes
        start, earlier = _resume(out_dir / CHECKPOINT, identity, model, optimizer, scheduler, history)
        began = time.perf_counter() - earlier  # training time over every run of a resumed training
        model.train()
        for step in tqdm(range(start, steps), desc="distilling", unit="step", initial=start, total=steps):
            batch = order[step * config.batch_size : (step + 1) * config.batch_size]
            total = 0.0
            for i in batch:
                loss = completion_loss(model, *encoded[i]) / len(batch)
                loss.backward()
                total += float(loss.detach())
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            history.append(total)
            if (step + 1) % config.checkpoint_every == 0 and step + 1 < steps:
                _save_checkpoint(out_dir / CHECKPOINT, identity, model, optimizer, scheduler, step + 1, history,
                                 time.perf_counter() - began)
        seconds = time.perf_counter() - began
        model.save_pretrained(str(out_dir))
        (out_dir / "README.md").unlink(missing_ok=True)  # peft's model card template: the manifest says what it is
        manifest = {
            "base": config.base, "base_sha256": base_checksum(config.base),
            "stages": sorted({row["stage"] for row in rows}), "left_out": left_out,
            "files": inputs, **_provenance(files, config.stages),
            "config": asdict(config), "rows": len(rows), "steps": steps, "loss": history,
            "final_loss": history[-1] if history else None, "seconds": round(seconds, 1),
            "examples_per_second": round(len(order) / max(seconds, 1e-9), 2),
        }
        atomic_write_text(out_dir / MANIFEST, json.dumps(manifest, indent=2))
        shutil.rmtree(out_dir / CHECKPOINT, ignore_errors=True)
        write_inventory(out_dir)
        return out_dir


def _provenance(files: list[str | Path], stages: tuple[str, ...]) -> dict:
    """What the collections' manifests (beside each trajectory file) say of the rows: ``data``, the question files
    they were built from with their checksums, once each; ``programs``, each program's stages trained (those of
    ``stages`` when given), so a student is set only on the stages of the programs it learnt (two programs may name a
    stage alike)."""
    data: list[dict] = []
    programs: dict[str, set[str]] = {}
    for path in map(Path, files):
        try:
            manifest = json.loads((path.parent / ROWS_MANIFEST).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            continue
        if not isinstance(manifest, dict):
            continue
        if manifest.get("data") and manifest["data"] not in data:
            data.append(manifest["data"])
        if manifest.get("program"):
            found = {row["stage"] for row in read_rows([path])}
            trained = found & set(stages) if stages else found
            if trained:  # a file of stages left out adds none
                programs.setdefault(manifest["program"], set()).update(trained)
    return {"data": data, "programs": {name: sorted(stages) for name, stages in sorted(programs.items())}}


def _shuffled(n: int, seed: int) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def _save_checkpoint(directory: Path, identity: dict, model, optimizer, scheduler, step: int,
                     history: list[float], seconds: float) -> None:
    with atomic_dir(directory) as tmp:
        model.save_pretrained(str(tmp))
        torch.save({"identity": identity, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "step": step, "history": history, "rng": torch.get_rng_state(), "seconds": seconds},
                   tmp / "state.pt")


def _resume(directory: Path, identity: dict, model, optimizer, scheduler, history: list[float]) -> tuple[int, float]:
    """The step to go on from and the seconds trained before it (0, 0.0 without a checkpoint)."""
    if not (directory / "state.pt").exists():
        return 0, 0.0
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    state = load_checkpoint(directory / "state.pt")
    if state.get("identity") != identity:
        raise ValueError(f"{directory} was written for another base model, config or trajectory files; remove it to "
                         "start over")
    set_peft_model_state_dict(model, load_file(directory / "adapter_model.safetensors"))
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    history.extend(state["history"])
    if "rng" in state:  # the dropout masks go on as if never interrupted
        torch.set_rng_state(state["rng"])
    return int(state["step"]), float(state.get("seconds", 0.0))
