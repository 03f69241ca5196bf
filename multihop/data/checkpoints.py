"""What the training jobs on the transformers ``Trainer`` (a student's distillation, an encoder's fine-tuning) share:
which checkpoint a rerun goes on from, the record every checkpoint carries of what it trains and how long it has,
and a progress bar showing the loss, which the job's manifest keeps step by step.

The Trainer writes ``checkpoint-N`` folders (weights, optimizer, schedule, random states) and loads them back with
``torch.load(weights_only=True)``: tensors and plain values only, so a file tampered with in an output folder cannot
run code. A checkpoint counts once its ``trainer_state.json``, which the Trainer writes last, is there; a
:class:`TrainingRecord` callback puts into it the job's identity (config, inputs' checksums) and the seconds trained
over every run so far, which :func:`resume_point` checks before anything resumes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from transformers import ProgressCallback, TrainerCallback
from transformers.trainer_callback import ExportableState


class TrainingRecord(TrainerCallback, ExportableState):
    """Saved in every checkpoint's ``trainer_state.json`` (under ``stateful_callbacks``): what the job trains
    (``identity``) and the seconds trained up to the checkpoint over every run of it.

    Args:
        identity: plain values saying what is trained (a checkpoint of another job is not resumed).
        seconds: the seconds trained by the runs before this one.
    """

    def __init__(self, identity: dict, seconds: float = 0.0):
        self.identity, self.earlier, self.began = identity, seconds, time.perf_counter()

    def on_train_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()

    def seconds(self) -> float:
        """The seconds trained over every run, this one up to now."""
        return self.earlier + time.perf_counter() - self.began

    def state(self) -> dict:
        return {"args": {"identity": self.identity, "seconds": self.seconds()}, "attributes": {}}


def resume_point(checkpoints: Path, identity: dict, other: str) -> tuple[str | None, float]:
    """The latest complete checkpoint in ``checkpoints`` and the seconds trained up to it, or (None, 0.0) without one.
    A checkpoint whose :class:`TrainingRecord` holds another ``identity`` is refused: ``ValueError`` saying it was
    written for ``other`` (what differs, in the user's words)."""
    done = sorted((path for path in Path(checkpoints).glob("checkpoint-*") if (path / "trainer_state.json").is_file()),
                  key=lambda path: int(path.name.rpartition("-")[2]) if path.name.rpartition("-")[2].isdigit() else -1)
    if not done:
        return None, 0.0
    try:
        state = json.loads((done[-1] / "trainer_state.json").read_text(encoding="utf-8"))
        record = state["stateful_callbacks"][TrainingRecord.__name__]["args"]
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        record = {}
    if record.get("identity") != json.loads(json.dumps(identity)):
        raise ValueError(f"{done[-1]} was written for {other}; remove {checkpoints} to start over")
    return str(done[-1]), float(record.get("seconds", 0.0))


class LossProgress(ProgressCallback):
    """The Trainer's progress bar, with the last step's loss on it instead of a line printed a step."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.training_bar is not None and logs and "loss" in logs:
            self.training_bar.set_postfix(loss=f"{logs['loss']:.3f}")


def show_loss_progress(trainer) -> None:
    """Give ``trainer`` a :class:`LossProgress` in place of its progress bar."""
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(LossProgress())


def device_name() -> str:
    """What a training ran on, for its record: the CUDA GPU's name, else ``cpu``."""
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def step_losses(trainer) -> list[float]:
    """The loss of every step ``trainer`` logged (``logging_steps=1``), over every run of a resumed training."""
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
