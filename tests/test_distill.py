import json
import time

import pytest

from multihop import models
from multihop.lms import make_lm
from multihop.optimize import distill as ds
from multihop.optimize.distill import DistillConfig
from multihop.optimize.students import trained_stages
from multihop.optimize.trajectories import EmptyTrajectoriesError
from multihop.programs import CIRAG, DISTILL_PRESETS, SingleStepRAG, register_distill_preset

from helpers import tiny_causal_lm

PROMPT = [{"role": "system", "content": "Answer the question."}, {"role": "user", "content": "question 7"}]


@pytest.fixture(scope="module")
def tiny_student(tmp_path_factory):
    texts = [m["content"] for m in PROMPT] + ["system user assistant", "answer seven"]
    return tiny_causal_lm(tmp_path_factory.mktemp("tiny"), texts)


def trajectory_file(path, stage="answer", n=4):
    rows = [{"stage": stage, "question_id": f"q{i}", "call": 0, "messages": PROMPT, "completion": "answer seven"}
            for i in range(n)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_completion_only_labels(tiny_student):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_student)
    ids, labels = ds.encode_row(tokenizer, {"messages": PROMPT, "completion": "answer seven"}, 2048)
    masked = sum(label == -100 for label in labels)
    assert tokenizer.decode(ids[masked:]).startswith("answer seven") and labels[masked:] == ids[masked:]
    assert "question 7" in tokenizer.decode(ids[:masked])


def test_lora_lowers_the_loss_saves_reloads_and_changes_the_output(tiny_student, tmp_path):
    data = trajectory_file(tmp_path / "answer.jsonl")
    config = DistillConfig(base=tiny_student, r=8, alpha=16, epochs=8, lr=5e-2, batch_size=2, dropout=0.0,
                           target_modules=("all-linear",))
    out = ds.distill([data], tmp_path / "adapter", config)
    manifest = json.loads((out / ds.MANIFEST).read_text())
    assert manifest["stages"] == ["answer"] and manifest["rows"] == 4 and manifest["steps"] == 16
    assert manifest["loss"][-1] < manifest["loss"][0] / 2
    assert manifest["files"][str(data)] == models.sha256_file(data)
    assert sorted(path.name for path in out.iterdir() if not path.name.startswith(".")) == [
        "adapter_config.json", "adapter_model.safetensors", "distill.json", "files.json"]  # no empty model card
    base = make_lm(f"local:{tiny_student}", max_tokens=4)(messages=PROMPT)[0]
    student = make_lm(f"local:{tiny_student}", adapter=out, max_tokens=4)(messages=PROMPT)[0]
    assert student != base and student.startswith("answer")
    assert trained_stages(SingleStepRAG(), out) == ["answer"]  # rows without a collection manifest: by stage name


def test_training_resumes_from_its_checkpoint_and_rebuilds_the_same_adapter(tiny_student, tmp_path, monkeypatch):
    data = trajectory_file(tmp_path / "answer.jsonl")
    config = DistillConfig(base=tiny_student, r=4, epochs=1, batch_size=1, checkpoint_every=1)
    real, calls = ds.completion_loss, []

    def crash_on_third(*args):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("killed")
        time.sleep(0.3)  # the interrupted run's steps take time the manifest must still count
        return real(*args)

    monkeypatch.setattr(ds, "completion_loss", crash_on_third)
    with pytest.raises(RuntimeError, match="killed"):
        ds.distill([data], tmp_path / "a", config)
    calls.clear()
    monkeypatch.setattr(ds, "completion_loss", lambda *args: calls.append(1) or real(*args))
    ds.distill([data], tmp_path / "a", config)
    assert len(calls) == 2  # steps 1-2 came from the checkpoint
    resumed = json.loads((tmp_path / "a" / ds.MANIFEST).read_text())
    assert len(resumed["loss"]) == 4 and resumed["seconds"] >= 0.6  # both runs' training time
    # the same rows rebuild the adapter byte for byte, interrupted or not (seeded LoRA init, dropout state resumed)
    ds.distill([data], tmp_path / "b", config)
    weights = "adapter_model.safetensors"
    assert (tmp_path / "a" / weights).read_bytes() == (tmp_path / "b" / weights).read_bytes()
    ds.distill([data], tmp_path / "c", DistillConfig(base=tiny_student, r=4, epochs=1, batch_size=1, seed=1))
    assert (tmp_path / "c" / weights).read_bytes() != (tmp_path / "b" / weights).read_bytes()


def test_bad_trajectory_input_is_refused(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(EmptyTrajectoriesError):
        ds.read_rows([tmp_path / "empty.jsonl"])
    with pytest.raises(ValueError, match=r"no rows of stage\(s\) hop in the files \(their stages: answer\)"):
        ds.select_stages(ds.read_rows([trajectory_file(tmp_path / "a.jsonl")]), ["hop"])  # a misspelt stage
    (tmp_path / "bad.jsonl").write_text('{"stage": "answer"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: not a trajectory row"):
        ds.read_rows([tmp_path / "bad.jsonl"])



def collection(folder, program: str, rows_by_stage: dict[str, int]) -> list:
    """A collection of ``program``'s rows (stage → how many) as `multihop trajectories` writes it; its files."""
    from multihop.optimize.trajectories import write_trajectories

    rows = {stage: [{"stage": stage, "question_id": f"q{i}", "call": 0, "messages": PROMPT,
                     "completion": "answer seven"} for i in range(n)] for stage, n in rows_by_stage.items()}
    write_trajectories(folder, rows, {"program": program})
    return sorted(folder.glob("*.jsonl"))


CIRAG_ROWS = {"extract_entities": 3, "extract_triples": 3, "integrate": 2}


def test_a_cirag_distillation_trains_the_integrator_only_unless_told_every_stage(tiny_student, tmp_path,
                                                                                 monkeypatch):
    files = collection(tmp_path / "rows", "CIRAG", CIRAG_ROWS)
    trained, real = [], ds.encode_row
    monkeypatch.setattr(ds, "encode_row", lambda tokenizer, row, length: trained.append(row["stage"]) or real(
        tokenizer, row, length))
    paper = ds.distill(files, tmp_path / "paper", DistillConfig.preset("cirag", base=tiny_student, r=4, epochs=1))
    assert trained == ["integrate", "integrate"]  # Eq. 8: the integrator's decisions, nothing else
    manifest = json.loads((paper / ds.MANIFEST).read_text())
    assert manifest["stages"] == ["integrate"] and manifest["rows"] == 2 and manifest["steps"] == 1
    assert manifest["left_out"] == {"extract_entities": 3, "extract_triples": 3}
    assert manifest["programs"] == {"CIRAG": ["integrate"]} and manifest["config"]["stages"] == ["integrate"]
    assert trained_stages(CIRAG(), paper) == ["integrate"]  # the benchmark sets it as the integrator only
    trained.clear()
    every = ds.distill(files, tmp_path / "all", DistillConfig.preset("cirag", base=tiny_student, r=4, epochs=1,
                                                                     stages=()))
    assert sorted(trained) == ["extract_entities"] * 3 + ["extract_triples"] * 3 + ["integrate"] * 2
    assert json.loads((every / ds.MANIFEST).read_text())["left_out"] == {}
    assert trained_stages(CIRAG(), every) == ["extract_entities", "extract_triples", "integrate"]


def test_distill_command_takes_the_presets_stages_or_every_stage_or_the_ones_named(tiny_student, tmp_path,
                                                                                  capsys):
    from multihop.cli import app
    from multihop.cli.errors import run

    files = [str(path) for path in collection(tmp_path / "rows", "CIRAG", CIRAG_ROWS)]
    common = ["distill", *files, "--preset", "cirag", "--base", tiny_student, "--r", "4", "--epochs", "1"]

    def stages_of(out):
        return json.loads((tmp_path / out / ds.MANIFEST).read_text())["stages"]

    assert run(app, [*common, "--out", str(tmp_path / "paper")]) == 0
    assert "2 rows of integrate" in " ".join(capsys.readouterr().out.split())
    assert stages_of("paper") == ["integrate"]
    assert run(app, [*common, "--all-stages", "--out", str(tmp_path / "all")]) == 0
    assert stages_of("all") == ["extract_entities", "extract_triples", "integrate"]
    assert run(app, [*common, "--stage", "extract_triples", "--out", str(tmp_path / "one")]) == 0
    assert stages_of("one") == ["extract_triples"]
    capsys.readouterr()
    assert run(app, [*common, "--stage", "integrate", "--all-stages", "--out", str(tmp_path / "both")]) == 2
    assert "--stage or --all-stages, not both" in capsys.readouterr().err
    assert run(app, [*common, "--stage", "integrator", "--out", str(tmp_path / "typo")]) == 2
    assert "no rows of stage(s) integrator" in capsys.readouterr().err


def test_the_papers_presets_are_registered_by_their_methods():
    defaults = ds.asdict(DistillConfig())
    cirag, hanrag = ds.asdict(DistillConfig.preset("cirag")), ds.asdict(DistillConfig.preset("hanrag"))
    assert {k: v for k, v in cirag.items() if v != defaults[k]} == {"r": 64, "alpha": 128, "epochs": 2,
                                                                     "batch_size": 2,  # lr 2e-4 is the default
                                                                     "stages": ("integrate",)}  # Eq. 8
    assert {k: v for k, v in hanrag.items() if v != defaults[k]} == {"lr": 1e-4, "scheduler": "cosine", "warmup": 0.1}
    assert DistillConfig.preset("cirag", epochs=1, lr=None).epochs == 1  # None keeps the preset's value
    assert DistillConfig.preset("default") == DistillConfig()
    for name in DISTILL_PRESETS:  # every registered preset is made of DistillConfig settings
        DistillConfig.preset(name)
    with pytest.raises(ValueError, match="unknown preset"):
        DistillConfig.preset("nope")


def test_a_method_registers_its_own_preset(monkeypatch):
    monkeypatch.setitem(DISTILL_PRESETS, "method", {"r": 8})  # removed again after the test
    register_distill_preset("method", r=8)  # the same settings again: a package imported twice
    assert DistillConfig.preset("method", epochs=3).r == 8 and DistillConfig.preset("method", epochs=3).epochs == 3
    with pytest.raises(ValueError, match="registered already"):
        register_distill_preset("method", r=4)
    monkeypatch.setitem(DISTILL_PRESETS, "typo", {"rank": 8})
    with pytest.raises(ValueError, match="unknown distillation settings"):
        DistillConfig.preset("typo")


def test_a_checkpoint_for_another_base_model_is_refused(tmp_path):
    import torch

    (tmp_path / "checkpoint").mkdir()
    torch.save({"config": ds.asdict(DistillConfig(base="other-model"))}, tmp_path / "checkpoint" / "state.pt")
    with pytest.raises(ValueError, match="another base model"):
        ds._resume(tmp_path / "checkpoint", DistillConfig(base="smollm2"), None, None, None, [])
