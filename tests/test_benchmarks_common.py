import argparse
import json
import runpy
import sys

import dspy
import pytest

from multihop.data.loaders import questions_with_corpus
from multihop.data.question_sets import DATASETS, question_file
from multihop.lm.options import LMOptions
from multihop.programs import ComposeRAG

from helpers import data_root

BENCHMARKS = ["cirag", "composerag", "cooprag", "dualrag", "hanrag", "optimize", "retrieval"]


def test_dataset_names_resolve_to_their_files_in_multihop_data(tmp_path):
    root = data_root()
    for dataset in DATASETS:
        for split in ("dev", "train"):
            path = question_file(dataset, split)
            assert path.is_file() and path.is_relative_to(root)
    assert question_file("musique").parent.name == "dev" and question_file("musique", "train").parent.name == "train"
    assert question_file(tmp_path / "mine.jsonl") == tmp_path / "mine.jsonl"  # a path stays a path
    with pytest.raises(ValueError, match="unknown split"):
        question_file("musique", "test")


def test_questions_come_with_the_union_of_their_paragraphs():
    data_root()
    examples, corpus = questions_with_corpus("musique", limit=3)
    paragraphs = {p["id"] for example in examples for p in example.paragraphs}
    assert len(examples) == 3 and set(corpus.ids) == paragraphs
    assert corpus.source == str(question_file("musique"))


def test_lm_arguments_build_the_lm_and_share_the_server_with_other_lms(monkeypatch):
    import multihop.lm.backends

    built = []
    monkeypatch.setattr(multihop.lm.backends, "make_lm", lambda spec, **settings: built.append((spec, settings)))
    monkeypatch.setenv("MULTIHOP_API_KEY", "from-env")
    parser = argparse.ArgumentParser()
    LMOptions.add_arguments(parser, max_tokens=128)
    options = LMOptions.from_args(parser.parse_args(["--lm", "local:smollm2", "--adapter", "lora",
                                                     "--api-base", "http://host/v1", "--engine", "transformers",
                                                     "--lm-timeout", "30"]))
    assert options == LMOptions("local:smollm2", "http://host/v1", "from-env", "lora", 128, "transformers", 30.0)
    options.make()
    options.make(max_tokens=16)
    options.make("openai/judge")
    options.make("local:student")
    server = {"api_base": "http://host/v1", "api_key": "from-env", "timeout": 30.0, "structured": "auto"}
    local = {**server, "adapter": "lora", "engine": "transformers"}
    assert built == [("local:smollm2", {**local, "max_tokens": 128}), ("local:smollm2", {**local, "max_tokens": 16}),
                     ("openai/judge", {**server, "adapter": None, "max_tokens": None}),  # the adapter is the LM's own
                     ("local:student", {**local, "api_base": None, "adapter": None, "max_tokens": None})]  # in-process


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_runs_as_a_module_and_takes_the_shared_lm_arguments(name, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    with pytest.raises(SystemExit) as done:
        runpy.run_module(f"multihop.benchmarks.{name}", run_name="__main__")
    usage = capsys.readouterr().out
    assert done.value.code == 0 and "usage:" in usage
    lm_flags = ("--lm", "--api-base", "--api-key", "--adapter", "--max-tokens")
    assert all(flag in usage for flag in lm_flags) == (name != "retrieval")  # the retrieval benchmark runs no LM


def test_composerag_rows_keep_the_retrieval_decision_fixed_in_table_3_and_upgrade_on_its_all_modules_setting(
        static_retriever):
    from multihop.benchmarks.composerag import row_programs

    upgrade = dspy.LM("openai/upgrade")
    rows = row_programs(static_retriever, reflections=3, upgrade_lm=upgrade)
    table3 = [program for name, _, program in rows[:5]]
    assert {program.retrieval_decision for program in table3} == {False}  # the same in every Table 3 row
    all_modules = table3[-1].config()
    assert all_modules["simple_qa"] is False and all_modules["max_reflections"] == 0
    table6 = [program.config() for name, _, program in rows if "Table 6" in name]
    assert table6 == [all_modules, {**all_modules, "simple_qa": True}]  # Table 3's last row without and with the path
    figure5 = [program for name, _, program in rows if "Fig. 5" in name]
    assert [p.max_reflections for p in figure5] == [0, 1, 2, 3]  # the curve's points
    assert figure5[-1].config() == ComposeRAG(retriever=static_retriever).config()  # its last point: the default
    assert all(p.simple_qa and p.retrieval_decision for p in figure5)  # §6.1: the simple path is on at 0 rounds
    table5 = {name: program for name, _, program in rows if "Table 5" in name}
    assert [p.retrieval_decision for p in table5.values()] == [False, True, True]  # off, on, upgraded
    upgraded_rd = next(p for name, p in table5.items() if "upgraded" in name)
    assert upgraded_rd.decide.lm is upgrade and upgraded_rd.answer.lm is None
    table4 = [program for name, _, program in rows if "Table 4" in name]
    assert len(table4) == 6 and all(p.config() == all_modules for p in table4)  # Table 3's all-modules setting
    assert table4[0].decompose.lm is upgrade and table4[0].construct.lm is None  # QD first, then QC, ...


def test_evaluate_rows_runs_the_chosen_rows_each_into_its_folder(tmp_path):
    from multihop.benchmarks.common import evaluate_rows, run_folder
    from multihop.data.corpus import Corpus, Passage

    from helpers import Echo, echo_examples, scripted_lm

    lm, _ = scripted_lm(lambda prompt: {"answer": "x"})
    rows = [("first", "a", Echo()), ("second", "b", Echo("y")), ("third", "c", Echo())]
    out = run_folder(tmp_path, lm, "musique", Corpus([Passage.make("T", "text")]))
    assert out.parent == tmp_path and out.name.startswith("scripted-musique-")
    summaries = evaluate_rows(rows, echo_examples(4), out, lm, chosen="2,3")
    assert list(summaries) == ["second", "third"] and sorted(p.name for p in out.iterdir()) == ["b", "c"]
    assert summaries["second"]["em"] == 0.5 and summaries["third"]["em"] == 0.5  # "y" is right on the odd questions


def test_a_rows_rollout_id_is_its_row_number_whichever_rows_are_chosen(tmp_path, monkeypatch):
    import multihop.evaluation.runner
    from multihop.benchmarks.common import evaluate_rows

    from helpers import Echo, scripted_lm

    seen = {}
    monkeypatch.setattr(multihop.evaluation.runner, "evaluate", lambda program, *args, name, **kw: seen.update(
        {name: dspy.settings.lm.kwargs.get("rollout_id")}))
    rows = [("first", "a", Echo()), ("second", "b", Echo()), ("third", "c", Echo())]
    lm, _ = scripted_lm(lambda prompt: {"answer": "x"})
    evaluate_rows(rows, [], tmp_path, lm, chosen="3")
    evaluate_rows(rows[:1], [], tmp_path, lm, start=4)
    assert seen == {"third": 3, "first": 4}  # row 3 keeps its own id when run alone; a second call goes on


def test_each_benchmark_prints_its_papers_baselines_as_its_paper_ran_them():
    from multihop.benchmarks.common import baseline_rows
    from multihop.data.corpus import Corpus, Passage
    from multihop.programs.budget import Budget
    from multihop.retrievers import BM25Retriever

    retriever = BM25Retriever(Corpus([Passage.make("Paris", "Paris is in France."), Passage.make("Rome", "Rome.")]))
    rows = baseline_rows("DualRAG", retriever, Budget(k=10, max_iterations=5), skip=("SingleStepRAG",),
                         rerank="maxsim", n=50)  # §4.3: 5 iteration steps, top 50 → reranker → top 10
    programs = {name.split(" ")[0]: program for name, _, program in rows}
    assert list(programs) == ["NoRetrieval", "IRCoT", "MetaRAG", "GenGround", "FLARE"]
    assert programs["IRCoT"].config()["max_steps"] == 5 and programs["IRCoT"].config()["rerank"] == "maxsim"
    assert programs["MetaRAG"].config()["max_iterations"] == programs["GenGround"].config()["max_iterations"] == 5
    assert programs["FLARE"].config()["max_sentences"] == 5 and programs["NoRetrieval"].config() == {}
    assert all(program.config().get("k", 10) == 10 for program in programs.values())
    paper = baseline_rows("HANRAG", retriever, Budget(mode="paper"), skip=("NoRetrieval", "SingleStepRAG",
                                                                             "AdaptiveRAG"), k=5)
    assert [(name, program.config()["k"], program.config()["max_steps"]) for name, _, program in paper] == [
        ("IRCoT (baseline)", 5, 8)]  # its paper's step cap, the benchmark's k


def test_the_method_benchmarks_end_with_their_papers_baselines(monkeypatch):
    from multihop.benchmarks import cirag, composerag, dualrag, hanrag
    from multihop.data.corpus import Corpus, Passage
    from multihop.retrievers import BM25Retriever

    monkeypatch.setattr(sys, "argv", ["x"])
    retriever = BM25Retriever(Corpus([Passage.make("Paris", "Paris is in France."), Passage.make("Rome", "Rome.")]))
    tails = {
        "dualrag": dualrag.row_programs(retriever, [])[-5:],
        "cirag": cirag.row_programs(retriever, None, [], False)[-4:],  # online extraction: no cache to read
        "hanrag": hanrag.row_programs(retriever)[-1:],
        "composerag": composerag.row_programs(retriever, 0)[-1:],
    }
    names = {bench: [name.split(" ")[0] for name, _, _ in rows] for bench, rows in tails.items()}
    assert names == {"dualrag": ["NoRetrieval", "IRCoT", "MetaRAG", "GenGround", "FLARE"],
                     "cirag": ["IRCoT", "FLARE", "MetaRAG", "DualRAG"], "hanrag": ["IRCoT"],
                     "composerag": ["SelfAsk"]}
    ircot = {bench: rows[names[bench].index("IRCoT")][2].config() for bench, rows in tails.items() if
             "IRCoT" in names[bench]}
    assert (ircot["dualrag"]["k"], ircot["dualrag"]["max_steps"], ircot["dualrag"]["rerank"]) == (10, 5, "maxsim")
    assert (ircot["cirag"]["k"], ircot["cirag"]["max_steps"], ircot["cirag"]["rerank"]) == (10, 4, None)
    assert (ircot["hanrag"]["k"], ircot["hanrag"]["max_steps"]) == (5, 8)


def test_the_adaptive_rag_oracle_labels_each_question_by_the_simplest_strategy_row_that_answered(tmp_path):
    from multihop.benchmarks.hanrag import STRATEGY_ROWS, oracle_folder, oracle_labels

    answered = {"A": {"q1"}, "B": {"q1", "q2"}, "C": {"q2", "q3"}}  # q4: none → the multi-hop bias, C
    for label, folder in STRATEGY_ROWS.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "results.jsonl").write_text("".join(
            json.dumps({"id": qid, "metrics": {"em": float(qid in answered[label])}}) + "\n"
            for qid in ("q1", "q2", "q3", "q4")))
    examples = [dspy.Example(id=qid, question="?", dataset="musique") for qid in ("q1", "q2", "q3", "q4")]
    labels = oracle_labels(tmp_path, examples)
    assert labels == {"q1": "A", "q2": "B", "q3": "C", "q4": "C"}
    assert oracle_folder(labels) == oracle_folder(dict(reversed(labels.items())))
    assert oracle_folder(labels) != oracle_folder({**labels, "q4": "B"})  # other labels: another run's folder
    with (tmp_path / "single-step" / "results.jsonl").open("a") as rows:
        rows.write(json.dumps({"id": "q5", "error": "ConnectionError: dead", "metrics": {}}) + "\n")
    with pytest.raises(ValueError, match="question q5 has no answer in the no-retrieval, single-step, baseline-ircot"):
        oracle_labels(tmp_path, [*examples, dspy.Example(id="q5", question="?", dataset="musique")])
