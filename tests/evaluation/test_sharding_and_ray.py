"""A run split over machines: ``--shard i/n`` + ``multihop merge`` without Ray, and Ray for the index
build's encoding and for evaluation (slow: a local Ray cluster the test starts)."""

import json
import sys
from pathlib import Path

import dspy
import numpy as np
import pytest

from multihop.cli import app
from multihop.cli.errors import run
from multihop.data.folders import RUN_MANIFEST
from multihop.data.jsonl import read_rows
from multihop.evaluation.runner import evaluate, run_manifest
from multihop.evaluation.sharding import ShardError, merge_shards, parse_shard, shard_manifest, shard_of
from multihop.programs.base import MultihopProgram

from helpers import ROOT, Echo, data_root, echo_examples


def timeless(rows: dict) -> dict:
    """Rows without the seconds they took (the only field a rerun of the same question changes)."""
    return {qid: {key: value for key, value in row.items() if key != "seconds"} for qid, row in rows.items()}


def sharded_run(tmp_path, examples, count: int, metric=None) -> list[Path]:
    manifest = run_manifest(Echo(), examples)
    folders = []
    for index in range(1, count + 1):
        folder = tmp_path / f"shard{index}"
        evaluate(Echo(), shard_of(examples, index, count), folder, progress=False,
                 manifest=shard_manifest(manifest, examples, index, count), metric=metric)
        folders.append(folder)
    return folders


def test_shards_take_every_nth_question_and_a_bad_shard_is_one_clear_error():
    examples = echo_examples(7)
    assert [e.id for e in shard_of(examples, 1, 3)] == ["q0", "q3", "q6"]
    assert [e.id for e in shard_of(examples, 3, 3)] == ["q2", "q5"]
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "2", "a/b"):
        with pytest.raises(ShardError, match="write i/n with 1 ≤ i ≤ n"):
            parse_shard(bad)


def test_shards_merged_equal_one_run_and_the_merged_folder_resumes_as_finished(tmp_path):
    examples = echo_examples(7)
    whole = evaluate(Echo(), examples, tmp_path / "one", progress=False)
    merged = merge_shards(tmp_path / "merged", sharded_run(tmp_path, examples, 3))
    assert timeless(read_rows(tmp_path / "merged" / "results.jsonl")) == timeless(
        read_rows(tmp_path / "one" / "results.jsonl"))
    assert (json.loads((tmp_path / "merged" / RUN_MANIFEST).read_text()) ==
            json.loads((tmp_path / "one" / RUN_MANIFEST).read_text()))
    assert {key: merged[key] for key in ("questions", "em", "recall@2", "program")} == {
        key: whole[key] for key in ("questions", "em", "recall@2", "program")}
    assert sorted(p.name for p in (tmp_path / "merged" / "traces").iterdir()) == [f"q{i}.json" for i in range(7)]
    program = Echo()
    evaluate(program, examples, tmp_path / "merged", progress=False)  # the unsharded run finds every row recorded
    assert program.seen == []


def test_merged_shards_average_a_users_metrics_as_one_run(tmp_path):
    def long_question(example, prediction, trace=None):
        return float(example.id in ("q1", "q4"))

    examples = echo_examples(5)
    whole = evaluate(Echo(), examples, tmp_path / "one", progress=False, metric={"long": long_question})
    merged = merge_shards(tmp_path / "merged", sharded_run(tmp_path, examples, 2, {"long": long_question}))
    assert merged["metrics"] == whole["metrics"] == ["long"] and merged["long"] == whole["long"] == 0.4


def test_merge_refuses_a_missing_an_unfinished_or_a_foreign_shard(tmp_path):
    examples = echo_examples(6)
    first, second = sharded_run(tmp_path, examples, 2)
    with pytest.raises(ShardError, match=r"needs shards 1 to 2 once each: missing \[2\]"):
        merge_shards(tmp_path / "out", [first])
    with pytest.raises(ShardError, match=r"repeated \[1\]"):
        merge_shards(tmp_path / "out", [first, first, second])
    rows = (second / "results.jsonl").read_text().splitlines()
    (second / "results.jsonl").write_text("\n".join(rows[:-1]) + "\n")
    with pytest.raises(ShardError, match="shard 2/2 in .* has 2 of its 3 questions: rerun it"):
        merge_shards(tmp_path / "out", [first, second])
    other = tmp_path / "other"
    evaluate(Echo(), shard_of(echo_examples(8), 2, 2), other, progress=False,
             manifest=shard_manifest(run_manifest(Echo(), echo_examples(8)), echo_examples(8), 2, 2))
    with pytest.raises(ShardError, match="is a shard of another run"):
        merge_shards(tmp_path / "out", [first, other])
    assert not (tmp_path / "out").exists()


def test_merge_and_shard_mistakes_on_the_command_line_are_one_line(tmp_path, capsys):
    assert run(app, ["merge", str(tmp_path / "merged"), str(tmp_path / "nothing")]) == 2
    assert "holds no evaluation" in capsys.readouterr().err
    data = data_root() / "musique/dev/musique_qa_100.json"
    assert run(app, ["eval", "--program", "NoRetrieval", "--data", str(data), "--out", str(tmp_path / "s"),
                     "--shard", "3/2"]) == 2
    assert "--shard '3/2': write i/n" in capsys.readouterr().err


def test_ray_commands_say_how_to_install_ray_when_it_is_missing(monkeypatch):
    from multihop.evaluation.ray_cluster import RayMissingError, connect

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(RayMissingError, match=r"needs Ray, which is not installed: pip install 'multihop\[ray\]'"):
        connect("auto")


class SearchEcho(MultihopProgram):
    """Retrieves for its question and answers with the first passage's title: a program whose rows come from a real
    index, with no LM to wait for."""

    def __init__(self, retriever):
        super().__init__(retriever=retriever)

    def forward(self, question):
        hits = self.search(question, k=3)
        return dspy.Prediction(answer=hits.passages[0].split(":")[0], passage_ids=list(hits.ids))


def search_echo(folder: str):
    """The recipe of a Ray actor: the program over the saved index ``folder``, no DSPy settings."""
    from multihop.retrievers import load_retriever

    return SearchEcho(load_retriever(folder)), {}


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    here = str(Path(__file__).parent)  # this module and the tests' helpers, for the workers to import
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ":".join([here, str(ROOT / "tests"), *sys.path])}})
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_a_ray_build_equals_the_single_process_build(local_ray, musique_dev, tmp_path, monkeypatch):
    from multihop.data.loaders import build_corpus
    from multihop.retrievers import DenseRetriever, Encoder
    from multihop.retrievers.ray_encoding import ray_encode_corpus

    corpus = build_corpus(musique_dev[:2])
    encoder = Encoder("minilm")
    single = DenseRetriever.build(corpus, encoder=encoder, work_dir=tmp_path / "single", token_layers=())
    here = []  # passages this process encodes during the Ray build: none, the actors do
    real = Encoder.passage_states
    monkeypatch.setattr(Encoder, "passage_states", lambda self, texts, layers=None: here.extend(texts) or
                        real(self, texts, layers))
    on_ray = DenseRetriever.build(corpus, encoder=encoder, work_dir=tmp_path / "ray", token_layers=(), ray="auto")
    assert here == []
    assert len(list((tmp_path / "ray").glob("shard-*.npz"))) == len(list((tmp_path / "single").glob("shard-*.npz")))
    for example in musique_dev[:2]:
        a, b = single(example.question, k=10), on_ray(example.question, k=10)
        assert a.ids == b.ids
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)
    np.testing.assert_allclose(single.tokens.get([0, 7])[0][1], on_ray.tokens.get([0, 7])[0][1], atol=2e-3)
    work = tmp_path / "small-shards"  # resumable per shard: a shard removed is the only one encoded again
    ray_encode_corpus(corpus, encoder, work, shard_size=8, token_layers=(), workers=2)
    (work / "shard-000002.npz").unlink()
    stamps = {path: path.stat().st_mtime_ns for path in work.glob("shard-*.npz")}
    ray_encode_corpus(corpus, encoder, work, shard_size=8, token_layers=(), workers=2)
    assert len(stamps) >= 4 and all(path.stat().st_mtime_ns == stamp for path, stamp in stamps.items())
    assert (work / "shard-000002.npz").exists() and here == []


@pytest.mark.slow
def test_a_ray_evaluation_writes_the_rows_of_a_single_process_one(local_ray, small_retriever, musique_dev,
                                                                 tmp_path):
    from functools import partial

    from multihop.evaluation.ray_cluster import ray_evaluate

    small_retriever.save(tmp_path / "index")
    examples = musique_dev[:6]
    program = search_echo(str(tmp_path / "index"))[0]
    evaluate(program, examples, tmp_path / "one", progress=False)
    summary = ray_evaluate(program, partial(search_echo, str(tmp_path / "index")), examples, tmp_path / "ray",
                           workers=2, progress=False)
    assert timeless(read_rows(tmp_path / "ray" / "results.jsonl")) == timeless(
        read_rows(tmp_path / "one" / "results.jsonl"))
    assert summary["questions"] == 6 and summary["retrieval_calls"] == 1.0
    again = ray_evaluate(program, partial(search_echo, str(tmp_path / "index")), examples, tmp_path / "ray",
                         workers=2, progress=False)  # resumes: nothing left to answer
    assert again["questions"] == 6
