import hashlib
import json
import time

import dspy
import pytest

from multihop.data.folders import write_inventory
from multihop.optimize.compile import compile_program, make_optimizer, validation_score
from multihop.programs import NoRetrieval, SingleStepRAG, load, save

from helpers import example, examples, scripted_lm


def _answer_from_prompt(prompt: str) -> dict:
    # a "model" that answers correctly: the answer to "question N" is "answer N"
    number = prompt.rsplit("question ", 1)[-1].split()[0]
    return {"answer": f"answer {number}"}


def test_bootstrap_adds_demos_and_save_load_answers_the_same(static_retriever, tmp_path):
    lm, _ = scripted_lm(_answer_from_prompt)
    dspy.configure(lm=lm)
    trainset = examples(6)
    compiled = compile_program(SingleStepRAG(retriever=static_retriever, k=2), trainset, metric="em")
    report = compiled.compile_report
    assert isinstance(compiled, SingleStepRAG) and report["optimizer"] == "bootstrap" and "val_before" not in report
    assert len(compiled.answer.demos) >= 2
    save(compiled, tmp_path / "prog", lm="scripted")
    loaded = load(tmp_path / "prog", retriever=static_retriever)
    assert [dict(d) for d in loaded.answer.demos] == [dict(d) for d in compiled.answer.demos]
    assert loaded(question="question 42").answer == compiled(question="question 42").answer == "answer 42"


def test_loading_into_another_program_is_refused(static_retriever, tmp_path):
    save(SingleStepRAG(retriever=static_retriever, k=2), tmp_path / "prog")
    with pytest.raises(ValueError, match="cannot be loaded into a NoRetrieval"):
        load(tmp_path / "prog", program=NoRetrieval())
    with pytest.raises(ValueError, match="config"):
        load(tmp_path / "prog", program=SingleStepRAG(retriever=static_retriever, k=7))


def test_a_program_saved_with_other_settings_than_its_class_has_is_refused_in_one_line(static_retriever, tmp_path):
    save(SingleStepRAG(retriever=static_retriever, k=2), tmp_path / "prog")
    manifest = tmp_path / "prog" / "manifest.json"
    info = json.loads(manifest.read_text())
    info["config"] = {"k": 2, "depth": 3}  # a config of a SingleStepRAG with other settings than this one's
    manifest.write_text(json.dumps(info))
    write_inventory(tmp_path / "prog")
    for program in (None, SingleStepRAG(retriever=static_retriever, k=2)):
        with pytest.raises(ValueError, match=r"was saved by another version of multihop: the settings of SingleStepRAG "
                                             r"differ in depth, n, rerank; compile and save it again"):
            load(tmp_path / "prog", program=program, retriever=static_retriever)


def test_labeled_few_shot_and_random_search_report_validation_scores(static_retriever):
    lm, _ = scripted_lm(_answer_from_prompt)
    dspy.configure(lm=lm)
    labeled = compile_program(SingleStepRAG(retriever=static_retriever, k=2), examples(6), optimizer="labeled",
                              k=3)
    assert len(labeled.answer.demos) == 3
    assert all(set(dict(d)) == {"question", "answer"} for d in labeled.answer.demos)  # signature fields only
    report = compile_program(NoRetrieval(), examples(6), optimizer="random-search", metric="em", valset=examples(3),
                             num_candidate_programs=2).compile_report
    assert report["val_before"] == report["val_after"] == 100.0 and report["unchanged"] is True


def test_a_compile_that_never_changes_the_metric_says_so(caplog):
    lm, _ = scripted_lm(lambda prompt: {"answer": "wrong"})
    dspy.configure(lm=lm)
    compiled = compile_program(NoRetrieval(), examples(6), metric="f1", valset=examples(2))
    report = compiled.compile_report
    assert report["val_before"] == report["val_after"] == 0.0 and report["unchanged"]
    assert "never changed" in caplog.text
    # none bootstrapped (every answer was wrong): the demos are the labelled fill-up, with the gold answers
    gold = {d.question: d.answer for d in examples(6)}
    assert len(compiled.answer.demos) == 2 and all(d.answer == gold[d.question] for d in compiled.answer.demos)


def test_every_optimizer_is_built_and_gepa_gets_a_feedback_metric():
    from multihop.optimize.compile import OPTIMIZERS, gepa_metric, make_optimizer

    lm, _ = scripted_lm(_answer_from_prompt)
    dspy.configure(lm=lm)
    kinds = {name: type(make_optimizer(name, "f1", prompt_lm=lm)[0]).__name__ for name in OPTIMIZERS}
    assert kinds == {"labeled": "LabeledFewShot", "bootstrap": "BootstrapFewShot",
                     "random-search": "BootstrapFewShotWithRandomSearch", "mipro": "MIPROv2", "simba": "SIMBA",
                     "gepa": "GEPA"}
    with pytest.raises(ValueError, match="unknown optimizer"):
        make_optimizer("adam", "f1")
    gold = examples(1)[0]
    feedback = gepa_metric("em")(gold, dspy.Prediction(answer="answer 1"), None, "answer", None)
    assert feedback.score == 0.0 and "answer 0" in feedback.feedback and "answer 1" in feedback.feedback


def test_a_labelled_demo_reaches_the_prompt_and_is_stored_with_its_signature_fields_only(static_retriever, tmp_path):
    lm, engine = scripted_lm(_answer_from_prompt)
    dspy.configure(lm=lm)
    train = [example(i, paragraphs=[{"title": "T", "text": "long paragraph"}], gold_passage_ids=["p"])
             for i in range(3)]
    compiled = compile_program(SingleStepRAG(retriever=static_retriever, k=2), train, optimizer="labeled", k=1)
    [demo] = compiled.answer.demos
    compiled(question="question 9")
    shown = engine.requests[-1].split("question 9", 1)[0]  # the prompt before the real question
    assert demo.question in shown and demo.answer in shown
    save(compiled, tmp_path / "prog")
    stored = json.loads((tmp_path / "prog" / "program.json").read_text())["answer"]["demos"]
    assert stored == [{"question": demo.question, "answer": demo.answer}]


def test_trimmed_demos_keep_signature_fields_and_drop_those_without_an_output():
    from multihop.programs.saved import trim_demos

    program = NoRetrieval()
    program.answer.demos = [dspy.Example(question="q1", answer="a1", paragraphs=["long"]),
                            dspy.Example(question="q2", answers=["a2"])]  # no output field: no adapter shows it
    trim_demos(program)
    assert [dict(d) for d in program.answer.demos] == [{"question": "q1", "answer": "a1"}]


def _even_right_slowly(prompt: str) -> dict:
    # right on the even questions, after a delay drawn from the prompt: calls sent at once end out of order
    time.sleep(int(hashlib.sha256(prompt.encode()).hexdigest()[:2], 16) / 255 * 0.02)
    number = prompt.rsplit("question ", 1)[-1].split()[0]
    return {"answer": f"answer {number}" if int(number) % 2 == 0 else "wrong"}


def test_threads_give_the_serial_validation_and_compile_and_reach_the_optimizers(static_retriever):
    lm, _ = scripted_lm(_even_right_slowly, cache=False)
    dspy.configure(lm=lm)
    assert validation_score(NoRetrieval(), examples(8), "em", threads=4) \
        == validation_score(NoRetrieval(), examples(8), "em") == 50.0
    compiled = {threads: compile_program(SingleStepRAG(retriever=static_retriever, k=2), examples(6), metric="em",
                                         valset=examples(5), threads=threads) for threads in (1, 4)}
    assert compiled[4].compile_report == compiled[1].compile_report and compiled[1].compile_report["val_before"] == 60
    assert [dict(d) for d in compiled[4].answer.demos] == [dict(d) for d in compiled[1].answer.demos]
    for name in ("random-search", "mipro", "simba", "gepa"):
        assert make_optimizer(name, "em", prompt_lm=lm, threads=3)[0].num_threads == 3
