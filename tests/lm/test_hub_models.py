"""Hugging Face Hub model ids: a Hub encoder or local LM is found in (or downloaded to) huggingface_hub's cache and its
commit is recorded; offline and not cached, or not on the Hub, it is one line; registry names and existing paths win.

A fake hub stands in for ``huggingface_hub.snapshot_download``: it links a registry model's folder into a cache laid
out as huggingface_hub lays it out. No test reaches the network."""

import json

import dspy
import httpx2
import huggingface_hub
import huggingface_hub.constants
import huggingface_hub.errors
import pytest

from multihop.cli import app
from multihop.cli.errors import run
from multihop.data.corpus import Corpus, Passage
from multihop.lm import models
from multihop.lm.backends import base_checksum, base_revision, chat_request, local_gguf, make_lm, resolve_local
from multihop.lm.engines import TransformersEngine
from multihop.retrievers import DenseRetriever, Encoder
from multihop.retrievers.encoder import resolve_encoder

REVISION = "0123456789abcdef0123456789abcdef01234567"
HUB_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
HUB_LM = "HuggingFaceTB/SmolLM2-135M-Instruct"


class FakeHub:
    """``snapshot_download`` over local folders (``repos``: repo id → folder, or a function that returns it): links
    the folder's files into ``cache/models--org--name/snapshots/<commit>`` and returns that folder; an unknown repo is
    not on the Hub."""

    def __init__(self, cache, repos):
        self.cache, self.repos, self.calls = cache, repos, []

    def __call__(self, repo_id, revision=None, **kwargs):
        self.calls.append((repo_id, revision))
        if repo_id not in self.repos:
            url = f"https://huggingface.co/api/models/{repo_id}"
            raise huggingface_hub.errors.RepositoryNotFoundError(
                f"404: {repo_id}", response=httpx2.Response(404, request=httpx2.Request("GET", url)))
        snapshot = self.cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / (revision or REVISION)
        if not snapshot.exists():
            snapshot.mkdir(parents=True)
            source = self.repos[repo_id]
            for item in (source() if callable(source) else source).iterdir():
                if not item.name.startswith("."):  # not the registry's checksum stamps
                    (snapshot / item.name).symlink_to(item, target_is_directory=item.is_dir())
        return str(snapshot)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """The fake hub serving MiniLM and SmolLM2's HF folder, from a working folder where no ``org/name`` exists."""
    fake = FakeHub(tmp_path / "hub", {HUB_ENCODER: lambda: models.resolve("minilm"),
                                      HUB_LM: lambda: models.hf_folder("smollm2")})
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    monkeypatch.chdir(tmp_path)
    return fake


def fails(argv, capsys) -> str:
    """Run the command line; assert it exits 2 with one ``error:`` line on stderr and no traceback; return it."""
    assert run(app, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.slow
def test_a_hub_encoder_builds_an_index_that_records_its_commit(hub, tmp_path):
    corpus = Corpus([Passage.make("Paris", "Paris is the capital of France."),
                     Passage.make("Rome", "Rome is the capital of Italy.")])
    retriever = DenseRetriever.build(corpus, encoder=HUB_ENCODER, work_dir=tmp_path / "work", k=1)
    manifest = retriever.index.manifest
    assert manifest["encoder"] == HUB_ENCODER and manifest["encoder_revision"] == REVISION
    assert manifest["encoder_sha256"] == models.REGISTRY["minilm"].sha256  # read through the cache's links
    assert retriever("Which city is the capital of Italy?").passages[0].startswith("Rome")
    assert retriever.encoder.config()["revision"] == REVISION
    retriever.save(tmp_path / "idx")
    loaded = DenseRetriever.load(tmp_path / "idx")
    assert hub.calls[-1] == (HUB_ENCODER, REVISION) and loaded.encoder.revision == REVISION  # the recorded commit


@pytest.mark.slow
def test_a_hub_lm_answers_on_the_transformers_engine(hub):
    lm = make_lm(f"local:{HUB_LM}", max_tokens=4, structured="off")
    assert isinstance(lm._engine_spec, TransformersEngine)  # an HF folder: engine auto runs it on transformers
    assert lm.model.startswith(f"local/SmolLM2-135M-Instruct@{REVISION}-")  # what a run manifest records
    response = lm(chat_request(lm, [{"role": "user", "content": "What is the capital of France?"}]))
    assert response.text.strip()
    assert local_gguf(HUB_LM) is None and base_revision(HUB_LM) == REVISION
    assert base_checksum(HUB_LM) == models.sha256_file(models.hf_folder("smollm2") / "model.safetensors")


@pytest.mark.slow
def test_a_student_of_a_hub_base_records_its_commit(hub, tmp_path):
    from multihop.data.loaders import load_dataset
    from multihop.optimize.distill import MANIFEST, DistillConfig, distill
    from multihop.optimize.gold_targets import gold_trajectories
    from multihop.programs import SingleStepRAG

    from helpers import StaticRetriever, tiny_causal_lm

    hub.repos["tiny/llama"] = tmp_path / "tiny"
    tiny_causal_lm(tmp_path / "tiny", ["Ann Lee answer passages question Acme Press"])
    record = {"id": "2hop__1_2", "question": "Who founded Acme Press?", "answer": "Ann Lee", "answer_aliases": [],
              "answerable": True, "paragraphs": [{"idx": 0, "title": "Acme Press", "is_supporting": True,
                                                  "paragraph_text": "Acme Press was founded by Ann Lee."}],
              "question_decomposition": [{"id": 1, "question": "Acme Press >> founder", "answer": "Ann Lee",
                                          "paragraph_support_idx": 0}]}
    (tmp_path / "train.json").write_text(json.dumps([record]))
    program = SingleStepRAG(retriever=StaticRetriever([]), k=4)
    with dspy.context(adapter=dspy.JSONAdapter()):
        gold_trajectories(program, load_dataset(tmp_path / "train.json"), tmp_path / "rows")
    student = distill([tmp_path / "rows" / "answer.jsonl"], tmp_path / "student",
                      DistillConfig(base="tiny/llama", r=4, epochs=1, batch_size=1))
    trained = json.loads((student / MANIFEST).read_text())
    assert trained["base"] == "tiny/llama" and trained["base_revision"] == REVISION
    assert trained["base_sha256"] == models.sha256_file(tmp_path / "tiny" / "model.safetensors")


def test_offline_and_not_cached_is_one_line_naming_how_to_get_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # the real snapshot_download, offline
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": "Paris", "text": "Paris is the capital of France."}]))
    err = fails(["index", "build", str(corpus), "--out", str(tmp_path / "idx"), "--encoder", "multihop-test/absent"],
                capsys)
    assert "'multihop-test/absent' is not a local path and not in the Hugging Face cache" in err
    assert "hf download multihop-test/absent" in err and "HF_HUB_OFFLINE" in err
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "q1", "question": "Capital of France?", "answers": ["Paris"]}\n')
    err = fails(["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "run"),
                 "--lm", "local:multihop-test/absent@v1"], capsys)
    assert "hf download multihop-test/absent --revision v1" in err


def test_a_model_not_on_the_hub_is_one_line(hub, capsys, tmp_path):
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": "Paris", "text": "Paris is the capital of France."}]))
    err = fails(["index", "build", str(corpus), "--out", str(tmp_path / "idx"), "--encoder", "nobody/nothing"], capsys)
    assert "'nobody/nothing' is neither a local path nor a model on the Hugging Face Hub" in err


def test_registry_names_and_existing_paths_win_over_the_hub(hub, tmp_path):
    assert resolve_encoder("minilm") == models.resolve("minilm")
    assert Encoder("minilm").revision is None
    assert resolve_local("smollm2") == models.hf_folder("smollm2")
    assert local_gguf("smollm2") == models.resolve("smollm2")
    local = tmp_path / HUB_ENCODER  # a folder named like the Hub id, relative to the working folder
    local.parent.mkdir()
    local.symlink_to(models.resolve("minilm"), target_is_directory=True)
    assert resolve_encoder(HUB_ENCODER) == local.relative_to(tmp_path)
    assert not models.is_hub_id(HUB_ENCODER) and models.is_hub_id(HUB_LM)
    assert hub.calls == []
