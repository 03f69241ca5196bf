"""The training loop that fine-tunes an encoder with RaLa's loss on sentence-transformers' trainer (CoopRAG §3.6, App.
A, F; the authors' released RaLa/trainer.py and config.py), on whatever samples a method draws: the method's own part —
which questions, which query, which positives and negatives, the difficulty each weighs — is the method's
(:mod:`multihop.programs.cooprag.training` draws CoopRAG's, ``multihop cooprag train`` runs it).

:func:`train` takes the batches of :class:`TrainingSample` a recipe drew and trains on them, in their order, with
``SentenceTransformerTrainer`` and :class:`~.rala_loss.RaLaLoss`, whose GradCache makes a batch of 40 questions and
their documents fit a CPU's memory. The trainer brings the optimizer (AdamW; weight decay on every parameter, as
torch's AdamW and the released code apply it), the learning-rate schedule, gradient clipping, fp16 autocast on a GPU,
seeding and its checkpoints: one every ``checkpoint_every`` steps into ``out_dir/checkpoints`` (weights, optimizer,
schedule, random states, loaded with ``weights_only``), from which a rerun with the same config and samples resumes
(another config or other samples are refused). A checkpoint counts once its ``trainer_state.json``, written last, is
there. The loss's learnt temperature is saved with each checkpoint. The batches are the recipe's; their order is
kept (a recipe shuffles with its seed).

:class:`TrainConfig` holds two recipes (``recipe``):

- ``paper``, our reading of the paper, which gives neither learning rate nor schedule: AdamW at 2e-5, constant, with
  torch's default weight decay 0.01, no clipping, fp32, 5 epochs (App. A), batch 40, τ = 0.05 (App. F), the RaLa
  candidate layers drawn per bucket (``buckets``, ``seed``).
- ``released``, the authors' code: lr 1e-6, linear schedule with min(400, steps) warm-up steps, weight decay 1e-5,
  gradient clipping at 10, fp16 autocast on a CUDA GPU (fp32 on a CPU, as their code falls back), 10 epochs and batch
  40 (train_musique.sh; train_hotpot.sh and train_2wiki.sh run 6 epochs), a learnt temperature starting at τ = 0.05,
  the fixed layers :data:`RELEASED_LAYERS`. Its schedule runs to zero over as many steps as the recipe's batches
  (``multihop.programs.cooprag.training`` cuts them where the released schedule reaches zero).

``special_tokens`` (CoopRAG's markers, which its unrolled queries carry) are added to the encoder before training, so
their embeddings are trained; the saved folder records them in ``multihop-encoder.json`` — with the weights' sha256,
the config, the layers, the loss per step and the temperature — and keeps them wherever it is loaded
(:class:`~.encoder.Encoder`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.base.sampler import DefaultBatchSampler
from torch.utils.data import SequentialSampler
from transformers import TrainerCallback

from multihop.data.checkpoints import TrainingRecord, device_name, resume_point, show_loss_progress, step_losses
from multihop.data.folders import locked, sha256_file, write_inventory
from multihop.data.paths import atomic_write_text

from .encoder import FINETUNED_STAMP, Encoder
from .rala import SCORINGS, RaLa
from .rala_loss import LOSSES, RECIPES, RaLaLoss, label_row

CHECKPOINTS = "checkpoints"  # the trainer's checkpoints, removed once the encoder is saved
LOSS_WEIGHTS = "loss.safetensors"  # in a checkpoint: the loss's own parameters (the learnt temperature)
RELEASED_LAYERS = (0, 4, 7, 11)  # RaLa/config.py --layers: hidden states; ω contrasts the last with the others
PAPER = {"epochs": 5, "lr": 2e-5, "weight_decay": 0.01, "schedule": "constant", "warmup_steps": 0,
         "max_grad_norm": 0.0, "fp16": False}  # App. A (epochs); torch's AdamW default weight decay; our reading
RELEASED = {"epochs": 10, "lr": 1e-6, "weight_decay": 1e-5, "schedule": "linear", "warmup_steps": 400,
            "max_grad_norm": 10.0, "fp16": True}  # train_musique.sh, config.py, trainer.py


@dataclass(frozen=True)
class TrainingSample:
    """One row of a batch: a query, its documents (its positive first, then its negatives), the count its weight
    α = log(1 + difficulty) is taken from (Eq. 6), and the texts that are no negatives of it (``gold``: they leave
    its denominator)."""

    query: str
    documents: tuple[str, ...]
    difficulty: int = 1
    gold: tuple[str, ...] = ()


@dataclass
class TrainConfig:
    """The settings of :data:`PAPER` or :data:`RELEASED` (``recipe``'s) left None are that recipe's; ``max_grad_norm``
    0 clips nothing; ``fp16`` applies on a CUDA GPU only."""

    encoder: str = "mpnet"
    recipe: str = "paper"
    batch_size: int = 40
    micro_batch: int = 8
    epochs: int | None = None
    max_steps: int | None = None
    lr: float | None = None
    weight_decay: float | None = None
    schedule: str | None = None
    warmup_steps: int | None = None
    max_grad_norm: float | None = None
    fp16: bool | None = None
    tau: float = 0.05
    alpha: bool = True
    omega: bool = True
    loss: str = "infonce"  # or "bce": Table 20
    score: str = "eq4"  # or "eq3": Table 17
    buckets: int = 4
    seed: int = 0
    checkpoint_every: int = 50
    special_tokens: tuple[str, ...] = ()

    def __post_init__(self):
        for name, allowed in (("recipe", RECIPES), ("loss", LOSSES), ("score", SCORINGS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} (--{name}) must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        for name, value in (RELEASED if self.recipe == "released" else PAPER).items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.recipe == "released" and (self.loss, self.score) != ("infonce", "eq4"):
            wrong = "loss" if self.loss != "infonce" else "score"
            raise ValueError(f"the released recipe trains with the symmetric InfoNCE over Eq. 4 only; drop --{wrong} "
                             "or use --recipe paper")

    @classmethod
    def for_recipe(cls, recipe: str = "paper", **given) -> TrainConfig:
        """``recipe``'s config with the ``given`` settings that are not None (the command line's options left out);
        under ``released``, ``buckets`` is refused (its layers are fixed), as are a loss and a score other than its
        own."""
        given = {key: value for key, value in given.items() if value is not None}
        if recipe == "released" and "buckets" in given:
            raise ValueError(f"the released recipe contrasts the fixed layers {list(RELEASED_LAYERS)}; drop --buckets "
                             "or use --recipe paper")
        return cls(recipe=recipe, **given)

    def record(self) -> dict:
        """The settings the weights depend on, as a checkpoint's identity and the trained folder's stamp record them:
        all but ``checkpoint_every`` (a rerun at another interval resumes, and trains the same weights)."""
        return {key: value for key, value in asdict(self).items() if key != "checkpoint_every"}

    def layers(self, num_layers: int) -> tuple[int, ...]:
        """The hidden states whose ``[CLS]`` states the loss reads: ``paper``, the RaLa candidate layers drawn with
        ``buckets`` and ``seed``; ``released``, :data:`RELEASED_LAYERS`."""
        if self.recipe == "paper":
            return RaLa(buckets=self.buckets, seed=self.seed).candidate_layers(num_layers)
        if max(RELEASED_LAYERS) > num_layers:
            raise ValueError(f"the released recipe reads hidden states {list(RELEASED_LAYERS)}; {self.encoder} has "
                             f"{num_layers} layers: fine-tune an encoder of 11 or more (MPNet has 12) or use --recipe "
                             "paper")
        return RELEASED_LAYERS


def train(batches: list[list[TrainingSample]], out_dir: str | Path, config: TrainConfig | None = None,
          questions: int | None = None, epoch_steps: int | None = None) -> Path:
    """Fine-tune ``config.encoder`` on ``batches`` (the first ``max_steps``; the schedule spans them all) and save a
    sentence-transformers folder in ``out_dir`` with ``multihop-encoder.json``, which records ``questions`` (how many
    the samples were drawn from), ``epoch_steps`` (the steps one pass over them takes) and the tokens, texts and
    seconds trained (what ``multihop estimate`` scales to a GPU). Resumes from ``out_dir/checkpoints``
    when they were written with the same config and samples."""
    config = config or TrainConfig()
    out_dir = Path(out_dir)
    if not batches or any(len(batch) != config.batch_size for batch in batches):
        raise ValueError(f"train takes full batches of {config.batch_size} samples (the config's batch size)")
    with locked(out_dir):
        encoder = Encoder(config.encoder, batch_size=config.micro_batch, special_tokens=config.special_tokens,
                          precision="fp32")  # trained weights and optimizer states in fp32 (fp16 is autocast)
        layers = config.layers(encoder.num_layers)
        steps = min(len(batches), config.max_steps or len(batches))
        dataset, samples = _dataset(batches[:steps])
        identity = {"config": config.record(), "samples": samples}
        resume, seconds = resume_point(out_dir / CHECKPOINTS, identity,
                                       "another training config or other training samples")
        record = TrainingRecord(identity, seconds)
        loss = RaLaLoss(encoder.model, layers, recipe=config.recipe, score=config.score, loss=config.loss,
                        omega=config.omega, alpha=config.alpha, tau=config.tau, mini_batch_size=config.micro_batch)
        trainer = _trainer(encoder, dataset, loss, config, out_dir / CHECKPOINTS, steps, len(batches), record)
        trainer.train(resume_from_checkpoint=resume)
        seconds = record.seconds()
        encoder.model.eval()
        encoder.model.save(str(out_dir))
        stamp = {"sha256": sha256_file(out_dir / "model.safetensors"), "config": config.record(),
                 "layers": list(layers), "special_tokens": list(encoder.special_tokens), "questions": questions,
                 "steps": steps, "epoch_steps": epoch_steps, "seconds": round(seconds, 1), "device": device_name(),
                 **_tokens(encoder, [sample for batch in batches[:steps] for sample in batch]),
                 "loss": step_losses(trainer),
                 "temperature": loss.temperature}
        atomic_write_text(out_dir / FINETUNED_STAMP, json.dumps(stamp, indent=2))
        shutil.rmtree(out_dir / CHECKPOINTS)
        write_inventory(out_dir)
        return out_dir


class _Trainer(SentenceTransformerTrainer):
    """The sentence-transformers trainer with weight decay on every parameter (torch's AdamW and the released code
    decay them all), a schedule spanning ``horizon`` steps whatever ``max_steps`` cuts, and the loss's own parameters
    (the learnt temperature) in its gradient clipping (as the released code clips its model's, temperature included)
    and in its checkpoints."""

    horizon: int

    def get_decay_parameter_names(self, model) -> list[str]:
        return [name for name, _ in model.named_parameters()]

    def _clip_grad_norm(self, model):
        return self.accelerator.clip_grad_norm_(self.loss.parameters(), self.args.max_grad_norm)

    def create_scheduler(self, num_training_steps, optimizer=None):
        return super().create_scheduler(self.horizon, optimizer)

    def _save(self, output_dir=None, state_dict=None) -> None:
        super()._save(output_dir, state_dict)
        own = {name: p.detach().cpu().contiguous() for name, p in self.loss.named_parameters()
               if not name.startswith("model.")}
        if own:
            save_file(own, str(Path(output_dir or self.args.output_dir) / LOSS_WEIGHTS))

    def _load_from_checkpoint(self, checkpoint_path, model=None) -> None:
        path = Path(checkpoint_path) / LOSS_WEIGHTS
        if not path.exists() and any(not name.startswith("model.") for name, _ in self.loss.named_parameters()):
            raise ValueError(f"{checkpoint_path} lacks {LOSS_WEIGHTS} (the learnt temperature): remove "
                             f"{Path(checkpoint_path).parent} to train from the start")
        super()._load_from_checkpoint(checkpoint_path)
        if path.exists():
            self.loss.load_state_dict(load_file(str(path)), strict=False)


class _NoFinalCheckpoint(TrainerCallback):
    """The trained encoder is saved on its own: no checkpoint after the last step."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            control.should_save = False


def _trainer(encoder: Encoder, dataset, loss: RaLaLoss, config: TrainConfig, folder: Path, steps: int,
             horizon: int, record: TrainingRecord) -> _Trainer:
    """The trainer of ``config`` over ``dataset`` in its order, for ``steps`` steps of a schedule spanning
    ``horizon``, its checkpoints carrying ``record``."""
    args = SentenceTransformerTrainingArguments(
        output_dir=str(folder), per_device_train_batch_size=config.batch_size, max_steps=steps,
        learning_rate=config.lr, weight_decay=config.weight_decay, lr_scheduler_type=config.schedule,
        warmup_steps=min(config.warmup_steps, horizon), max_grad_norm=config.max_grad_norm, optim="adamw_torch",
        fp16=config.fp16 and torch.cuda.is_available(), seed=config.seed, batch_sampler=_in_order,
        dataloader_drop_last=True, dataloader_pin_memory=torch.cuda.is_available(), save_strategy="steps",
        save_steps=config.checkpoint_every, save_total_limit=1, logging_steps=1, report_to="none")
    if args.n_gpu > 1 or args.world_size > 1:
        raise ValueError("retriever training runs on one device; make one GPU visible (CUDA_VISIBLE_DEVICES=0)")
    trainer = _Trainer(model=encoder.model, args=args, train_dataset=dataset, loss=loss,
                       callbacks=[_NoFinalCheckpoint(), record])
    trainer.horizon = horizon
    show_loss_progress(trainer)
    return trainer


def _in_order(dataset, batch_size: int, drop_last: bool, **kwargs) -> DefaultBatchSampler:
    """The trainer's batch sampler over ``dataset`` in its order (the recipe drew and shuffled the batches)."""
    return DefaultBatchSampler(SequentialSampler(dataset), batch_size=batch_size, drop_last=drop_last, **kwargs)


def _dataset(batches: list[list[TrainingSample]]):
    """The samples of ``batches`` in order as a ``datasets.Dataset`` of text ids (rendered to texts as rows are read:
    a recipe's epochs repeat the same texts), and the sha256 of the texts and rows (what a checkpoint resumes)."""
    from datasets import Dataset

    samples = [sample for batch in batches for sample in batch]
    if len({len(sample.documents) for sample in samples}) != 1:
        raise ValueError("every sample needs the same number of documents")
    texts: dict[str, int] = {}

    def ids(items) -> list[int]:
        return [texts.setdefault(text, len(texts)) for text in items]

    width = max(len(sample.gold) for sample in samples)
    rows = []
    for sample in samples:
        query, documents = ids([sample.query])[0], ids(sample.documents)
        rows.append((query, documents, label_row(sample.difficulty, ids(sample.gold), width, documents)))
    columns = ["positive", *(f"negative_{i}" for i in range(1, len(samples[0].documents)))]
    dataset = Dataset.from_dict({"query": [query for query, _, _ in rows],
                                 **{name: [docs[i] for _, docs, _ in rows] for i, name in enumerate(columns)},
                                 "label": [label for _, _, label in rows]})
    table = list(texts)
    dataset.set_transform(partial(_render, table, ["query", *columns]))
    digest = hashlib.sha256(json.dumps([table, rows]).encode()).hexdigest()
    return dataset, digest


def _tokens(encoder: Encoder, samples: list[TrainingSample]) -> dict:
    """The tokens (padding aside) and texts the ``samples`` make the encoder read in one forward pass each: each
    distinct text tokenized once, counted as often as the samples hold it."""
    counts = Counter(text for sample in samples for text in (sample.query, *sample.documents))
    model = encoder.model
    ids = model.tokenizer(list(counts), truncation=True, max_length=model.max_seq_length)["input_ids"]
    tokens = sum(len(row) * n for row, n in zip(ids, counts.values(), strict=True))
    return {"tokens": tokens, "sequences": counts.total()}


def _render(table: list[str], columns: list[str], batch: dict) -> dict:
    return {**{name: [table[i] for i in batch[name]] for name in columns}, "label": batch["label"]}
