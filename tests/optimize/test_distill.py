import json
import time
from pathlib import Path

import pytest

from multihop.lm import models
from multihop.lm.backends import make_lm
from multihop.optimize import distill as ds
from multihop.optimize import truncation as tr
from multihop.optimize.distill import DistillConfig
from multihop.optimize.student_stages import trained_stages
from multihop.optimize.trajectories import EmptyTrajectoriesError
from multihop.programs import CIRAG, DISTILL_PRESETS, SingleStepRAG, register_distill_preset

from helpers import tiny_causal_lm

PROMPT = [{"role": "system", "content": "Answer the question."}, {"role": "user", "content": "question 7"}]
WORDS = "alpha beta gamma delta epsilon zeta eta theta"  # one token a word for the tiny tokenizer
DOCS = [WORDS, "alpha beta gamma delta", "alpha beta"]  # 8, 4 and 2 tokens


@pytest.fixture(scope="module")
def tiny_student(tmp_path_factory):
    texts = [m["content"] for m in PROMPT] + ["system user assistant", "answer seven", WORDS, WORDS]
    return tiny_causal_lm(tmp_path_factory.mktemp("tiny"), texts)


@pytest.fixture(scope="module")
def tokenizer(tiny_student):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_student)


def trajectory_file(path, stage="answer", n=4):
    rows = [{"stage": stage, "question_id": f"q{i}", "call": 0, "messages": PROMPT, "completion": "answer seven"}
            for i in range(n)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def document_row(docs=DOCS) -> dict:
    """A stage call whose user turn holds three passages, as DSPy's adapters render a list[str] field."""
    user = f"[[ ## passages ## ]]\n{json.dumps(docs)}\n\n[[ ## question ## ]]\nquestion 7"
    return {"stage": "answer", "messages": [PROMPT[0], {"role": "user", "content": user}], "completion": "answer seven",
            "inputs": {"passages": docs, "question": "question 7"}}


def test_completion_only_labels(tiny_student, tokenizer, tmp_path):
    ids, mask, cut = ds.encode_row(tokenizer, {"messages": PROMPT, "completion": "answer seven"}, 2048)
    assert [tokenizer.decode([i]) for i in ids] == [
        "<|im_start|>", "system", "\n", "Answer", " the", " question", ".", "<|im_end|>", "\n",
        "<|im_start|>", "user", "\n", "question", " 7", "<|im_end|>", "\n", "<|im_start|>", "as", "sista", "nt", "\n",
        "answer", " seven", "<|im_end|>"]  # the chat template's generation prompt, the completion, end of sequence
    assert mask == [0] * 21 + [1] * 3 and cut == 0
    setup = ds.training_setup(DistillConfig())
    trainer = ds.student_trainer(DistillConfig(base=tiny_student, r=4), tokenizer, [(ids, mask)],
                                 tmp_path / "checkpoints", setup)
    assert trainer.train_dataset[0]["labels"] == [-100] * 21 + ids[21:]  # TRL's labels: the completion's tokens only


def test_the_loss_is_the_mean_of_each_rows_mean_padded_or_padding_free(tiny_student, tokenizer, tmp_path):
    import torch
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    rows = [ds.encode_row(tokenizer, {"messages": PROMPT, "completion": completion}, 8192)[:2]
            for completion in ("answer seven", "seven")]  # 3 and 2 tokens trained
    trainer = ds.student_trainer(DistillConfig(base=tiny_student, r=4, dropout=0.0), tokenizer, rows, tmp_path,
                                 ds.training_setup(DistillConfig()))
    examples = [trainer.train_dataset[i] for i in range(2)]

    def loss(batch, padding_free=False):
        collated = DataCollatorForLanguageModeling(tokenizer.pad_token_id, padding_free=padding_free)(batch)
        with torch.no_grad():
            return float(trainer.compute_loss(trainer.model, collated))

    alone = [loss([example]) for example in examples]
    assert alone[0] != pytest.approx(alone[1])
    assert loss(examples) == pytest.approx(sum(alone) / 2, abs=1e-5)  # not TRL's (3 a + 2 b) / 5
    assert loss(examples, padding_free=True) == pytest.approx(sum(alone) / 2, abs=1e-5)


@pytest.mark.slow
def test_accumulated_padded_and_padding_free_steps_train_the_same_adapter(tiny_student, tmp_path):
    from safetensors.torch import load_file

    rows = [{"stage": "answer", "messages": PROMPT, "completion": answer} for answer in ("answer seven", "seven")]
    data = tmp_path / "answer.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))  # 3 and 2 tokens trained: one row padded
    common = {"base": tiny_student, "r": 4, "dropout": 0.0, "epochs": 3, "lr": 5e-2, "batch_size": 2}
    runs = {name: ds.distill([data], tmp_path / name, DistillConfig(**common, **settings))
            for name, settings in (("accumulated", {"micro_batch": 1}), ("padded", {"micro_batch": 2}),
                                   ("packed", {"micro_batch": 2, "packing": True}))}
    adapters = {name: load_file(out / "adapter_model.safetensors") for name, out in runs.items()}
    losses = {name: json.loads((out / ds.MANIFEST).read_text())["loss"] for name, out in runs.items()}
    assert json.loads((runs["accumulated"] / ds.MANIFEST).read_text())["steps"] == 3
    for name in ("padded", "packed"):  # the Trainer divides each of 2 accumulated row means by 2: the same step
        assert losses[name] == pytest.approx(losses["accumulated"], abs=1e-5)
        assert all((adapters[name][key] - weights).abs().max() < 1e-5
                   for key, weights in adapters["accumulated"].items())
    assert losses["accumulated"][-1] < losses["accumulated"][0]


def test_the_cap_cuts_the_longest_documents_first():
    assert tr.cap([8, 4, 2], 5) == 3  # 5 + 1 + 0 = 6 removed; a cap of 4 removes 4 only
    assert tr.cap([8, 4, 2], 0) == 8 and tr.cap([8, 4, 2], 4) == 4 and tr.cap([4, 4], 3) == 2
    assert tr.cap([8, 4, 2], 11) == 1 and tr.cap([8, 4, 2], 14) == 0 and tr.cap([8, 4, 2], 15) == 0
    assert tr.cap([], 3) == 0


def test_documents_are_found_as_each_adapter_renders_a_list():
    import dspy

    class Reader(dspy.Signature):
        passages: list[str] = dspy.InputField()
        notes: str = dspy.InputField()  # a str field given a list: DSPy's numbered «…» blobs
        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    passages = ['He said "yes".\nTwice.', "Ünïcode text"]
    inputs = {"passages": passages, "notes": ["one line", "two\nlines"], "question": "Ünïcode text?"}
    for adapter in (dspy.ChatAdapter(), dspy.JSONAdapter()):
        content = adapter.format(Reader, [], inputs)[-1]["content"]
        found = tr.documents(content, inputs)
        assert [doc.text for doc in found] == [*passages, "one line", "two\nlines"]  # never the question
        assert all(content[doc.start:doc.end] == doc.render(doc.text) for doc in found)
        assert found[0].render(found[0].text) == r'He said \"yes\".\nTwice.'  # escaped in the JSON array
        assert found[3].render(found[3].text) == "two\n    lines"  # indented in its «««…»»» blob


def test_a_long_prompt_loses_the_ends_of_its_longest_documents_only(tokenizer):
    row = document_row()
    whole = tr._template(tokenizer, row["messages"])
    kept, cut = tr.fit_prompt(tokenizer, row["messages"], row["inputs"], len(whole))
    assert (kept, cut) == (whole, 0)
    kept, cut = tr.fit_prompt(tokenizer, row["messages"], row["inputs"], len(whole) - 5)
    assert cut == 6 and len(kept) == len(whole) - 6  # the cap of 3 tokens: 5 + 1 + 0 cut
    expected = document_row(["alpha beta gamma", "alpha beta gamma", "alpha beta"])
    assert kept == tr._template(tokenizer, expected["messages"])  # instructions, headers, question untouched
    kept, cut = tr.fit_prompt(tokenizer, row["messages"], row["inputs"], len(whole) - 11)
    assert cut == 11 and kept == tr._template(tokenizer, document_row(["alpha"] * 3)["messages"])
    with pytest.raises(tr.PromptTooLongError, match=f"the prompt takes {len(whole) - 14} tokens with its documents "
                                                    "emptied"):
        tr.fit_prompt(tokenizer, row["messages"], row["inputs"], len(whole) - 15)


def test_lora_lowers_the_loss_saves_reloads_and_changes_the_output(tiny_student, tmp_path):
    data = trajectory_file(tmp_path / "answer.jsonl")
    config = DistillConfig(base=tiny_student, r=8, alpha=16, epochs=8, lr=5e-2, batch_size=2, micro_batch=2,
                           dropout=0.0, target_modules=("all-linear",))  # two rows a forward pass
    out = ds.distill([data], tmp_path / "adapter", config)
    manifest = json.loads((out / ds.MANIFEST).read_text())
    assert manifest["stages"] == ["answer"] and manifest["rows"] == 4 and manifest["steps"] == 16
    assert len(manifest["loss"]) == 16 and manifest["loss"][-1] < manifest["loss"][0] / 2
    assert manifest["files"][str(data)] == models.sha256_file(data)
    assert manifest["truncated"] == {"rows": 0, "tokens": 0} and manifest["config"]["max_length"] == 8192
    assert manifest["training"] == {"device": "cpu", "precision": "fp32", "gradient_checkpointing": False,
                                    "processes": 1, "micro_batch": 2, "packing": False, "load_in_4bit": False}
    assert sorted(path.name for path in out.iterdir() if not path.name.startswith(".")) == [
        "adapter_config.json", "adapter_model.safetensors", "distill.json", "files.json"]  # no card, no checkpoint
    base = make_lm(f"local:{tiny_student}", max_tokens=4)(messages=PROMPT)[0]
    student = make_lm(f"local:{tiny_student}", adapter=out, max_tokens=4)(messages=PROMPT)[0]
    assert student != base and student.startswith("answer")
    assert trained_stages(SingleStepRAG(), out) == ["answer"]  # rows without a collection manifest: by stage name


@pytest.mark.slow
def test_training_resumes_from_its_checkpoint_and_rebuilds_the_same_adapter(tiny_student, tmp_path, monkeypatch):
    import torch

    from multihop.optimize.student_trainer import StudentTrainer

    data = trajectory_file(tmp_path / "answer.jsonl")
    config = DistillConfig(base=tiny_student, r=4, epochs=1, batch_size=1, checkpoint_every=1)
    real, calls = StudentTrainer.compute_loss, []

    def crash_on_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("killed")
        time.sleep(0.3)  # the interrupted run's steps take time the manifest must still count
        return real(*args, **kwargs)

    monkeypatch.setattr(StudentTrainer, "compute_loss", crash_on_third)
    with pytest.raises(RuntimeError, match="killed"):
        ds.distill([data], tmp_path / "a", config)
    assert (tmp_path / "a" / ds.CHECKPOINTS / "checkpoint-2" / "trainer_state.json").is_file()
    calls.clear()
    monkeypatch.setattr(StudentTrainer, "compute_loss", lambda *args, **kwargs: calls.append(1) or real(*args,
                                                                                                           **kwargs))
    loaded, load = [], torch.load
    monkeypatch.setattr(torch, "load", lambda file, *args, **kwargs: loaded.append(
        (Path(file).name, kwargs.get("weights_only"))) or load(file, *args, **kwargs))
    ds.distill([data], tmp_path / "a", config)
    assert len(calls) == 2  # steps 1-2 came from the checkpoint
    assert loaded == [("optimizer.pt", True), ("scheduler.pt", True), ("rng_state.pth", True)]  # no pickle
    resumed = json.loads((tmp_path / "a" / ds.MANIFEST).read_text())
    assert len(resumed["loss"]) == 4 and resumed["seconds"] >= 0.6  # both runs' training time
    assert not (tmp_path / "a" / ds.CHECKPOINTS).exists()
    # the same rows rebuild the adapter byte for byte, interrupted or not (seeded LoRA init, RNG state resumed)
    ds.distill([data], tmp_path / "b", config)
    weights = "adapter_model.safetensors"
    assert (tmp_path / "a" / weights).read_bytes() == (tmp_path / "b" / weights).read_bytes()
    assert resumed["loss"] == json.loads((tmp_path / "b" / ds.MANIFEST).read_text())["loss"]
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
    assert ds.read_rows([tmp_path / "a.jsonl"])[2].where == f"{tmp_path / 'a.jsonl'}:3"


def collection(folder, program: str, rows_by_stage: dict[str, int]) -> list:
    """A collection of ``program``'s rows (stage → how many) as `multihop trajectories` writes it; its files."""
    from multihop.optimize.trajectories import write_trajectories

    rows = {stage: [{"stage": stage, "question_id": f"q{i}", "call": 0, "messages": PROMPT,
                     "completion": "answer seven"} for i in range(n)] for stage, n in rows_by_stage.items()}
    write_trajectories(folder, rows, {"program": program})
    return sorted(folder.glob("*.jsonl"))


CIRAG_ROWS = {"extract_entities": 3, "extract_triples": 3, "integrate": 2}


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_a_row_too_long_is_cut_inside_its_documents_and_counted_or_refused_naming_it(tiny_student, tokenizer,
                                                                                     tmp_path, capsys):
    from multihop.cli import app
    from multihop.cli.errors import run

    long, short = document_row(), {"stage": "answer", "messages": PROMPT, "completion": "answer seven"}
    path = tmp_path / "answer.jsonl"
    path.write_text(json.dumps(short) + "\n" + json.dumps(long) + "\n")
    length = len(ds.encode_row(tokenizer, long, 8192)[0]) - 5  # 5 tokens over: each passage cut to 3 tokens
    common = ["distill", str(path), "--base", tiny_student, "--r", "4", "--epochs", "1", "--batch-size", "2"]
    assert run(app, [*common, "--max-length", str(length), "--out", str(tmp_path / "student")]) == 0
    assert "1 row cut inside its documents (6 tokens)" in " ".join(capsys.readouterr().out.split())
    manifest = json.loads((tmp_path / "student" / ds.MANIFEST).read_text())
    assert manifest["truncated"] == {"rows": 1, "tokens": 6} and manifest["config"]["max_length"] == length
    ids, mask, cut = ds.encode_row(tokenizer, ds.read_rows([path])[1], length)
    completion = tokenizer("answer seven", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert cut == 6 and len(ids) == length - 1 and ids[-3:] == completion and mask[-4:] == [0, 1, 1, 1]
    emptied = len(ds.encode_row(tokenizer, document_row(["", "", ""]), 8192)[0])
    assert run(app, [*common, "--max-length", str(emptied - 1), "--out", str(tmp_path / "short")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {path}:2: the prompt takes {emptied - 3} tokens with its documents emptied and 3 of completion: "
        f"give --max-length {emptied} or more (now {emptied - 1})")
    assert not (tmp_path / "short" / ds.CHECKPOINTS).exists()  # refused before any training


def test_what_this_machine_cannot_do_is_refused_in_one_line(monkeypatch):
    import torch

    assert ds.training_setup(DistillConfig()) == {"cuda": False, "precision": "fp32", "gradient_checkpointing": False,
                                                  "processes": 1, "micro_batch": 1, "accumulation": 4}
    assert ds.training_setup(DistillConfig(micro_batch=2), processes=2)["accumulation"] == 1
    assert ds.training_setup(DistillConfig(packing=True))["precision"] == "fp32"  # SDPA keeps packed rows apart

    def refused(config, message, processes=1):
        with pytest.raises(ValueError, match=message) as refusal:
            ds.training_setup(config, processes)
        assert "\n" not in str(refusal.value)

    refused(DistillConfig(precision="bf16"), "--precision bf16 needs a CUDA GPU")
    refused(DistillConfig(precision="fp8"), "--precision 'fp8': choose one of")
    refused(DistillConfig(load_in_4bit=True), "--load-in-4bit needs a CUDA GPU")
    refused(DistillConfig(), "--batch-size 4 is not a multiple of 3 processes × 1 rows a forward pass", 3)
    fewer = "--batch-size 2 is smaller than the 4 processes: give at least 4"
    refused(DistillConfig(batch_size=2), fewer, 4)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args: True)
    assert ds.training_setup(DistillConfig())["precision"] == "bf16"
    assert ds.training_setup(DistillConfig())["gradient_checkpointing"] is True
    assert ds.training_setup(DistillConfig(), processes=2)["micro_batch"] == 2  # a GPU: a step's rows at once
    refused(DistillConfig(batch_size=2), fewer, 4)  # not a micro-batch of 0 rows
    monkeypatch.setitem(__import__("sys").modules, "bitsandbytes", None)  # not installed
    refused(DistillConfig(load_in_4bit=True), r"--load-in-4bit needs bitsandbytes: pip install 'multihop\[gpu\]'")


def test_a_folder_held_elsewhere_stops_every_process(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import accelerate.utils

    message = f"{tmp_path} is in use by another multihop process (pid 7); wait for it to finish or write elsewhere"

    def held(path):
        raise ds.FolderInUseError(message)

    monkeypatch.setattr(ds, "locked", held)  # the main process finds the folder held
    with pytest.raises(ds.FolderInUseError, match="pid 7"), ds.locked_by_main(tmp_path, SimpleNamespace(
            is_main_process=True)):
        pass
    sent = []  # what the main process broadcast, as the other processes receive it
    word = ("FolderInUseError", message)
    monkeypatch.setattr(accelerate.utils, "broadcast_object_list", lambda objects: sent.append(objects) or [word])
    with pytest.raises(ds.FolderInUseError, match="pid 7"), ds.locked_by_main(tmp_path, SimpleNamespace(
            is_main_process=False)):
        pass
    assert sent == [[(None, None)]]  # another process takes no lock, and waits for the main process's word
    word = ("PermissionError", "[Errno 13] Permission denied")  # any other failure of the main process's lock
    with pytest.raises(RuntimeError, match="could not lock .*PermissionError: .*Permission denied"), \
            ds.locked_by_main(tmp_path, SimpleNamespace(is_main_process=False)):
        pass


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
