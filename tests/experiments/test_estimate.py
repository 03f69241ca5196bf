"""``multihop estimate`` (:mod:`multihop.experiments.estimate`): the GPU time an epoch should take, from what a
finished training folder recorded."""

import json

import pytest
from typer.testing import CliRunner

from multihop.cli.app import app
from multihop.experiments.estimate import (
    FORWARDS,
    GPU_PEAK_TFLOPS,
    epoch_seconds,
    estimate_rows,
    forward_flops_per_token,
    markdown,
    measured_run,
)
from multihop.retrievers.encoder import FINETUNED_STAMP


@pytest.fixture
def encoder_run(tmp_path):
    """A finished encoder run: a tiny BERT's config and the stamp ``multihop cooprag train`` writes."""
    from transformers import BertConfig

    folder = tmp_path / "encoder"
    BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
               vocab_size=100).save_pretrained(folder)
    (folder / FINETUNED_STAMP).write_text(json.dumps({"device": "cpu", "tokens": 40_000, "sequences": 400,
                                                      "seconds": 200.0, "steps": 10, "epoch_steps": 25}))
    return folder


def test_an_epoch_costs_its_tokens_flops_over_the_gpus_rate():
    assert forward_flops_per_token(1e6, 2, 100, 32) == 2e6 + 2 * 2 * 100 * 32
    assert epoch_seconds(1e12, 1e3, 1.0, 0.5) == pytest.approx(2000.0)


def test_a_measured_run_is_scaled_to_the_gpu(encoder_run):
    run = measured_run(encoder_run)
    assert run["kind"] == "gradcache" and run["epoch_steps"] == 25 and run["context"] == 100
    assert run["layers"] == 2 and run["width"] == 32 and run["params"] > 0
    row, = estimate_rows(run, "encoder", "a100", 0.5, params=8e9)  # a student's size scales LoRA runs only
    flops = FORWARDS["gradcache"] * forward_flops_per_token(run["params"], 2, 100, 32)
    assert row["gpu_epoch_s"] == pytest.approx(4000 * 25 * flops / (GPU_PEAK_TFLOPS["a100"] * 1e12 * 0.5))
    assert row["measured_epoch_s"] == pytest.approx(500.0) and row["device"] == "cpu"
    assert "| encoder (gradcache) |" in markdown([row], "a100", 0.5)


def test_the_command_prints_the_table_and_refuses_an_unfinished_folder(encoder_run, tmp_path):
    result = CliRunner().invoke(app, ["estimate", str(encoder_run), "--gpu", "h200"])
    assert result.exit_code == 0, result.output
    assert "h200 s/epoch (MFU 35%, assumed)" in result.output and "encoder (gradcache)" in result.output
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no finished"):
        measured_run(tmp_path / "empty")
    assert CliRunner().invoke(app, ["estimate", str(encoder_run), "--gpu", "tpu"]).exit_code != 0
