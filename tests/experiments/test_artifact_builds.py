"""The artifacts a reproduction's rows need: given ones checked, built ones made once into the output folder with a
record of what made them, found again by the next run, and refused when asked for on other terms."""

import json
from pathlib import Path

import dspy
import pytest

from multihop.experiments.artifact_builds import (
    BUILT,
    artifact_folder,
    build_missing,
    built_artifacts,
    given_artifacts,
    paper_artifacts,
)
from multihop.experiments.reproduce import paper_of, select_tables
from multihop.programs.papers import Artifact


def counting_artifact(calls: list) -> Artifact:
    def build(folder, dataset, limit, **_run):
        calls.append((dataset, limit))
        (folder / "weights").write_text(f"{dataset} {limit}")

    return Artifact("encoder-no-alpha", "encoder", "multihop cooprag train DATA --no-alpha --out DIR",
                    switches=("--no-alpha",), build=build)


def test_an_artifact_is_built_once_found_again_and_refused_on_other_terms(tmp_path):
    calls: list = []
    artifact = counting_artifact(calls)
    with dspy.context(lm=dspy.LM("openai/builder")):
        made = build_missing(tmp_path, [(artifact, "musique"), (artifact, "musique")], {}, 5, "minilm",
                             progress=False)
        folder = artifact_folder(tmp_path, artifact, "musique")
        assert made == {("encoder-no-alpha", "musique"): folder} and calls == [("musique", 5)]
        record = json.loads((folder / BUILT).read_text())
        assert record["switches"] == ["--no-alpha"] and record["train_questions"] == 5
        assert record["lm"] == "openai/builder" and record["encoder"] == "minilm"
        assert build_missing(tmp_path, [(artifact, "musique")], {}, 5, "minilm", progress=False) == made
        assert calls == [("musique", 5)]  # the second run finds it
        assert built_artifacts(tmp_path, {artifact.name: artifact}, ["musique", "2wiki"]) == made
        with pytest.raises(ValueError, match="was built with .* remove it, or build with its terms"):
            build_missing(tmp_path, [(artifact, "musique")], {}, 40, "minilm", progress=False)


def test_an_artifact_that_cannot_be_built_here_is_left_to_its_command(tmp_path):
    artifact = Artifact("classifier", "classifier", "multihop adaptiverag train ...", per_dataset=False)
    assert build_missing(tmp_path, [(artifact, None)], {}, 5, "mpnet", progress=False) == {}


def test_given_artifacts_are_checked_and_a_per_dataset_one_serves_every_dataset(tmp_path):
    known = paper_artifacts(select_tables(paper_of("CoopRAG"), ["5"]))
    assert set(known) == {"encoder", "encoder-no-alpha", "encoder-no-omega", "encoder-no-alpha-no-omega"}
    assert given_artifacts({"encoder": tmp_path}, known, ["musique", "2wiki"]) == {
        ("encoder", "musique"): tmp_path, ("encoder", "2wiki"): tmp_path}
    assert given_artifacts({"encoder@2wiki": tmp_path}, known, ["musique", "2wiki"]) == {("encoder", "2wiki"): tmp_path}
    with pytest.raises(ValueError, match="need no artifact 'classifier'; they need encoder, encoder-no-alpha"):
        given_artifacts({"classifier": tmp_path}, known, ["musique"])
    with pytest.raises(ValueError, match="hotpotqa is not run here"):
        given_artifacts({"encoder@hotpotqa": tmp_path}, known, ["musique"])
    with pytest.raises(ValueError, match="is no folder"):
        given_artifacts({"encoder": tmp_path / "missing"}, known, ["musique"])


def test_a_reranker_model_is_given_as_a_folder_or_a_hub_id_and_one_not_found_is_refused(tmp_path, monkeypatch):
    import huggingface_hub

    def snapshot_download(repo_id, revision=None, **kwargs):  # offline, a hub whose cache holds org/cached alone
        if repo_id != "org/cached":
            raise huggingface_hub.errors.LocalEntryNotFoundError(f"{repo_id} is not cached")
        snapshot = tmp_path / "hub" / "models--org--cached" / "snapshots" / (revision or "c0ffee")
        snapshot.mkdir(parents=True, exist_ok=True)
        (snapshot / "config.json").write_text("{}")
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.chdir(tmp_path)
    known = paper_artifacts(select_tables(paper_of("DualRAG"), ["15"]))
    assert set(known) == {"reranker"} and known["reranker"].stand_in == "maxsim"
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    assert given_artifacts({"reranker": tmp_path / "model"}, known, ["musique"]) == {("reranker", None): tmp_path /
                                                                                    "model"}
    assert given_artifacts({"reranker": "org/cached"}, known, ["musique"]) == {  # pinned: the rows name what ran
        ("reranker", None): Path("org/cached@c0ffee")}
    with pytest.raises(ValueError, match=r"^--artifact reranker: the model 'BAAI/bge-reranker-v2-m3' is not a local "
                                         r"path and not in the Hugging Face cache") as caught:
        given_artifacts({"reranker": "BAAI/bge-reranker-v2-m3"}, known, ["musique"])
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="neither a model folder"):
        given_artifacts({"reranker": tmp_path}, known, ["musique"])
