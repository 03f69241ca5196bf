"""Evaluation folders as a DataFrame and a Dataset, and a run's retrievals as TREC files that ranx reads back: a run
of a program with a retriever and an LM stage, one question of which errors, and comparison and reproduce folders laid
out as their commands lay them out."""

import json
import math

import dspy
import pytest

import multihop
from multihop.data.corpus import Passage
from multihop.evaluation.results import (
    ranking,
    ranx_qrels,
    ranx_run,
    results,
    to_dataset,
    write_trec_files,
    write_trec_qrels,
    write_trec_run,
)
from multihop.evaluation.runner import evaluate

from helpers import StaticRetriever, example, scripted_lm

PASSAGES = [Passage.make(title, f"{title} is a city.") for title in ("Paris", "Rome", "Oslo")]
PARIS, ROME, OSLO = (passage.id for passage in PASSAGES)


class ReadThenAnswer(dspy.Module):
    """Retrieves two passages, answers from them; question 2 fails."""

    def __init__(self):
        super().__init__()
        self.retrieve = StaticRetriever(PASSAGES)
        self.answer = dspy.Predict("question, context -> answer")

    def forward(self, question):
        if question == "question 2":
            raise ValueError("no luck")
        context = self.retrieve(question, k=2)
        return self.answer(question=question, context=context.passages)


def questions() -> list[dspy.Example]:
    """Four questions: the first right, gold Paris then Rome (read 1st, 2nd), Oslo (not read), none."""
    gold = [[PARIS], [ROME], [OSLO], [OSLO], []]
    return [example(i, answer="x" if i == 0 else "y", gold_passage_ids=gold[i]) for i in range(5)]


@pytest.fixture
def run(tmp_path):
    lm, _ = scripted_lm(lambda prompt: {"answer": "x"})
    with dspy.context(lm=lm):
        summary = evaluate(ReadThenAnswer(), questions(), tmp_path / "run", progress=False, name="reader")
    return tmp_path / "run", summary


def test_a_run_is_a_frame_a_row_a_question_whose_means_are_the_summarys(run):
    folder, summary = run
    frame = multihop.results(folder)
    assert list(frame.columns[:7]) == ["dataset", "program", "id", "question", "answers", "prediction", "error"]
    assert list(frame["id"]) == ["q0", "q1", "q2", "q3", "q4"] and set(frame["program"]) == {"reader"}
    assert frame.loc[2, "error"] == "ValueError: no luck" and frame.loc[2, "em"] == 0.0  # as the summary counts it
    assert math.isnan(frame.loc[2, "recall@2"]) and math.isnan(frame.loc[4, "ndcg@10"])  # errored; no gold
    assert list(frame["mrr"][:2]) == [1.0, 0.5] and frame.loc[3, "mrr"] == 0.0
    for key in ("em", "f1", "acc", "cover_em", "recall@2", "recall@5", "recall@k", "ndcg@10", "mrr", "llm_calls",
                "retrieval_calls", "tokens", "stage_errors", "seconds"):
        assert frame[key].mean() == pytest.approx(summary[key]), key
    assert frame.loc[0, "stages"] == ["retrieve", "answer"] and frame.loc[0, "stage_calls"] == 2
    assert frame.loc[2, "stages"] == [] and frame.loc[0, "passage_ids"] == [PARIS, ROME]
    assert frame.loc[0, "answers"] == ["x"] and frame.loc[0, "llm_calls"] == 1 and frame.loc[0, "tokens"] > 0


def test_a_frame_becomes_a_dataset(run):
    folder, _ = run
    dataset = to_dataset(folder)
    assert dataset.num_rows == 5 and dataset[0]["stages"] == ["retrieve", "answer"]
    assert dataset.features["passage_ids"].feature.dtype == "string" and dataset[2]["error"] == "ValueError: no luck"
    assert to_dataset(results(folder)).column_names == dataset.column_names


def comparison_folder(out, runs):
    """A comparison.json listing ``runs`` ((dataset, program, folder relative to ``out``)), as compare writes it."""
    out.mkdir(parents=True, exist_ok=True)
    listed = [{"dataset": dataset, "program": program, "folder": folder} for dataset, program, folder in runs]
    (out / "comparison.json").write_text(json.dumps({"runs": listed}))
    return out


def test_a_comparison_and_a_reproduction_are_one_frame_with_their_labels(tmp_path):
    lm, _ = scripted_lm(lambda prompt: {"answer": "x"})
    cmp = tmp_path / "cmp"
    with dspy.context(lm=lm):
        for dataset, count in (("musique", 2), ("hotpotqa", 3)):
            evaluate(ReadThenAnswer(), questions()[:count], cmp / dataset / "Reader", progress=False, name="Reader")
    comparison_folder(cmp, [("musique", "Reader", "musique/Reader"), ("hotpotqa", "Reader", "hotpotqa/Reader"),
                            ("2wiki", "Reader", "2wiki/Reader")])  # a run not there yet: no rows
    frame = results(cmp)
    assert list(frame.columns[:3]) == ["dataset", "program", "id"]
    assert frame.groupby("dataset").size().to_dict() == {"hotpotqa": 3, "musique": 2}

    reproduced = tmp_path / "reproduce"
    (reproduced / "reproduce.json").parent.mkdir()
    (reproduced / "reproduce.json").write_text("{}")
    comparison_folder(reproduced / "table-2", [("musique", "Ours (Reader)", "../../cmp/musique/Reader")])
    comparison_folder(reproduced / "table-3", [("hotpotqa", "Reader", "../../cmp/hotpotqa/Reader")])
    rows = results(reproduced)
    assert list(rows.columns[:3]) == ["table", "dataset", "program"]
    assert rows[["table", "program"]].drop_duplicates().values.tolist() == [["table-2", "Ours (Reader)"],
                                                                            ["table-3", "Reader"]]


def test_a_folder_without_rows_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no results.jsonl"):
        results(tmp_path)


@pytest.mark.slow  # ranx's measures are numba code, compiled on first use (~50 s in a fresh venv)
def test_the_trec_run_holds_each_answered_questions_passages_in_order_and_ranx_reads_it(run, tmp_path):
    ranx = pytest.importorskip("ranx")
    folder, summary = run
    path = write_trec_run(folder, tmp_path / "reader.trec")
    lines = path.read_text().splitlines()
    assert lines[:2] == [f"q0 Q0 {PARIS} 1 2 reader", f"q0 Q0 {ROME} 2 1 reader"] and len(lines) == 8  # not q2
    read = ranx.Run.from_file(str(path), kind="trec")
    assert {qid: sorted(docs, key=docs.get, reverse=True) for qid, docs in read.to_dict().items()} == ranking(folder)
    assert read.name == "reader"
    qrels = ranx.Qrels.from_file(str(write_trec_qrels(questions(), tmp_path / "gold.qrels")), kind="trec")
    assert qrels.to_dict() == {"q0": {PARIS: 1}, "q1": {ROME: 1}, "q2": {OSLO: 1}, "q3": {OSLO: 1}}
    answered = ranx_qrels([q for q in questions() if q.id in ("q0", "q1", "q3")])
    scores = ranx.evaluate(answered, ranx_run(folder), ["ndcg@10", "mrr", "recall@2"], make_comparable=True)
    assert scores["ndcg@10"] == pytest.approx(summary["ndcg@10"]) and scores["mrr"] == pytest.approx(summary["mrr"])
    assert scores["recall@2"] == pytest.approx(summary["recall@2"])


def test_trec_files_refuse_an_id_with_whitespace_and_put_the_qrels_beside_the_run(run, tmp_path):
    folder, _ = run
    run_file, qrels = write_trec_files(folder, questions(), tmp_path / "out" / "reader.run")
    assert (run_file.name, qrels.name) == ("reader.run", "reader.qrels") and qrels.read_text().startswith("q0 0 ")
    with pytest.raises(ValueError, match="question id 'q 1' cannot be a TREC field"):
        write_trec_qrels([example(1, gold_passage_ids=[PARIS]).copy(id="q 1")], tmp_path / "bad.qrels")
