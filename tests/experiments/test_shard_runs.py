"""``compare``/``reproduce --shard i/n`` and ``multihop merge``: the shards of a paper's table and of a comparison,
merged, write the folder one unsharded run writes (the table file bit for bit, every row but the seconds it took);
merging refuses shards of another run, a missing, repeated or unfinished shard, in one line."""

import json

import pytest

from multihop.cli import app
from multihop.cli.errors import run
from multihop.data.jsonl import read_rows
from multihop.evaluation.sharding import ShardError
from multihop.experiments.shard_runs import SHARD_RECORD, join_shard_runs, record_shard
from multihop.lm.options import LMOptions

from helpers import loopback_on_musique, runs_rows, without_seconds

LM = LMOptions(lm="hosted_vllm/loopback", api_base="http://127.0.0.1:9/v1")


@pytest.fixture
def loopback(tmp_path, monkeypatch):
    with loopback_on_musique(tmp_path, monkeypatch) as flags:
        yield flags


@pytest.mark.slow  # a table's four rows on four questions, three times (~20 s)
def test_a_tables_shards_merged_write_the_table_of_one_run(loopback, tmp_path, capsys):
    command = ["reproduce", "HANRAG", "--table", "2", "--datasets", "musique", "--limit", "4", *loopback]
    assert run(app, [*command, "--out", str(tmp_path / "one")]) == 0
    for index in (1, 2):
        assert run(app, [*command, "--out", str(tmp_path / f"shard{index}"), "--shard", f"{index}/2"]) == 0
    assert len(read_rows(tmp_path / "shard1" / "table-2" / "musique" / "No-retrieval" / "results.jsonl")) == 2
    capsys.readouterr()
    assert run(app, ["merge", str(tmp_path / "merged"), str(tmp_path / "shard2"), str(tmp_path / "shard1")]) == 0
    assert "2 shards" in capsys.readouterr().out
    one, merged = tmp_path / "one", tmp_path / "merged"
    assert (merged / "table-2.md").read_bytes() == (one / "table-2.md").read_bytes()
    assert json.loads((merged / "table-2.json").read_text().replace(str(merged), str(one))) == json.loads(
        (one / "table-2.json").read_text())
    assert runs_rows(merged) == runs_rows(one) and len(runs_rows(one)) == 4
    for path in (one / "table-2").rglob("results.jsonl"):  # the rows in the questions' order, as one run writes them
        assert list(read_rows(merged / path.relative_to(one))) == list(read_rows(path))
    assert not (merged / SHARD_RECORD).exists() and (merged / "table-2" / "report.html").is_file()
    assert run(app, [*command, "--out", str(merged)]) == 0  # the merged folder is a finished run: nothing is asked


@pytest.mark.slow  # three programs on four questions, three times (~15 s)
def test_a_comparisons_shards_merged_write_the_comparison_of_one_run(loopback, tmp_path):
    command = ["compare", "--programs", "NoRetrieval,SingleStepRAG,HANRAG", "--datasets", "musique",
               "--first-stage", "bm25", "--k", "2", "--max-iterations", "2", *loopback]
    assert run(app, [*command, "--out", str(tmp_path / "one")]) == 0
    for index in (1, 2):
        assert run(app, [*command, "--out", str(tmp_path / f"shard{index}"), "--shard", f"{index}/2"]) == 0
    assert run(app, ["merge", str(tmp_path / "merged"), str(tmp_path / "shard1"), str(tmp_path / "shard2")]) == 0
    one, merged = tmp_path / "one", tmp_path / "merged"
    assert without_seconds(json.loads((merged / "comparison.json").read_text())) == without_seconds(
        json.loads((one / "comparison.json").read_text()))
    assert runs_rows(merged) == runs_rows(one) and len(runs_rows(one)) == 3


def shard(tmp_path, name: str, index: int, count: int = 2, runs=("musique/NoRetrieval",), **arguments):
    """A shard folder of a comparison as ``compare --shard`` leaves it: its record and its runs' manifests."""
    folder = tmp_path / name
    record_shard(folder, "compare", (index, count), {"programs": ["NoRetrieval"], "lm": LM, **arguments})
    for relative in runs:
        (folder / relative).mkdir(parents=True)
        (folder / relative / "run.json").write_text(json.dumps({"program": "NoRetrieval", "shard": {"index": index}}))
    return folder


def test_merge_refuses_a_missing_a_repeated_a_foreign_or_an_incomplete_shard(tmp_path):
    first, second = shard(tmp_path, "a", 1), shard(tmp_path, "b", 2)
    with pytest.raises(ShardError, match=r"needs shards 1 to 2 once each: missing \[2\]"):
        join_shard_runs(tmp_path / "out", [first])
    with pytest.raises(ShardError, match=r"repeated \[1\]"):
        join_shard_runs(tmp_path / "out", [first, first, second])
    other = shard(tmp_path, "c", 2, limit=8)
    with pytest.raises(ShardError, match=r"c is a shard of another run than .*a \(they differ in limit\)"):
        join_shard_runs(tmp_path / "out", [first, other])
    third = shard(tmp_path, "d", 2, count=3)
    with pytest.raises(ShardError, match="is a shard of another run .*the shard count"):
        join_shard_runs(tmp_path / "out", [first, third])
    fuller = shard(tmp_path, "e", 2, runs=("musique/NoRetrieval", "musique/HANRAG"))
    with pytest.raises(ShardError, match=r"a lacks the runs musique/HANRAG that other shards hold: rerun that shard"):
        join_shard_runs(tmp_path / "out", [first, fuller])
    with pytest.raises(ShardError, match="is not a shard of a comparison or a reproduction"):
        join_shard_runs(tmp_path / "out", [first, tmp_path])
    assert not (tmp_path / "out").exists()


def test_a_shard_folder_of_another_run_and_an_lm_a_merge_cannot_make_are_refused(tmp_path):
    shard(tmp_path, "a", 1)
    with pytest.raises(ValueError, match="holds a shard of another compare run"):
        record_shard(tmp_path / "a", "compare", (2, 2), {"programs": ["NoRetrieval"], "lm": LM})
    with pytest.raises(ValueError, match="--shard needs the LM as a spec"):
        record_shard(tmp_path / "b", "compare", (1, 2), {"lm": None})
    with pytest.raises(ValueError, match="the metric 'near' must be importable"):
        record_shard(tmp_path / "b", "compare", (1, 2), {"lm": LM, "metric": {"near": lambda example, pred: 1.0}})
    assert json.loads((tmp_path / "a" / SHARD_RECORD).read_text())["arguments"]["lm"]["lm"] == LM.lm


def test_a_merge_of_shards_on_the_command_line_is_one_line(tmp_path, capsys):
    first = shard(tmp_path, "a", 1)
    assert run(app, ["merge", str(tmp_path / "out"), str(first)]) == 2
    assert capsys.readouterr().err.strip() == "error: merging needs shards 1 to 2 once each: missing [2]"
