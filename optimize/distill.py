"""Distil program stages into a LoRA student from teacher trajectories (DualRAG §3.2, HANRAG App. B/D, CIRAG §3.5).

:func:`distill` trains one ``peft`` LoRA adapter on one or several stages' trajectory files (multi-task, as HANRAG
trains its Revelator) over a Hugging Face causal LM (default SmolLM2-135M-Instruct from the model registry), on TRL's
``SFTTrainer``. Each row becomes the student's chat template over the stage's messages (with its generation prompt)
plus the teacher's completion and the end-of-sequence token, tokenized here (:func:`encode_row`), and the trainer
gets those ids with a ``completion_mask``, so the loss covers the completion tokens only, exactly as encoded. A prompt
longer than ``max_length`` (default: the engine's context, :data:`~multihop.lm.engines.llamacpp.MAX_CONTEXT`) less its
completion is cut inside the documents of its own user turn, never its instructions, demos or output
(:mod:`.truncation`), and counted in the manifest (``truncated``).

Presets are the papers' settings, each registered by its method's package
(:data:`multihop.programs.DISTILL_PRESETS`; ``multihop distill --preset NAME``), the stages its paper distils among
them (``stages``; none named: every stage); the rows of other stages in the files are left out and counted in the
manifest (``left_out``).

The training is the ``transformers`` Trainer's: on a CPU fp32, one row a forward pass and the step's gradients
accumulated (``micro_batch``); on a CUDA GPU bf16 (fp16 where the GPU lacks it), gradient checkpointing, a step's rows
in one forward pass, a 4-bit base (QLoRA, bitsandbytes), and several GPUs under ``accelerate launch`` (``batch_size``
rows a step over all of them; only the main process writes). Padding-free packing of a forward pass's rows
(``packing``) runs on flash attention's kernels where flash-attn is installed (a CUDA GPU, bf16 or fp16), elsewhere on
a mask that transformers builds from the rows' position ids (a CPU too), which saves little. What is ours: the loss is
the mean over a step's rows of each row's mean completion-token loss, from the logits of the positions that predict a
completion token only (:class:`~.student_trainer.StudentTrainer`; TRL's own weighs every completion token alike, so long
completions outweigh short ones in a multi-task step), AdamW's weight decay 0.01 (torch's default) and no gradient
clipping, and the checkpoint's identity. Checkpoints (adapter, optimizer, scheduler, RNG, trainer state) are the
Trainer's, every ``checkpoint_every`` steps, loaded back with ``weights_only=True``; a
checkpoint written for another base, config or row files is refused. The output folder is a ``peft`` adapter plus
``distill.json`` (base model and checksum, a Hub base's commit, stages, trajectory files with checksums, config, loss
per step, truncation) and ``files.json``; use it with ``make_lm("local:smollm2", adapter=DIR)`` and
``program.set_stage_lm(stage, lm)``.
"""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from multihop.data.folders import FolderInUseError, locked, write_inventory
from multihop.data.paths import atomic_write_text
from multihop.lm import models
from multihop.lm.backends import STUDENT_MANIFEST, base_checksum, base_revision, resolve_local
from multihop.lm.engines.llamacpp import MAX_CONTEXT
from multihop.programs import DISTILL_PRESETS  # the package: every method has registered its preset

from .trajectories import MANIFEST as ROWS_MANIFEST
from .trajectories import EmptyTrajectoriesError
from .truncation import PromptTooLongError, fit_prompt

MANIFEST = STUDENT_MANIFEST
CHECKPOINTS = "checkpoints"  # the Trainer's checkpoint-<step> folders while a training runs
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
GPU_EXTRA = "pip install 'multihop[gpu]'"


@dataclass
class DistillConfig:
    """What a student is trained with (a preset sets some of it).

    Args:
        base: the student's base model, a registry name or an HF folder.
        r, alpha, dropout, target_modules: the LoRA adapter's (``("all-linear",)``: every linear layer).
        epochs, lr, scheduler, warmup: the training's (``warmup``: the share of steps warming up).
        batch_size: rows per optimizer step (over every process).
        max_length: tokens of prompt + completion; a longer prompt is cut inside its documents.
        seed: the LoRA initialisation, the row order and the dropout masks.
        checkpoint_every: steps between resumable checkpoints.
        stages: the stages trained, their rows only; (): every stage of the files.
        precision: auto (fp32 on a CPU; bf16 on a CUDA GPU, fp16 where it lacks bf16), fp32, bf16 or fp16.
        gradient_checkpointing: recompute activations in the backward pass; None: on with a CUDA GPU.
        packing: a forward pass's rows (``micro_batch``) concatenated without padding, kept apart by their position
            ids (on flash attention's kernels where flash-attn is installed on a CUDA GPU in bf16/fp16; elsewhere by a
            mask over the concatenation, which saves little).
        load_in_4bit: QLoRA: the base quantised to 4-bit NF4 (needs bitsandbytes and a CUDA GPU).
        micro_batch: rows a forward pass of a process; a step accumulates the gradients of ``batch_size`` rows. None:
            1 on a CPU (no padding), a step's rows of the process on a GPU.
    """

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
    max_length: int = MAX_CONTEXT
    seed: int = 0
    checkpoint_every: int = 50
    stages: tuple[str, ...] = ()
    precision: str = "auto"
    gradient_checkpointing: bool | None = None
    packing: bool = False
    load_in_4bit: bool = False
    micro_batch: int | None = None

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


class Row(dict):
    """A trajectory row, with ``where`` it was read (``file:line``)."""

    where: str = ""


def read_rows(files: list[str | Path]) -> list[Row]:
    """Every trajectory row of ``files``."""
    rows = []
    for path in map(Path, files):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = Row(json.loads(line))
                row["messages"], row["completion"], row["stage"]  # noqa: B018 - required fields
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{number}: not a trajectory row ({exc})") from None
            row.where = f"{path}:{number}"
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


def encode_row(tokenizer, row: dict, max_length: int) -> tuple[list[int], list[int], int]:
    """Token ids of prompt + completion + end of sequence in at most ``max_length``, the completion mask (1 on the
    completion's tokens and the end of sequence, the tokens the loss covers) and the prompt tokens cut inside its
    documents (:func:`~.truncation.fit_prompt`). A row that cannot fit raises ``ValueError`` naming it."""
    completion = tokenizer(row["completion"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    try:
        prompt, cut = fit_prompt(tokenizer, row["messages"], row.get("inputs") or {}, max_length - len(completion))
    except PromptTooLongError as exc:
        raise ValueError(f"{getattr(row, 'where', '') or 'a row'}: {exc} and {len(completion)} of completion: give "
                         f"--max-length {exc.tokens + len(completion)} or more (now {max_length})") from None
    return prompt + completion, [0] * len(prompt) + [1] * len(completion), cut


def training_setup(config: DistillConfig, processes: int = 1) -> dict:
    """How ``config`` trains on this machine — precision, gradient checkpointing, rows a forward pass, forward passes
    a step — after refusing, in one line each, what it cannot do here."""
    import torch

    cuda = torch.cuda.is_available()
    if config.precision not in PRECISIONS:
        raise ValueError(f"--precision {config.precision!r}: choose one of {', '.join(PRECISIONS)}")
    precision = config.precision
    if precision == "auto":
        precision = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if cuda else "fp32"
    if precision != "fp32" and not cuda:
        raise ValueError(f"--precision {precision} needs a CUDA GPU; on a CPU a student trains in fp32")
    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        raise ValueError("this GPU has no bf16: give --precision fp16")
    if config.load_in_4bit:
        if not cuda:
            raise ValueError("--load-in-4bit needs a CUDA GPU (bitsandbytes' 4-bit kernels); leave it off on a CPU")
        try:
            import bitsandbytes  # noqa: F401
        except ImportError:
            raise ValueError(f"--load-in-4bit needs bitsandbytes: {GPU_EXTRA}") from None
    if config.batch_size < processes:
        raise ValueError(f"--batch-size {config.batch_size} is smaller than the {processes} processes: give at least "
                         f"{processes}")
    micro = config.micro_batch or (config.batch_size // processes if cuda else 1)
    if config.batch_size % (processes * micro):
        raise ValueError(f"--batch-size {config.batch_size} is not a multiple of {processes} processes × "
                         f"{micro} rows a forward pass: give a multiple of {processes * micro}")
    checkpointing = cuda if config.gradient_checkpointing is None else config.gradient_checkpointing
    return {"cuda": cuda, "precision": precision, "gradient_checkpointing": checkpointing, "processes": processes,
            "micro_batch": micro, "accumulation": config.batch_size // (processes * micro)}


def load_base(config: DistillConfig, setup: dict):
    """The base model, in the setup's precision (4-bit NF4 with ``load_in_4bit``, prepared for k-bit training)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import is_flash_attn_2_available

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[setup["precision"]]
    settings: dict = {"dtype": dtype}
    if config.packing and setup["cuda"] and setup["precision"] != "fp32" and is_flash_attn_2_available():
        settings["attn_implementation"] = "flash_attention_2"  # else SDPA, masked apart by the rows' position ids
    if config.load_in_4bit:
        from accelerate import PartialState
        from transformers import BitsAndBytesConfig

        settings["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                             bnb_4bit_use_double_quant=True,
                                                             bnb_4bit_compute_dtype=dtype)
        settings["device_map"] = {"": PartialState().local_process_index}  # a quantised model is not moved after
    model = AutoModelForCausalLM.from_pretrained(resolve_local(config.base), **settings)
    if config.load_in_4bit:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model,
                                                use_gradient_checkpointing=setup["gradient_checkpointing"])
    return model


def _targets(names: tuple[str, ...]) -> str | list[str]:
    """peft takes ``"all-linear"`` as a string, module names as a list."""
    return "all-linear" if tuple(names) == ("all-linear",) else list(names)


def student_trainer(config: DistillConfig, tokenizer, encoded: list[tuple[list[int], list[int]]], checkpoints: Path,
                    setup: dict, callbacks: tuple = ()):
    """The ``StudentTrainer`` of ``config`` on this machine (``setup``) over the ``encoded`` rows (ids, completion
    mask), checkpointing into ``checkpoints``."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import SFTConfig

    from multihop.data.checkpoints import show_loss_progress

    from .student_trainer import StudentTrainer

    steps = -(-len(encoded) // config.batch_size) * config.epochs
    args = SFTConfig(
        output_dir=str(checkpoints), seed=config.seed, num_train_epochs=config.epochs,
        per_device_train_batch_size=setup["micro_batch"], gradient_accumulation_steps=setup["accumulation"],
        learning_rate=config.lr,
        lr_scheduler_type=config.scheduler, warmup_steps=int(config.warmup * steps),
        weight_decay=0.01, max_grad_norm=0.0,  # torch AdamW's default decay, and no clipping
        bf16=setup["precision"] == "bf16", fp16=setup["precision"] == "fp16",
        activation_checkpointing=setup["gradient_checkpointing"], padding_free=config.packing,
        use_cpu=not setup["cuda"], dataloader_pin_memory=setup["cuda"],  # several CPU processes: DDP on gloo
        max_length=None,  # fitted already (encode_row); TRL would cut the end, the completion first
        completion_only_loss=True, logging_steps=1, save_strategy="steps", save_steps=config.checkpoint_every,
        save_total_limit=1, report_to="none", ddp_find_unused_parameters=False)
    dataset = Dataset.from_dict({"input_ids": [ids for ids, _ in encoded],
                                 "completion_mask": [mask for _, mask in encoded]})
    lora = LoraConfig(task_type="CAUSAL_LM", r=config.r, lora_alpha=config.alpha, lora_dropout=config.dropout,
                      target_modules=_targets(config.target_modules))
    trainer = StudentTrainer(model=load_base(config, setup), args=args, train_dataset=dataset,
                             processing_class=tokenizer, peft_config=lora, callbacks=list(callbacks))
    show_loss_progress(trainer)
    return trainer


@contextmanager
def locked_by_main(out_dir: Path, state):
    """``out_dir`` locked for the block by the main process of ``state`` (an accelerate ``PartialState``); its refusal
    (another job holds the folder) or failure reaches every process, so none goes on to wait for it in the training."""
    from accelerate.utils import broadcast_object_list

    with ExitStack() as stack:
        failure = None
        if state.is_main_process:
            try:
                stack.enter_context(locked(out_dir))
            except Exception as exc:  # noqa: BLE001 - every kind is handed on to the other processes, then raised
                failure = exc
        word = (type(failure).__name__, str(failure)) if failure else (None, None)
        ((kind, message),) = broadcast_object_list([word])
        if failure is not None:
            raise failure
        if kind == FolderInUseError.__name__:
            raise FolderInUseError(message)
        if kind is not None:
            raise RuntimeError(f"the main process could not lock {out_dir}: {kind}: {message}")
        yield out_dir


def distill(files: list[str | Path], out_dir: str | Path, config: DistillConfig | None = None) -> Path:
    """Train a LoRA adapter on the rows of ``config.stages`` (every row when empty) in the trajectory ``files`` and save
    it to ``out_dir``; resumes a checkpoint there. Under ``accelerate launch`` every process trains and the main one
    writes."""
    import torch
    from accelerate import PartialState
    from transformers import AutoTokenizer

    from multihop.data.checkpoints import TrainingRecord, device_name, resume_point, step_losses

    config = config or DistillConfig()
    out_dir = Path(out_dir)
    state = PartialState(cpu=not torch.cuda.is_available())  # the processes of a launcher (CPU ones too: gloo)
    with locked_by_main(out_dir, state):
        rows, left_out = select_stages(read_rows(files), config.stages)
        setup = training_setup(config, state.num_processes)
        tokenizer = AutoTokenizer.from_pretrained(resolve_local(config.base))
        encoded = [encode_row(tokenizer, row, config.max_length) for row in rows]
        inputs = {str(path): models.sha256_file(Path(path)) for path in files}
        identity = {"config": asdict(config), "files": inputs}  # what a checkpoint resumes
        checkpoint, seconds = resume_point(out_dir / CHECKPOINTS, identity,
                                           "another base model, config or trajectory files")
        record = TrainingRecord(identity, seconds)
        trainer = student_trainer(config, tokenizer, [(ids, mask) for ids, mask, _ in encoded],
                                  out_dir / CHECKPOINTS, setup, (record,))
        trainer.train(resume_from_checkpoint=checkpoint)
        seconds = record.seconds()
        trainer.accelerator.wait_for_everyone()
        if state.is_main_process:
            trainer.model.save_pretrained(str(out_dir))
            (out_dir / "README.md").unlink(missing_ok=True)  # peft's model card template: the manifest says what it is
            losses = step_losses(trainer)
            cut = [tokens for _, _, tokens in encoded if tokens]
            manifest = {
                "base": config.base, "base_sha256": base_checksum(config.base),
                **({"base_revision": revision} if (revision := base_revision(config.base)) else {}),
                "stages": sorted({row["stage"] for row in rows}), "left_out": left_out,
                "files": inputs, **_provenance(files, config.stages),
                "config": asdict(config), "rows": len(rows), "steps": trainer.state.global_step, "loss": losses,
                "final_loss": losses[-1] if losses else None, "seconds": round(seconds, 1),
                "examples_per_second": round(len(rows) * config.epochs / max(seconds, 1e-9), 2),
                "truncated": {"rows": len(cut), "tokens": sum(cut)},
                "epoch_steps": -(-len(rows) // config.batch_size), "tokens": sum(len(ids) for ids, _, _ in encoded)
                * config.epochs, "sequences": len(rows) * config.epochs,
                "training": {"device": device_name(),
                             **{key: setup[key] for key in ("precision", "gradient_checkpointing", "processes",
                                                            "micro_batch")},
                             "packing": config.packing, "load_in_4bit": config.load_in_4bit},
            }
            atomic_write_text(out_dir / MANIFEST, json.dumps(manifest, indent=2))
            shutil.rmtree(out_dir / CHECKPOINTS, ignore_errors=True)
            write_inventory(out_dir)
        trainer.accelerator.wait_for_everyone()  # the other processes return once the student is written
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
