"""Resuming on the transformers Trainer: the latest complete checkpoint, refused when written for another job, and
the record each checkpoint carries (what it trains, the seconds over every run)."""

import json
import time

import pytest

from multihop.data.checkpoints import TrainingRecord, resume_point


def checkpoint(folder, step, record=None):
    (folder / f"checkpoint-{step}").mkdir(parents=True)
    if record is not None:
        state = {"stateful_callbacks": {"TrainingRecord": record.state()}}
        (folder / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps(state))


def test_the_latest_complete_checkpoint_resumes_with_its_seconds(tmp_path):
    job = {"config": {"base": "smollm2", "layers": (1, 2)}, "files": {"rows.jsonl": "5e1f"}}
    assert resume_point(tmp_path / "none", job, "another job") == (None, 0.0)
    checkpoint(tmp_path, 3, TrainingRecord(job, seconds=2.5))
    checkpoint(tmp_path, 10, TrainingRecord(job, seconds=7.0))
    checkpoint(tmp_path, 12)  # interrupted while written: no trainer state, not resumed
    folder, seconds = resume_point(tmp_path, job, "another job")
    assert folder == str(tmp_path / "checkpoint-10") and seconds == pytest.approx(7.0, abs=0.5)  # 10 > 3 as numbers


def test_a_checkpoint_of_another_job_is_refused_in_one_line(tmp_path):
    checkpoint(tmp_path, 3, TrainingRecord({"config": {"base": "other-model"}}))
    with pytest.raises(ValueError, match=r"checkpoint-3 was written for another base model; remove .* to start over"):
        resume_point(tmp_path, {"config": {"base": "smollm2"}}, "another base model")
    (tmp_path / "checkpoint-3" / "trainer_state.json").write_text("{}")  # no record: never resumed as ours
    with pytest.raises(ValueError, match="was written for another base model"):
        resume_point(tmp_path, {"config": {"base": "smollm2"}}, "another base model")


def test_the_record_counts_the_seconds_of_every_run():
    record = TrainingRecord({"config": {}}, seconds=100.0)
    record.on_train_begin(None, None, None)
    time.sleep(0.05)
    state = record.state()
    assert state["args"]["identity"] == {"config": {}} and 100.05 <= state["args"]["seconds"] < 101
