"""Adaptive-RAG: the silver-label rule, each route running only its strategy, the readers (Direct, or the authors'
GPT-3.5 CoT), the oracle, the resumable labelling job, the bias labels joined to the silver ones, the classifier's
seeded training and its manifest, and ``multihop adaptiverag``'s commands, on scripted LMs and hand-made
embeddings."""

import json
import re

import dspy
import numpy as np
import pytest
from typer.testing import CliRunner

import multihop.retrievers
from multihop.cli import app
from multihop.data.corpus import Passage
from multihop.data.folders import ChecksumMismatchError, RunMismatchError
from multihop.evaluation.runner import run_manifest
from multihop.programs import AdaptiveRAG
from multihop.programs.baselines.adaptive_rag import (
    ComplexityClassifier,
    TrainingSettings,
    bias_rows,
    label_questions,
    read_labels,
    silver_label,
    train_classifier,
    with_bias_labels,
    with_gold_complexity,
)
from multihop.programs.baselines.adaptive_rag.classifier import HEAD, MANIFEST, ClassifierMismatchError
from multihop.programs.baselines.adaptive_rag.labels import first_of_each_dataset, question_key
from multihop.programs.baselines.adaptive_rag.sampling import held_out_sample, sampled_questions

from helpers import StaticRetriever, field, scripted_lm

PASSAGES = [Passage.make(f"T{i}", f"text {i}") for i in range(8)]
CAPITAL, BORN, FOUNDED = "What is the capital of France?", "Where was Ann Lee born?", "Who founded the maker of Xbox?"


class Script:
    """A scripted LM answering each strategy's stage by its signature's instructions: the LM alone (``direct``), a
    reader over passages (``reader``), IRCoT's next sentence (``reason``, a list of sentences said in turn)."""

    def __init__(self, direct="Paris", reader="Berlin", reason=("So the answer is: Rome.",)):
        self.direct, self.reader, self.reason, self.asked = direct, reader, list(reason), []
        self.lm, self.engine = scripted_lm(self.respond, cache=False)

    def respond(self, prompt: str) -> dict:
        if "reasoning step-by-step" in prompt:
            self.asked.append("reason")
            said = len(json.loads(field(prompt, "reasoning")))  # the sentences of the chain so far
            return {"next_sentence": self.reason[min(said, len(self.reason) - 1)]}
        if "using the retrieved passages" in prompt:
            self.asked.append("reader")
            return {"answer": self.reader}
        self.asked.append("direct")
        return {"answer": self.direct}


class Lookup:
    """A hand-made question encoder: one dimension a keyword (capital, born, founded) and a constant one,
    L2-normalised; it counts the texts it encodes."""

    KEYWORDS = ("capital", "born", "founded")

    def __init__(self, name: str = "lookup", sha256: str = "0" * 64):
        self.name, self.sha256, self.encoded = name, sha256, 0

    def encode(self, texts):
        self.encoded += len(texts)
        rows = np.array([[float(word in text.lower()) for word in self.KEYWORDS] + [0.5] for text in texts],
                        dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def config(self) -> dict:
        return {"name": self.name, "sha256": self.sha256}


TRAIN = [("What is the capital of Spain?", "A"), ("What is the capital of Peru?", "A"),
         ("Name the capital of Chad.", "A"), ("Where was Bo Li born?", "B"), ("Where was Al Gore born?", "B"),
         ("In which town was Ed born?", "B"), ("Who founded the maker of Kinect?", "C"),
         ("Who founded the firm behind Halo?", "C"), ("Who founded the label of Adele?", "C")]


def trained(folder, seed=0, **settings):
    questions, labels = zip(*TRAIN, strict=True)
    classifier, record = train_classifier(questions, labels, Lookup(), TrainingSettings(seed=seed, **settings))
    return classifier.save(folder, record)


def run(program, script, question=CAPITAL, **inputs):
    with dspy.context(lm=script.lm):
        return program(question=question, **inputs)


# --- the silver-label rule (§3.2) -------------------------------------------------------------------------------

@pytest.mark.parametrize("correct, bias, expected", [
    ({"A": True, "B": True, "C": True}, "C", ("A", "outcome")),  # the simplest correct strategy wins
    ({"A": False, "B": True, "C": True}, "C", ("B", "outcome")),
    ({"A": False, "B": False, "C": True}, "B", ("C", "outcome")),
    ({"A": False, "B": True}, "C", ("B", "outcome")),  # a strategy not run is not correct
    ({"A": False, "B": False, "C": False}, "C", ("C", "bias")),  # none correct: the dataset's inductive bias
    ({"A": False, "B": False, "C": False}, "B", ("B", "bias")),
    ({}, "C", ("C", "bias")),
])
def test_the_silver_label_is_the_simplest_correct_strategy_else_the_datasets_bias(correct, bias, expected):
    assert silver_label(correct, bias) == expected


def test_an_unknown_bias_label_is_refused():
    with pytest.raises(ValueError, match="inductive-bias label 'D'"):
        silver_label({"A": True}, "D")


# --- each route runs only its strategy --------------------------------------------------------------------------

def test_each_route_builds_and_runs_only_its_strategy_with_its_own_retrievals():
    retriever = StaticRetriever(PASSAGES)
    script = Script(reason=["Xbox is made by Microsoft.", "So the answer is: Bill Gates."])
    a, b, c = (AdaptiveRAG(retriever=retriever, route=route, k=3, single_step_k=2, max_steps=4) for route in "ABC")
    assert (a.stage_names(), b.stage_names(), c.stage_names()) == (
        ["no_retrieval.answer"], ["single_step.answer"], ["multi_step.reason", "multi_step.answer"])

    none = run(a, script)
    assert (none.answer, none.complexity, none.passage_ids, retriever.calls, script.asked) == ("Paris", "A", [], [],
                                                                                               ["direct"])
    assert (none.counts["llm_calls"], none.counts["retrieval_calls"], none.counts["steps"]) == (1, 0, 0)
    assert none.counts["route.A"] == 1 and "route.B" not in none.counts

    script.asked = []
    one = run(b, script, question=BORN)
    assert (one.answer, one.complexity, retriever.calls, script.asked) == ("Berlin", "B", [(BORN, 2)], ["reader"])
    assert one.passage_ids == [p.id for p in PASSAGES[:2]] and one.counts["steps"] == 1
    assert [r["stage"] for r in one.stage_trace] == ["retriever", "single_step.answer"]

    retriever.calls, script.asked = [], []
    many = run(c, script, question=FOUNDED)
    assert (many.answer, many.complexity, many.counts["route.C"]) == ("Berlin", "C", 1)  # IRCoT's reader answers
    assert retriever.calls == [(FOUNDED, 3), ("Xbox is made by Microsoft.", 3)]  # the question, then the sentence
    assert script.asked == ["reason", "reason", "reader"] and many.counts["steps"] == 2  # IRCoT's own steps
    assert many.reasoning == ["Xbox is made by Microsoft.", "So the answer is: Bill Gates."]
    assert [r["stage"] for r in many.stage_trace] == ["retriever", "multi_step.reason", "retriever",
                                                      "multi_step.reason", "multi_step.answer"]


def test_without_a_classifier_every_question_takes_c_and_only_ircot_exists():
    program = AdaptiveRAG(retriever=StaticRetriever(PASSAGES), k=2, max_steps=1)
    assert program.stage_names() == ["multi_step.reason", "multi_step.answer"]
    script = Script(reason=["Nothing yet."])
    prediction = run(program, script)
    assert prediction.complexity == "C" and prediction.counts["steps"] == 1 and prediction.counts["step_cap"] == 1
    assert prediction.complexity_probabilities is None


def test_the_classifier_picks_each_questions_strategy(tmp_path, monkeypatch):
    monkeypatch.setattr(multihop.retrievers, "Encoder", Lookup)  # the manifest's encoder is rebuilt by name
    folder = trained(tmp_path / "classifier")
    retriever = StaticRetriever(PASSAGES)
    program = AdaptiveRAG(retriever=retriever, classifier=str(folder), k=2)
    assert program.stage_names() == ["no_retrieval.answer", "single_step.answer", "multi_step.reason",
                                     "multi_step.answer"]
    script = Script()
    routed = {question: run(program, script, question=question) for question in (CAPITAL, BORN, FOUNDED)}
    assert {q: p.complexity for q, p in routed.items()} == {CAPITAL: "A", BORN: "B", FOUNDED: "C"}
    assert {q: p.answer for q, p in routed.items()} == {CAPITAL: "Paris", BORN: "Berlin", FOUNDED: "Berlin"}
    assert script.asked == ["direct", "reader", "reason", "reader"]
    assert retriever.calls == [(BORN, 2), (FOUNDED, 2)]  # A retrieves nothing
    probabilities = routed[BORN].complexity_probabilities
    assert set(probabilities) == {"A", "B", "C"} and max(probabilities, key=probabilities.get) == "B"
    assert abs(sum(probabilities.values()) - 1) < 1e-5


def test_the_cot_reader_reads_every_strategy_with_a_chain_of_thought():
    assert AdaptiveRAG().reader == "direct"  # the authors' Flan-T5 configurations (existing tests: Direct readers)
    asked = []

    def respond(prompt):
        if "reasoning step-by-step" in prompt:
            asked.append("reason")
            return {"next_sentence": "So the answer is: Rome."}
        assert "First reason step by step" in prompt, "a Direct reader was asked"
        read = "using the retrieved passages" in prompt
        asked.append("cot reader" if read else "cot own")
        return {"reasoning": "Step by step.", "answer": "Berlin" if read else "Paris"}

    lm, _ = scripted_lm(respond, cache=False)
    retriever = StaticRetriever(PASSAGES)
    program = AdaptiveRAG(retriever=retriever, route="oracle", k=2, reader="cot")  # the authors' GPT-3.5 setting
    assert program.stage_names() == ["no_retrieval.cot_answer", "single_step.cot_answer", "multi_step.reason",
                                     "multi_step.cot_answer"]
    with dspy.context(lm=lm):
        predictions = [program(question=FOUNDED, gold_complexity=label) for label in "ABC"]
    assert [p.answer for p in predictions] == ["Paris", "Berlin", "Berlin"]
    assert asked == ["cot own", "cot reader", "reason", "cot reader"]
    assert [p.reasoning for p in predictions[:2]] == ["Step by step.", "Step by step."]
    assert predictions[0].passage_ids == [] and predictions[1].passage_ids == [p.id for p in PASSAGES[:2]]
    assert [p.counts["steps"] for p in predictions] == [0, 1, 1]
    assert predictions[1].counts["single_step.cot_answer.fallback"] == 0
    with pytest.raises(ValueError, match="unknown reader 'long'"):
        AdaptiveRAG(reader="long")


# --- the oracle -------------------------------------------------------------------------------------------------

def test_the_oracle_follows_each_questions_gold_complexity(tmp_path):
    retriever = StaticRetriever(PASSAGES)
    program = AdaptiveRAG(retriever=retriever, route="oracle", k=2)
    script = Script()
    assert [run(program, script, gold_complexity=label).complexity for label in "BAC"] == ["B", "A", "C"]
    assert script.asked == ["reader", "direct", "reason", "reader"]
    with pytest.raises(ValueError, match="follows each question's gold_complexity, got None"):
        run(program, script)

    labels = tmp_path / "dev-labels"
    labels.mkdir()
    (labels / "labels.jsonl").write_text("".join(json.dumps({"id": qid, "question": "q", "label": label}) + "\n"
                                                 for qid, label in (("q1", "B"), ("q2", "A"))))
    examples = [dspy.Example(id=qid, question="q", answers=["a"]).with_inputs("question") for qid in ("q1", "q2")]
    labelled = AdaptiveRAG(route="oracle", oracle_labels=str(labels)).prepare_examples(examples)
    assert [e.inputs().toDict() for e in labelled] == [{"question": "q", "gold_complexity": "B"},
                                                       {"question": "q", "gold_complexity": "A"}]
    assert AdaptiveRAG(route="A").prepare_examples(examples) == examples  # only the oracle reads labels
    own = [examples[0].copy(gold_complexity="C")]
    assert with_gold_complexity(own, {("", "q1"): "B"})[0].gold_complexity == "C"  # the example's own label first
    stranger = dspy.Example(id="q3", question="q", answers=["a"]).with_inputs("question")
    with pytest.raises(ValueError, match="1 questions have no silver label for the oracle"):
        AdaptiveRAG(route="oracle", oracle_labels=str(labels)).prepare_examples([stranger])

    oracle = AdaptiveRAG(route="oracle", oracle_labels=str(labels))
    before = run_manifest(oracle, examples)["setting_files"]
    (labels / "labels.jsonl").write_text(json.dumps({"id": "q1", "question": "q", "label": "C"}) + "\n")
    assert run_manifest(oracle, examples)["setting_files"] != before  # labels made again: another run
    assert "setting_files" not in run_manifest(AdaptiveRAG(route="A"), examples)  # no file named: as before


def test_the_oracle_reads_each_questions_label_by_its_dataset_and_id_in_a_file_mixing_datasets(tmp_path):
    labels = tmp_path / "dev-labels"
    labels.mkdir()
    rows = [("x1", "musique", "A"), ("x1", "hotpotqa", "C"), ("x2", None, "B")]  # x2: a row naming no dataset
    (labels / "labels.jsonl").write_text("".join(json.dumps({"id": qid, "question": "q", "dataset": dataset,
                                                             "label": label}) + "\n" for qid, dataset, label in rows))
    mixed = questions(("x1", CAPITAL, "Paris", "musique"), ("x1", FOUNDED, "Oslo", "hotpotqa"),
                      ("x2", BORN, "Berlin", "2wiki"))
    program = AdaptiveRAG(retriever=StaticRetriever(PASSAGES), route="oracle", oracle_labels=str(labels), k=2)
    prepared = program.prepare_examples(mixed)
    assert [e.gold_complexity for e in prepared] == ["A", "C", "B"]  # the bare id gave both x1 the last row's C
    script = Script(reason=["So the answer is: Oslo."])
    answered = [run(program, script, question=e.question, gold_complexity=e.gold_complexity) for e in prepared]
    assert [p.complexity for p in answered] == ["A", "C", "B"]
    assert script.asked == ["direct", "reason", "reader", "reader"]  # A alone; IRCoT, then its reader; B's reader


def test_unknown_routes_and_sizes_are_refused():
    with pytest.raises(ValueError, match="unknown route 'D'"):
        AdaptiveRAG(route="D")
    with pytest.raises(ValueError, match="at least 1"):
        AdaptiveRAG(route="B", single_step_k=0)


# --- silver labels: the resumable job ---------------------------------------------------------------------------

def strategies(**switches):
    return {label: AdaptiveRAG(retriever=StaticRetriever(PASSAGES), route=label, k=2, **switches) for label in "ABC"}


def questions(*rows):
    return [dspy.Example(id=qid, question=question, answers=[answer], dataset=dataset).with_inputs("question")
            for qid, question, answer, dataset in rows]


def test_labelling_asks_the_strategies_simplest_first_and_stops_at_the_first_correct_answer(tmp_path):
    script = Script(direct="Paris", reader="Berlin", reason=["So the answer is: Rome."])  # IRCoT's reader: Berlin
    examples = questions(("q1", CAPITAL, "Paris", "musique"), ("q2", BORN, "Berlin", "hotpotqa"),
                         ("q3", FOUNDED, "Oslo", "2wiki"), ("q4", FOUNDED, "Oslo", "nq"))
    with dspy.context(lm=script.lm):
        rows = label_questions(strategies(), examples, tmp_path / "labels", {"job": 1}, progress=False)
    assert {qid: (row["label"], row["source"]) for (_, qid), row in rows.items()} == {
        "q1": ("A", "outcome"), "q2": ("B", "outcome"), "q3": ("C", "bias"), "q4": ("B", "bias")}
    assert list(rows["musique", "q1"]["outcomes"]) == ["A"] and list(rows["hotpotqa", "q2"]["outcomes"]) == ["A", "B"]
    assert rows["2wiki", "q3"]["outcomes"]["C"] == {"answer": "Berlin", "correct": False, "llm_calls": 2,
                                           "retrieval_calls": 1}
    assert script.asked == ["direct", "direct", "reader", *["direct", "reader", "reason", "reader"] * 2]
    assert [row["id"] for row in read_labels(tmp_path / "labels")] == ["q1", "q2", "q3", "q4"]


def test_the_labelling_job_resumes_and_refuses_another_run(tmp_path):
    script = Script()
    first = questions(("q1", CAPITAL, "Paris", "musique"))
    with dspy.context(lm=script.lm):
        label_questions(strategies(), first, tmp_path / "labels", {"lm": "x"}, progress=False)
        more = first + questions(("q2", BORN, "Berlin", "musique"))
        rows = label_questions(strategies(), more, tmp_path / "labels", {"lm": "x"}, progress=False)
    assert script.asked == ["direct", "direct", "reader"] and set(rows) == {("musique", "q1"), ("musique", "q2")}
    assert len((tmp_path / "labels" / "labels.jsonl").read_text().splitlines()) == 2
    with pytest.raises(RunMismatchError, match="lm: 'x' there, 'y' now"):
        label_questions(strategies(), more, tmp_path / "labels", {"lm": "y"}, progress=False)


def test_one_question_file_mixing_datasets_whose_ids_repeat_labels_each_question(tmp_path):
    script = Script(direct="Paris")
    mixed = questions(("x1", CAPITAL, "Paris", "musique"), ("x1", BORN, "Paris", "hotpotqa"))
    with dspy.context(lm=script.lm):
        rows = label_questions(strategies(), mixed, tmp_path / "labels", {}, progress=False)
        again = label_questions(strategies(), mixed, tmp_path / "labels", {}, progress=False)  # both found: resumed
    assert set(rows) == set(again) == {("musique", "x1"), ("hotpotqa", "x1")} and script.asked == ["direct"] * 2
    assert sorted(row["dataset"] for row in read_labels(tmp_path / "labels")) == ["hotpotqa", "musique"]


def test_a_dataset_without_a_known_bias_is_refused_before_any_lm_call(tmp_path):
    script = Script()
    mine = questions(("m1", CAPITAL, "Rome", "mine"))
    with dspy.context(lm=script.lm), pytest.raises(ValueError, match="no inductive bias is known for dataset 'mine'"):
        label_questions(strategies(), mine, tmp_path / "labels", {}, progress=False)
    assert script.asked == []
    with dspy.context(lm=script.lm):
        rows = label_questions(strategies(), mine, tmp_path / "labels", {}, bias="C", progress=False)
    assert (rows["mine", "m1"]["label"], rows["mine", "m1"]["source"]) == ("C", "bias")


def test_the_bias_labels_of_the_train_files_join_the_silver_labels_and_silver_wins():
    train = questions(("q1", CAPITAL, "Paris", "musique"), ("q2", BORN, "Berlin", "nq"),
                      ("q3", FOUNDED, "Oslo", "hotpotqa"), ("q4", "Who?", "X", "mine"))
    rows = bias_rows(train[:3])  # every question its dataset's bias, whatever a strategy answers
    assert [(row["id"], row["label"], row["source"]) for row in rows] == [("q1", "C", "bias"), ("q2", "B", "bias"),
                                                                         ("q3", "C", "bias")]
    with pytest.raises(ValueError, match="no inductive bias is known for dataset 'mine'"):
        bias_rows(train)
    assert bias_rows(train[3:], "B")[0]["label"] == "B"
    silver = [{"id": "q1", "question": CAPITAL, "label": "A", "source": "outcome"}]  # no dataset: stands for q1
    joined = with_bias_labels(silver, rows + rows[1:2])  # a bias question twice is one row
    assert [(row["id"], row["label"]) for row in joined] == [("q2", "B"), ("q3", "C"), ("q1", "A")]


def test_two_datasets_sharing_an_id_stay_two_questions_in_the_join_and_across_labels_folders(tmp_path):
    train = questions(("x1", CAPITAL, "Paris", "musique"), ("x1", FOUNDED, "Oslo", "hotpotqa"))
    assert [question_key(row) for row in bias_rows(train)] == [("musique", "x1"), ("hotpotqa", "x1")]
    silver = [{"id": "x1", "question": CAPITAL, "dataset": "musique", "label": "A", "source": "outcome"}]
    joined = with_bias_labels(silver, bias_rows(train))  # on the bare id, HotpotQA's x1 was dropped as labelled
    assert [(row["dataset"], row["id"], row["label"]) for row in joined] == [("hotpotqa", "x1", "C"),
                                                                          ("musique", "x1", "A")]
    for name, dataset, label in (("musique", "musique", "A"), ("hotpot", "hotpotqa", "B"), ("again", "musique", "C")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "labels.jsonl").write_text(json.dumps(
            {"id": "x1", "question": f"{dataset}?", "dataset": dataset, "label": label, "source": "outcome"}) + "\n")
    read = read_labels(tmp_path / "musique", tmp_path / "hotpot", tmp_path / "again")
    assert [(row["dataset"], row["label"]) for row in read] == [("musique", "C"), ("hotpotqa", "B")]  # the last kept


def test_the_bias_questions_are_the_first_of_each_dataset_of_a_file():
    mixed = questions(("m1", "a?", "a", "musique"), ("h1", "b?", "b", "hotpotqa"), ("m2", "c?", "c", "musique"),
                      ("m3", "d?", "d", "musique"), ("h2", "e?", "e", "hotpotqa"), ("h3", "f?", "f", "hotpotqa"))
    assert [e.id for e in first_of_each_dataset(mixed, 2)] == ["m1", "h1", "m2", "h2"]
    assert [e.id for e in first_of_each_dataset(mixed, 1)] == ["m1", "h1"]
    assert len(first_of_each_dataset(mixed, 0)) == len(first_of_each_dataset(mixed, None)) == 6


def test_the_held_out_sample_is_seeded_per_dataset_in_file_order_and_a_larger_one_holds_a_smaller():
    mixed = questions(*((f"m{i}", f"m{i}?", "a", "musique") for i in range(6)),
                      *((f"h{i}", f"h{i}?", "a", "hotpotqa") for i in range(3)))
    mixed = [mixed[i] for i in (0, 6, 1, 2, 7, 3, 4, 8, 5)]  # the datasets interleaved in the file
    two = held_out_sample(mixed, 2, seed=13370)
    # seed 13370 shuffles six positions to [3, 1, 0, 5, 4, 2] and three to [0, 2, 1] (recorded): two of each
    assert [e.id for e in two] == ["h0", "m1", "m3", "h2"]  # MuSiQue m3, m1 and HotpotQA h0, h2, in file order
    assert {e.id for e in two} <= {e.id for e in held_out_sample(mixed, 4, seed=13370)}  # a larger sample holds it
    alone = questions(*((f"m{i}", f"m{i}?", "a", "musique") for i in range(6)))
    assert [e.id for e in held_out_sample(alone, 2, seed=13370)] == ["m1", "m3"]  # the other dataset changes nothing
    assert held_out_sample(mixed, 500) == mixed  # a dataset with no more questions than the size: all of them
    assert [e.id for e in held_out_sample(mixed, 2, seed=1)] != [e.id for e in two]
    with pytest.raises(ValueError, match="at least 1 question"):
        held_out_sample(mixed, 0)


def test_the_bias_questions_leave_out_the_held_questions_before_counting():
    mixed = questions(("m1", "a?", "a", "musique"), ("h1", "b?", "b", "hotpotqa"), ("m2", "c?", "c", "musique"),
                      ("m3", "d?", "d", "musique"), ("h2", "e?", "e", "hotpotqa"))
    held = {("musique", "m1"), ("hotpotqa", "m2")}  # m2 of HotpotQA is another question than MuSiQue's m2
    assert [e.id for e in first_of_each_dataset(mixed, 2, held)] == ["h1", "m2", "m3", "h2"]
    assert [e.id for e in first_of_each_dataset(mixed, 2)] == ["m1", "h1", "m2", "h2"]


def test_the_sample_is_recorded_before_labelling_so_an_interrupted_job_holds_all_of_it(tmp_path):
    def respond(prompt):
        if BORN in prompt:
            raise ConnectionError("the endpoint died")
        return script.respond(prompt)

    script = Script(direct="Paris")
    lm, _ = scripted_lm(respond, cache=False)
    sample = questions(("t1", CAPITAL, "Paris", "musique"), ("t3", BORN, "Oslo", "musique"))
    with dspy.context(lm=lm), pytest.raises(Exception, match="the endpoint died"):  # noqa: PT011 - DSPy wraps it
        label_questions(strategies(), sample, tmp_path / "labels", {}, progress=False, sample=(2, 13370))
    assert [row["id"] for row in read_labels(tmp_path / "labels")] == ["t1"]
    assert sampled_questions(tmp_path / "labels") == {("musique", "t1"), ("musique", "t3")}
    assert sampled_questions(tmp_path / "labels" / "labels.jsonl") == sampled_questions(tmp_path / "labels")
    assert json.loads((tmp_path / "labels" / "sample.json").read_text())["seed"] == 13370


# --- the classifier ---------------------------------------------------------------------------------------------

def test_training_is_seeded_and_a_rebuild_is_bit_equal(tmp_path):
    first, again, other = trained(tmp_path / "a"), trained(tmp_path / "b"), trained(tmp_path / "c", seed=1)
    assert (first / HEAD).read_bytes() == (again / HEAD).read_bytes()
    assert json.loads((first / MANIFEST).read_text()) == json.loads((again / MANIFEST).read_text())
    assert (first / HEAD).read_bytes() != (other / HEAD).read_bytes()
    training = json.loads((first / MANIFEST).read_text())["training"]
    assert (training["train_questions"], training["valid_questions"]) == (8, 1)  # round(0.1 × 9) held out
    assert training["labels"] == {"A": 3, "B": 3, "C": 3} and 1 <= training["epoch_kept"] <= 100
    classifier = ComplexityClassifier.load(first, encoder=Lookup())
    assert classifier.predict([CAPITAL, BORN, FOUNDED]) == ["A", "B", "C"]


def test_without_held_out_labels_the_last_epoch_is_kept(tmp_path):
    folder = trained(tmp_path / "all", valid_share=0.0, epochs=7)
    training = json.loads((folder / MANIFEST).read_text())["training"]
    assert (training["epoch_kept"], training["valid_accuracy"], training["valid_loss"]) == (7, None, None)
    assert training["valid_questions"] == 0


def test_the_manifest_refuses_another_encoder_a_changed_file_and_a_foreign_folder(tmp_path):
    folder = trained(tmp_path / "classifier")
    with pytest.raises(ClassifierMismatchError, match="was trained on encoder"):
        ComplexityClassifier.load(folder, encoder=Lookup(sha256="1" * 64))
    with pytest.raises(ClassifierMismatchError, match="was trained on encoder"):
        ComplexityClassifier.load(folder, encoder=Lookup(name="other"))
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in folder.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    manifest = json.loads((copy / MANIFEST).read_text())
    (copy / MANIFEST).write_text(json.dumps({**manifest, "labels": ["A", "C"]}))
    with pytest.raises(ChecksumMismatchError, match="classifier.json changed"):
        ComplexityClassifier.load(copy, encoder=Lookup())
    with pytest.raises(FileNotFoundError, match="holds no classifier"):
        ComplexityClassifier.load(tmp_path / "nowhere")
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me")
    classifier = ComplexityClassifier.load(folder, encoder=Lookup())
    with pytest.raises(ClassifierMismatchError, match="not a classifier"):
        classifier.save(foreign)
    assert (foreign / "todo.txt").read_text() == "keep me"


def test_a_manifest_of_another_format_is_refused_and_a_record_cannot_change_it(tmp_path):
    from multihop.data.folders import write_inventory

    classifier = ComplexityClassifier.load(trained(tmp_path / "classifier"), encoder=Lookup())
    old = classifier.save(tmp_path / "old", {"format": 0, "note": "kept"})
    manifest = json.loads((old / MANIFEST).read_text())
    assert (manifest["format"], manifest["note"]) == (1, "kept")
    (old / MANIFEST).write_text(json.dumps({**manifest, "format": 0}))
    write_inventory(old)  # a consistent folder of an older format
    with pytest.raises(ClassifierMismatchError, match="not a classifier this version reads"):
        ComplexityClassifier.load(old, encoder=Lookup())


def test_a_program_with_a_classifier_copies_and_pickles_by_its_folder(tmp_path, monkeypatch):
    import copy
    import pickle

    monkeypatch.setattr(multihop.retrievers, "Encoder", Lookup)
    folder = trained(tmp_path / "classifier")
    program = AdaptiveRAG(classifier=str(folder))
    assert copy.deepcopy(program)._classifier is program._classifier  # shared, not copied
    restored = pickle.loads(pickle.dumps(program._classifier))
    assert restored.folder == folder and np.array_equal(restored.weight, program._classifier.weight)


# --- the command line -------------------------------------------------------------------------------------------

runner = CliRunner()


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A MULTIHOP_DATA whose MuSiQue train file holds three questions (one for each label) and whose dev file holds
    one (held apart), and a MULTIHOP_HOME of the test's own."""
    root = tmp_path / "data"
    records = {"train": [("t1", CAPITAL, "Paris"), ("t2", BORN, "Berlin"), ("t3", FOUNDED, "Oslo")],
               "dev": [("d1", "What is the capital of Peru?", "Lima")]}
    for split, rows in records.items():
        (root / "musique" / split).mkdir(parents=True)
        name = "musique_qa_100.json" if split == "dev" else "musique_train.json"
        (root / "musique" / split / name).write_text(json.dumps([
            {"id": qid, "question": question, "answers": [answer], "dataset": "musique",
             "paragraphs": [{"title": answer, "text": f"{answer} is a city.", "is_supporting": True},
                            {"title": "Elsewhere", "text": "Nothing here.", "is_supporting": False}]}
            for qid, question, answer in rows]))
    monkeypatch.setenv("MULTIHOP_DATA", str(root))
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    return root


@pytest.fixture
def scripted(monkeypatch):
    """Every LM the command line builds answers as :class:`Script` does."""
    import multihop.lm.backends

    script = Script(direct="Paris", reader="Berlin", reason=["So the answer is: Rome."])
    monkeypatch.setattr(multihop.lm.backends, "make_lm", lambda spec, **settings: script.lm)
    return script


def test_labels_then_train_then_route(data, scripted, tmp_path, monkeypatch):
    labels = tmp_path / "labels"
    made = runner.invoke(app, ["adaptiverag", "labels", "--dataset", "musique", "--out", str(labels), "--limit", "3",
                               "--set", "k=1", "--lm", "openai/scripted"])
    assert made.exit_code == 0, made.output
    assert "A 1, B 1, C 1 (1 answered by no strategy took the dataset's bias)" in " ".join(made.output.split())
    rows = {row["id"]: row for row in read_labels(labels)}
    assert {qid: row["label"] for qid, row in rows.items()} == {"t1": "A", "t2": "B", "t3": "C"}
    manifest = json.loads((labels / "run.json").read_text())
    assert manifest["split"] == "train" and manifest["strategies"]["B"]["k"] == 1
    assert manifest["retriever"].split("/")[-1].startswith("bm25")  # the method's first stage, as the paper's

    monkeypatch.setattr(multihop.retrievers, "Encoder", Lookup)
    fitted = runner.invoke(app, ["adaptiverag", "train", str(labels), "--out", str(tmp_path / "classifier"),
                                 "--valid-share", "0"])
    assert fitted.exit_code == 0, fitted.output
    record = json.loads((tmp_path / "classifier" / MANIFEST).read_text())
    assert record["training"]["labels"] == {"A": 1, "B": 1, "C": 1} and record["encoder"]["name"] == "minilm"
    assert record["label_files"][0]["path"] == str(labels / "labels.jsonl")
    assert record["rows"] == {"silver": 3, "silver_by_bias": 1, "bias": 0}  # t3: no strategy, MuSiQue's bias
    assert "(3 silver (1 answered by no strategy took the dataset's bias), 0 by the dataset's bias)" in " ".join(
        fitted.output.split())
    program = AdaptiveRAG(retriever=StaticRetriever(PASSAGES), classifier=str(tmp_path / "classifier"))
    with dspy.context(lm=scripted.lm):
        assert [program(question=q).complexity for q in (CAPITAL, BORN, FOUNDED)] == ["A", "B", "C"]


def test_train_adds_the_train_files_bias_labels_unless_silver_only(data, scripted, tmp_path, monkeypatch, capsys):
    labels = tmp_path / "labels"
    made = runner.invoke(app, ["adaptiverag", "labels", "--dataset", "musique", "--out", str(labels), "--limit", "1",
                               "--set", "k=1", "--lm", "openai/scripted"])
    assert made.exit_code == 0, made.output
    assert [(row["id"], row["label"]) for row in read_labels(labels)] == [("t1", "A")]
    monkeypatch.setattr(multihop.retrievers, "Encoder", Lookup)

    def train(name, *more):
        result = runner.invoke(app, ["adaptiverag", "train", str(labels), "--out", str(tmp_path / name),
                                     "--valid-share", "0", *more])
        assert result.exit_code == 0, result.output
        return json.loads((tmp_path / name / MANIFEST).read_text()), " ".join(result.output.split())

    record, shown = train("both")  # the labels' own train file: t2 and t3 take MuSiQue's bias, t1 keeps its silver A
    assert record["training"]["labels"] == {"A": 1, "C": 2}
    assert record["rows"] == {"silver": 1, "silver_by_bias": 0, "bias": 2}
    assert [(f["path"].split("/")[-1], f["questions"], f["skipped"]) for f in record["bias_files"]] == [
        ("musique_train.json", 2, 1)]  # t1, in the silver labels, is no bias question
    assert "(1 silver, 2 by the dataset's bias)" in shown
    record, _ = train("first-two", "--bias-limit", "2")  # the authors take the first 400 of each, outside the silver
    assert record["training"]["labels"] == {"A": 1, "C": 2}
    record, _ = train("overlapping", "--bias-limit", "2", "--overlapping-bias")  # t1 and t2: t1 keeps its silver A
    assert record["training"]["labels"] == {"A": 1, "C": 1} and record["bias_overlapping"] is True
    record, _ = train("silver", "--silver-only")
    assert record["training"]["labels"] == {"A": 1} and record["bias_files"] == []

    single = tmp_path / "nq_train.jsonl"
    single.write_text("".join(json.dumps({"id": f"n{i}", "question": f"Who sang song {i}?", "answers": ["Ann"],
                                          "dataset": dataset}) + "\n" for i, dataset in enumerate(["nq", "mine"])))
    record, _ = train("single", "--bias-data", str(single), "--bias", "B")  # nq: B; a dataset of its own: --bias
    assert record["training"]["labels"] == {"A": 1, "B": 2}
    record, _ = train("each", "--bias-data", str(single), "--bias", "B", "--bias-limit", "1")  # the first of each
    assert record["training"]["labels"] == {"A": 1, "B": 2} and record["bias_files"][0]["questions"] == 2
    assert "no inductive bias is known for dataset 'mine'" in fails(
        ["adaptiverag", "train", str(labels), "--out", str(tmp_path / "x"), "--bias-data", str(single)], capsys)


def test_labels_take_a_seeded_sample_and_train_keeps_the_bias_labels_outside_it(data, scripted, tmp_path,
                                                                                monkeypatch):
    labels = tmp_path / "labels"
    made = runner.invoke(app, ["adaptiverag", "labels", "--dataset", "musique", "--out", str(labels), "--sample", "2",
                               "--set", "k=1", "--lm", "openai/scripted"])
    assert made.exit_code == 0, made.output
    assert "labelled 2 questions (a sample of 2 a dataset, seed 13370)" in " ".join(made.output.split())
    assert [row["id"] for row in read_labels(labels)] == ["t1", "t3"]  # seed 13370 draws positions 0 and 2 of 3
    assert json.loads((labels / "run.json").read_text())["sample"] == {"size": 2, "seed": 13370, "limit": None}
    assert sampled_questions(labels) == {("musique", "t1"), ("musique", "t3")}
    monkeypatch.setattr(multihop.retrievers, "Encoder", Lookup)

    def train(name, *more):
        result = runner.invoke(app, ["adaptiverag", "train", str(labels), "--out", str(tmp_path / name),
                                     "--valid-share", "0", "--bias-limit", "1", *more])
        assert result.exit_code == 0, result.output
        return json.loads((tmp_path / name / MANIFEST).read_text()), " ".join(result.output.split())

    record, shown = train("apart")  # the first question outside the sample, t2, takes MuSiQue's bias C
    assert record["training"]["labels"] == {"A": 1, "C": 2} and record["rows"]["bias"] == 1
    assert f"silver labels: 2 rows from {labels / 'labels.jsonl'} (a sample of 2 questions)" in shown
    assert "bias labels: 1 rows from" in shown and "(the first 1 of each dataset outside the silver labels' 2" in shown
    assert record["label_files"][0]["sampled"] == 2 and record["bias_files"][0]["skipped"] == 2
    record, shown = train("overlapping", "--overlapping-bias")  # the first question, t1, is sampled: no bias row
    assert record["training"]["labels"] == {"A": 1, "C": 1} and record["rows"]["bias"] == 0
    assert "bias labels: 0 rows from" in shown and "(the first 1 of each dataset; 1 of them keep" in shown
    assert "not both" in " ".join(runner.invoke(app, ["adaptiverag", "train", str(labels), "--out",
                                                      str(tmp_path / "x"), "--silver-only",
                                                      "--overlapping-bias"]).output.split())

    every = runner.invoke(app, ["adaptiverag", "labels", "--dataset", "musique", "--out", str(tmp_path / "every"),
                                "--sample", "0", "--limit", "2", "--set", "k=1", "--lm", "openai/scripted"])
    assert every.exit_code == 0, every.output  # no sample: the first --limit questions
    assert [row["id"] for row in read_labels(tmp_path / "every")] == ["t1", "t2"]
    assert not (tmp_path / "every" / "sample.json").exists()
    again = runner.invoke(app, ["adaptiverag", "labels", "--dataset", "musique", "--out", str(labels), "--sample", "3",
                                "--set", "k=1", "--lm", "openai/scripted"])
    assert again.exit_code != 0 and "sample" in str(again.exception)  # another sample is another job


def fails(argv, capsys) -> str:
    from multihop.cli.errors import run as run_cli

    assert run_cli(app, argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_the_commands_errors_are_one_line(data, scripted, tmp_path, capsys):
    out = ["--out", str(tmp_path / "labels")]
    assert "'test' is none of train, dev" in fails(["adaptiverag", "labels", "--dataset", "musique", *out, "--split",
                                                    "test"], capsys)
    assert "'D' is none of A, B, C" in fails(["adaptiverag", "labels", "--dataset", "musique", *out, "--bias", "D"],
                                             capsys)
    assert "route cannot be set here" in fails(["adaptiverag", "labels", "--dataset", "musique", *out, "--set",
                                                "route=A"], capsys)
    assert "AdaptiveRAG's k is an integer" in fails(["adaptiverag", "labels", "--dataset", "musique", *out, "--set",
                                                     "k=many"], capsys)
    assert "no such file" in fails(["adaptiverag", "labels", "--dataset", str(tmp_path / "none.json"), *out], capsys)
    assert "does not exist" in fails(["adaptiverag", "train", str(tmp_path / "nowhere"), "--out",
                                      str(tmp_path / "c")], capsys)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no silver labels" in fails(["adaptiverag", "train", str(empty), "--out", str(tmp_path / "c")],
                                             capsys)
    dev = tmp_path / "dev-labels.jsonl"
    dev.write_text(json.dumps({"id": "d1", "question": "What is the capital of Peru?", "label": "A"}) + "\n")
    assert "held apart for measuring" in fails(["adaptiverag", "train", str(dev), "--out", str(tmp_path / "c")],
                                               capsys)
    oracle = tmp_path / "oracle-labels"  # a dev labelling job's folder, by its manifest, whatever its ids
    oracle.mkdir()
    (oracle / "labels.jsonl").write_text(json.dumps({"id": "x9", "question": "Who?", "label": "C"}) + "\n")
    (oracle / "run.json").write_text(json.dumps({"split": "dev"}))
    assert "holds silver labels of dev questions" in fails(["adaptiverag", "train", str(oracle), "--out",
                                                            str(tmp_path / "c")], capsys)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("line, message", [
    ('{"id": "q2", "label": "B"}', "labels.jsonl:line 2: field question is missing"),
    ('{"id": "q2", "question": "Who?", "label": 3}', "labels.jsonl:line 2: field label is int, not str"),
    ('{"id": "q2", "question": "Who?", "label": "D"}', "question q2's label is 'D', not one of A, B, C"),
    ('not json', "labels.jsonl:line 2: not a JSON object"),
])
def test_a_malformed_labels_file_is_one_line_naming_file_line_and_field(tmp_path, line, message):
    from multihop.cli import app
    from multihop.cli.errors import run

    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"id": "q1", "question": "Where?", "label": "A"}\n' + line + '\n{"id": "q3", "question": '
                      '"When?", "label": "C"}\n')
    with pytest.raises(ValueError, match=re.escape(message)):
        read_labels(labels)
    assert run(app, ["adaptiverag", "train", str(labels), "--out", str(tmp_path / "classifier")]) == 2
