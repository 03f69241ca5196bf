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
    compiled = compile_program(SingleStepRAG(retriever=static_retriever, k=2), trainset, metric="em")
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
