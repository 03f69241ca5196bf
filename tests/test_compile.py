import dspy
import pytest

from multihop.optimize.compile import compile_program, load, save
from multihop.programs import NoRetrieval, SingleStepRAG

from scripted import scripted_lm


def _answer_from_prompt(prompt: str) -> dict:
    # a "model" that answers correctly: the answer to "question N" is "answer N"
    number = prompt.rsplit("question ", 1)[-1].split()[0]
    return {"answer": f"answer {number}"}


def test_bootstrap_adds_demos_and_save_load_answers_the_same(static_retriever, tmp_path):
    lm, _ = scripted_lm(_answer_from_prompt)
    dspy.configure(lm=lm)
    trainset = [dspy.Example(id=str(i), question=f"question {i}", answers=[f"answer {i}"]).with_inputs("question")
                for i in range(6)]
    compiled, report = compile_program(SingleStepRAG(retriever=static_retriever, k=2), trainset, metric="em")
    assert report["optimizer"] == "bootstrap" and "val_before" not in report
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


def _trainset(n=6):
    return [dspy.Example(id=str(i), question=f"question {i}", answers=[f"answer {i}"]).with_inputs("question")
            for i in range(n)]


def test_labeled_few_shot_and_random_search_report_validation_scores(static_retriever):
    lm, _ = scripted_lm(_answer_from_prompt)
    dspy.configure(lm=lm)
    labeled, _ = compile_program(SingleStepRAG(retriever=static_retriever, k=2), _trainset(), optimizer="labeled",
                                 k=3)
    assert len(labeled.answer.demos) == 3 and all("answers" in dict(d) for d in labeled.answer.demos)
    _, report = compile_program(NoRetrieval(), _trainset(), optimizer="random-search", metric="em",
                                       valset=_trainset(3), num_candidate_programs=2)
    assert report["val_before"] == report["val_after"] == 100.0 and report["unchanged"] is True


def test_a_compile_that_never_changes_the_metric_says_so(caplog):
    lm, _ = scripted_lm(lambda prompt: {"answer": "wrong"})
    dspy.configure(lm=lm)
    compiled, report = compile_program(NoRetrieval(), _trainset(), metric="f1", valset=_trainset(2))
    assert report["val_before"] == report["val_after"] == 0.0 and report["unchanged"]
    assert "never changed" in caplog.text
    assert all("answer" not in dict(d) for d in compiled.answer.demos)  # labelled fill-up only: none bootstrapped


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
    gold = _trainset(1)[0]
    feedback = gepa_metric("em")(gold, dspy.Prediction(answer="answer 1"), None, "answer", None)
    assert feedback.score == 0.0 and "answer 0" in feedback.feedback and "answer 1" in feedback.feedback
