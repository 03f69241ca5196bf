"""``multihop reproduce``: every declared table of the five papers runs again on one question per dev set it reports,
against an LM that answers every stage from its schema (the loopback server, with token log-probabilities for
FLARE): every runnable row runs, every cell holds ours or says why it is the paper's alone, and the paper's numbers
are in the output. Plus ``--list``, the table selection and a row whose program cannot take the questions."""

import json

import dspy
import pytest
from typer.testing import CliRunner

from multihop.cli import app
from multihop.cli.errors import run
from multihop.evaluation import runner as evaluation_runner
from multihop.experiments.reproduce import (
    describe_tables,
    paper_of,
    reproduce,
    select_tables,
    table_slug,
)
from multihop.experiments.reproduced_tables import cell_text, paired_lines
from multihop.lm.adapter import default_adapter
from multihop.lm.backends import make_lm
from multihop.lm.loopback import loopback_server
from multihop.programs import PROGRAMS
from multihop.programs.hanrag.program import REVELATOR_STAGES
from multihop.programs.papers import MEAN

from helpers import data_root, local_ray, loopback_on_musique, runs_rows

runner = CliRunner()
TABLES = [(method.name, table.number) for method in PROGRAMS.declared("method") for table in method.tables]
DEV_FILES = {"musique": "musique/dev/musique_qa_100.json", "hotpotqa": "hotpotqa/dev/hotpot_dev100.jsonl",
             "2wiki": "2wikimultihopqa/dev/2wiki_dev100.jsonl"}


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """A MULTIHOP_DATA whose dev sets hold their first question only (the corpus of each: its paragraphs), and
    MuSiQue's train set its first four."""
    source, root = data_root(), tmp_path_factory.mktemp("data")
    train = root / "musique/train/musique_train.json"
    train.parent.mkdir(parents=True)
    train.write_text(json.dumps(json.loads((source / "musique/train/musique_train.json").read_text())[:4]))
    for relative in DEV_FILES.values():
        target = root / relative
        target.parent.mkdir(parents=True)
        text = (source / relative).read_text()
        if relative.endswith(".json"):
            target.write_text(json.dumps(json.loads(text)[:1]))
        else:
            target.write_text(text.splitlines()[0] + "\n")
    return root


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One MULTIHOP_HOME for the module: each dev set's indexes are built once and shared by every table."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture
def loopback_lm(small_data, home, monkeypatch):
    monkeypatch.setenv("MULTIHOP_DATA", str(small_data))
    monkeypatch.setenv("MULTIHOP_HOME", str(home))
    with loopback_server(latency=0.0, lifetime=600) as server:
        server.logprobs = True  # FLARE reads them
        lm = make_lm("hosted_vllm/loopback", api_base=server.api_base, cache=False)
        dspy.configure(lm=lm, adapter=default_adapter(lm))
        yield server


@pytest.mark.slow  # MiniLM indexes of three dev questions' paragraphs; 2 minutes in all
@pytest.mark.parametrize("paper, number", TABLES, ids=[f"{paper}-{number}" for paper, number in TABLES])
def test_every_declared_table_runs_its_rows_and_shows_the_papers_numbers_beside_ours(paper, number, loopback_lm,
                                                                                      tmp_path):
    out = tmp_path / "out"
    index = reproduce(paper, out, tables=[number], limit=1, encoder="minilm", progress=False,
                      judge_lm=dspy.settings.lm)  # the LLM Eval columns' judge
    table = select_tables(paper_of(paper), [number])[0]
    assert index["tables"][0]["table"] == number
    reproduced = json.loads((out / f"{table_slug(table)}.json").read_text())
    declared_rows = [row for row in reproduced["rows"] if not row["stand_in"]]
    assert [row["label"] for row in declared_rows] == [row.label for row in table.rows]
    assert all(row["label"].endswith(f"(ours: {dspy.settings.lm.model})") and row["runs_here"]
               for row in reproduced["rows"] if row["stand_in"])
    ran = set(reproduced["datasets"])
    assert ran == {dataset for dataset, _ in table.columns} & set(DEV_FILES)
    paper_only = {metric for metric, keys in table.counts.items() if not keys}
    for declared, row in zip(table.rows, declared_rows, strict=True):
        for cell in row["cells"]:
            assert cell["paper"] == declared.numbers.get((cell["dataset"], cell["metric"]))
            if row["runs_here"] and cell["dataset"] in ran | {MEAN} and cell["metric"] not in paper_only:
                assert cell["ours"] is not None, (row["label"], cell)  # every cell of a row that ran is filled
            else:
                assert cell["ours"] is None and (row["why_not"] or cell["dataset"] not in ran
                                                 or cell["metric"] in paper_only)
    markdown = (out / f"{table_slug(table)}.md").read_text()
    printed = [cell_text(cell) for row in reproduced["rows"] for cell in row["cells"] if cell["paper"] is not None]
    assert printed and all(text in markdown for text in printed)  # the paper's number in every cell it prints
    if any(row["runs_here"] for row in reproduced["rows"]) and ran:
        assert (out / table_slug(table) / "report.html").is_file()


def test_a_cell_shows_ours_the_papers_and_the_difference_as_the_paper_prints_the_metric():
    assert cell_text({"metric": "em", "ours": 0.25, "paper": 0.298, "difference": 0.25 - 0.298}) == \
        "25.0 / 29.8 (-4.8)"
    assert cell_text({"metric": "steps", "ours": 2.0, "paper": 1.5, "difference": 0.5}) == "2.00 / 1.50 (+0.5)"
    assert cell_text({"metric": "f1", "ours": None, "paper": 0.4, "difference": None}) == "– / 40.0"
    assert cell_text({"metric": "f1", "ours": 0.4, "paper": None, "difference": None}) == "40.0 / –"


def test_tables_are_named_as_the_paper_names_them_and_an_unknown_one_lists_the_tables():
    method = paper_of("hanrag")
    assert [table.number for table in select_tables(method, ["2", "App. E"])] == ["Table 2", "App. E"]
    assert select_tables(method, ["table 1"])[0].number == "Table 1"
    with pytest.raises(ValueError, match="declares no table 9; its tables: Table 1, Table 2"):
        select_tables(method, ["9"])
    with pytest.raises(ValueError, match="no paper named 'IRCoT' declares tables; choose from CoopRAG, DualRAG"):
        paper_of("IRCoT")


def test_list_shows_every_papers_tables_and_which_rows_run_here():
    described = describe_tables(PROGRAMS.declared("method"))
    assert {info["paper"] for info in described} == {"CoopRAG", "DualRAG", "ComposeRAG", "HANRAG", "CIRAG"}
    hanrag = next(info for info in described if info["paper"] == "HANRAG" and info["table"] == "Table 2")
    revelator = next(row for row in hanrag["rows"] if row["label"] == "HANRAG")
    assert revelator["state"] == "runs once given" and "--student HANRAG=DIR" in revelator["why_not"]
    cooprag = next(info for info in described if info["paper"] == "CoopRAG" and info["table"] == "Table 5")
    assert {row["state"] for row in cooprag["rows"]} == {"runs once built"}
    composerag = next(info for info in described if info["paper"] == "ComposeRAG" and info["table"] == "Table 1")
    assert next(row for row in composerag["rows"] if row["label"] == "RQ-RAG")["state"] == "cannot run here"
    listed = runner.invoke(app, ["reproduce", "--list"], terminal_width=200).output
    assert all(f"{paper} {number}" in listed for paper, number in TABLES)
    assert "runs once built: needs encoder-no-alpha" in listed


def test_list_shows_the_rows_that_run_when_given_a_model_and_those_on_a_stand_in_with_the_option(monkeypatch):
    from multihop.retrievers import CACHED_FIRST_STAGES

    monkeypatch.setitem(CACHED_FIRST_STAGES, "plaid", lambda *args, **kwargs: None)  # never built by --list
    listed = " ".join(runner.invoke(app, ["reproduce", "--list", "CoopRAG", "--table", "12"],
                                    terminal_width=400).output.split())
    assert "IRCoT + ColBERTv2: IRCoT(k=5, max_steps=8, max_paragraphs=15) (runs when given: --artifact colbert=DIR" \
        in listed
    listed = " ".join(runner.invoke(app, ["reproduce", "--list", "DualRAG", "--table", "15"],
                                    terminal_width=400).output.split())
    assert ("DualRAG on Qwen2.5-72B-Instruct: DualRAG(k=10) (runs on a stand-in: MaxSim stand-in for "
            "bge-reranker-v2-m3; the paper's runs when given: --artifact reranker=MODEL)") in listed
    assert "w/o rerank on Qwen2.5-72B-Instruct: DualRAG(k=10, rerank=None) (runs)" in listed


@pytest.mark.slow  # a MiniLM index of one question's paragraphs and DualRAG's loop, with and without the model (~30 s)
def test_dualrags_rows_run_the_cross_encoder_given_and_name_maxsim_a_stand_in_without_it(loopback_lm, tmp_path):
    from helpers import tiny_cross_encoder

    model = tiny_cross_encoder(tmp_path / "reranker")
    stand_in = reproduce("DualRAG", tmp_path / "maxsim", tables=["15"], datasets=["musique"], limit=1,
                         encoder="minilm", progress=False)
    markdown = (tmp_path / "maxsim" / "table-15.md").read_text()
    assert ("- ours, in place of the paper's model: MaxSim stand-in for bge-reranker-v2-m3; the paper's runs when "
            "given: --artifact reranker=MODEL") in markdown
    assert "rerank bge-reranker-v2-m3 → top 10" in markdown  # the paper's setting, on the paper's line
    manifest = json.loads((tmp_path / "maxsim" / "table-15" / "musique" / "DualRAG" / "run.json").read_text())
    assert manifest["config"]["rerank"] == "maxsim"
    assert manifest["artifacts"] == {"reranker": "not given: MaxSim stand-in for bge-reranker-v2-m3"}
    given = reproduce("DualRAG", tmp_path / "given", tables=["15"], datasets=["musique"], limit=1, encoder="minilm",
                      progress=False, artifacts={"reranker": model})
    assert given["artifacts"] == {"reranker": str(model)} and stand_in["artifacts"] == {}
    markdown = (tmp_path / "given" / "table-15.md").read_text()
    assert "stand-in" not in markdown and f'"cross-encoder:{model}"' in markdown
    run_folder = tmp_path / "given" / "table-15" / "musique" / "DualRAG"
    assert json.loads((run_folder / "run.json").read_text())["config"]["rerank"] == f"cross-encoder:{model}"
    traces = [json.loads(path.read_text()) for path in (run_folder / "traces").glob("*.json")]
    assert traces and any(record["kind"] == "rerank" for trace in traces for record in trace)


def test_a_row_whose_artifact_is_missing_shows_the_papers_numbers_with_the_command_that_makes_it(loopback_lm,
                                                                                                  tmp_path):
    reproduce("HANRAG", tmp_path, tables=["2"], datasets=["musique"], limit=1, progress=False)
    rows = {row["label"]: row for row in json.loads((tmp_path / "table-2.json").read_text())["rows"]}
    oracle = rows["Adaptive-RAG w/ Oracle (Jeong et al.'s oracle row; ours)"]
    assert not oracle["runs_here"] and "multihop adaptiverag labels --dataset DATA --split dev" in oracle["why_not"]
    assert "--artifact oracle-labels@musique=DIR" in oracle["why_not"]
    assert rows["No retrieval"]["runs_here"] and rows["No retrieval"]["cells"][0]["ours"] is not None


def test_the_command_line_runs_a_table_and_refuses_a_paper_without_tables(loopback_lm, tmp_path, capsys):
    assert run(app, ["reproduce", "IRCoT", "--out", str(tmp_path)]) == 2
    assert "no paper named 'IRCoT' declares tables" in capsys.readouterr().err
    assert run(app, ["reproduce", "HANRAG", "--table", "5", "--out", str(tmp_path), "--lm", "hosted_vllm/loopback",
                     "--api-base", loopback_lm.api_base, "--limit", "1"]) == 0
    assert "HANRAG, Table 5" in (tmp_path / "table-5.md").read_text()


def test_a_row_that_runs_stages_on_a_student_runs_when_its_program_has_one(loopback_lm, tmp_path):
    from multihop.lm.options import LMOptions

    options = LMOptions(lm="hosted_vllm/loopback", api_base=loopback_lm.api_base)
    reproduce("HANRAG", tmp_path / "base", tables=["2"], datasets=["musique"], limit=1, lm=options, progress=False)
    rows = {row["label"]: row for row in json.loads((tmp_path / "base" / "table-2.json").read_text())["rows"]}
    assert not rows["HANRAG"]["runs_here"] and "--student HANRAG=DIR" in rows["HANRAG"]["why_not"]
    loopback_lm.requests.clear()
    reproduce("HANRAG", tmp_path / "student", tables=["2"], datasets=["musique"], limit=1, lm=options,
              students={"hanrag": "hosted_vllm/revelator"}, progress=False)
    rows = {row["label"]: row for row in json.loads((tmp_path / "student" / "table-2.json").read_text())["rows"]}
    assert rows["HANRAG"]["runs_here"] and rows["HANRAG"]["cells"][0]["ours"] is not None
    # the student served the Revelator's stages only: the generator stayed on the base LM (HANRAG, App. D)
    assert {body["model"] for body in loopback_lm.requests} == {"revelator", "loopback"}
    manifest = json.loads((tmp_path / "student" / "table-2" / "musique" / "HANRAG" / "run.json").read_text())
    assert manifest["student"] == "hosted_vllm/revelator"
    assert manifest["student_stages"] == list(REVELATOR_STAGES)


def test_a_row_whose_paper_lm_is_mapped_runs_on_that_lm_under_its_own_label(loopback_lm, tmp_path):
    from multihop.lm.options import LMOptions

    options = LMOptions(lm="hosted_vllm/loopback", api_base=loopback_lm.api_base)
    reproduce("HANRAG", tmp_path, tables=["2"], datasets=["musique"], limit=1, lm=options, progress=False,
              students={"hanrag": "hosted_vllm/revelator", "hanrag@FLAN-T5-XL (3B)": "hosted_vllm/fair-revelator"},
              lm_for={"FLAN-T5-XL (3B)": "hosted_vllm/fair"})
    reproduced = json.loads((tmp_path / "table-2.json").read_text())
    fair = next(row for row in reproduced["rows"] if row["label"].startswith("HANRAG-Fair"))
    assert fair["label"] == "HANRAG-Fair (FLAN-T5-XL (3B) → hosted_vllm/fair)" and fair["runs_here"]
    assert fair["lm"] == "hosted_vllm/fair" and fair["paper_lm"] == "FLAN-T5-XL (3B)"
    assert {"fair", "fair-revelator"} <= {body["model"] for body in loopback_lm.requests}
    assert reproduced["ours"]["lm_for"] == {"FLAN-T5-XL (3B)": "hosted_vllm/fair"}
    markdown = (tmp_path / "table-2.md").read_text()
    assert "paper LMs mapped: FLAN-T5-XL (3B) → `hosted_vllm/fair`" in markdown
    assert "- ours, retrieval: bm25 first stage over " in markdown and "musique: fewer than 50 questions" in markdown


def test_a_cell_carries_its_interval_and_the_paired_test_against_the_method_row_is_listed():
    cell = {"metric": "em", "ours": 0.5, "paper": 0.298, "difference": 0.5 - 0.298, "interval": [0.25, 0.75],
            "dataset": "musique", "paired": {"difference": -0.25, "interval": [-0.5, 0.0], "p_value": 0.5, "n": 4}}
    assert cell_text(cell) == "50.0 [25.0–75.0] / 29.8 (+20.2)"
    lines = paired_lines({"reference": "HANRAG", "rows": [{"label": "IRCoT", "cells": [cell]}]})
    assert "| IRCoT | musique em | -25.0 [-50.0, +0.0] | 0.500 | 4 |" in lines


@pytest.mark.slow  # two MiniLM encoders fine-tuned on two questions, each indexing one question's paragraphs
def test_build_trains_each_rows_encoder_and_every_row_runs_on_its_own(loopback_lm, tmp_path):
    from multihop.lm.options import LMOptions

    options = LMOptions(lm="hosted_vllm/loopback", api_base=loopback_lm.api_base)
    reproduce("CoopRAG", tmp_path, tables=["20"], datasets=["musique"], limit=1, lm=options, encoder="minilm",
              build=True, build_limit=2, progress=False)
    reproduced = json.loads((tmp_path / "table-20.json").read_text())
    assert all(row["runs_here"] for row in reproduced["rows"])
    runs = [row["runs"]["musique"] for row in reproduced["rows"]]
    assert len({run["encoder"]["sha256"] for run in runs}) == 2  # two encoders, by their weights
    assert all(run["encoder"]["fine_tuned"] and run["pooling"] == "cls" for run in runs)
    assert [run["encoder_switches"] for run in runs] == [["--loss bce"], []]
    manifest = json.loads((tmp_path / "table-20" / "musique" / "Cross-entropy" / "run.json").read_text())
    assert manifest["encoder"]["sha256"] == runs[0]["encoder"]["sha256"]
    built = json.loads((tmp_path / "artifacts" / "musique" / "encoder-loss-bce" / "built.json").read_text())
    assert built["train_questions"] == 2 and built["switches"] == ["--loss bce"]
    assert "fine-tuned (--loss bce" in (tmp_path / "table-20.md").read_text()


def test_a_row_two_tables_run_alike_runs_once_and_both_tables_show_it(loopback_lm, tmp_path):
    from multihop.lm.options import LMOptions

    options = LMOptions(lm="hosted_vllm/loopback", api_base=loopback_lm.api_base)
    reproduce("HANRAG", tmp_path, tables=["2", "App. E"], datasets=["musique"], limit=1, lm=options, progress=False,
              students={"hanrag": "hosted_vllm/revelator"})
    table_2 = {row["label"]: row for row in json.loads((tmp_path / "table-2.json").read_text())["rows"]}
    app_e = {row["label"]: row for row in json.loads((tmp_path / "app-e.json").read_text())["rows"]}
    assert app_e["HANRAG (ours)"]["runs"]["musique"]["folder"] == table_2["HANRAG"]["runs"]["musique"]["folder"]
    assert app_e["HANRAG (ours)"]["cells"][0]["ours"] == table_2["HANRAG"]["cells"][0]["ours"]
    assert (tmp_path / "app-e" / "report.html").is_file()


@pytest.mark.slow  # a local two-CPU Ray cluster; a table's four rows on four questions, here and on Ray (~40 s)
def test_a_table_run_on_ray_is_the_table_of_a_local_run(tmp_path, monkeypatch):
    one, on_ray = tmp_path / "one", tmp_path / "ray"
    with loopback_on_musique(tmp_path, monkeypatch) as flags, local_ray():
        command = ["reproduce", "HANRAG", "--table", "2", "--datasets", "musique", "--limit", "4", *flags]
        assert run(app, [*command, "--out", str(one)]) == 0
        monkeypatch.setattr(evaluation_runner, "run_question", None)  # no question is answered in this process
        assert run(app, [*command, "--out", str(on_ray), "--ray", "auto", "--threads", "2"]) == 0
    assert (on_ray / "table-2.md").read_bytes() == (one / "table-2.md").read_bytes()
    assert json.loads((on_ray / "table-2.json").read_text().replace(str(on_ray), str(one))) == json.loads(
        (one / "table-2.json").read_text())
    assert runs_rows(on_ray) == runs_rows(one) and len(runs_rows(one)) == 4
    assert all(len(rows) == 4 for rows in runs_rows(on_ray).values())


def test_a_shard_that_would_build_its_own_artifacts_is_refused_in_one_line(tmp_path, capsys):
    assert run(app, ["reproduce", "CoopRAG", "--table", "20", "--out", str(tmp_path), "--shard", "1/2", "--build"]) == 2
    assert "error: --shard with --build would train each shard's artifacts apart" in capsys.readouterr().err
