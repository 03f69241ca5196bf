import dspy
import pytest
from dspy.utils.dummies import DummyLM

from multihop.programs import NoRetrieval, SingleStepRAG

from helpers import scripted_lm


def test_no_retrieval_makes_one_llm_call_and_no_retrieval():
    dspy.configure(lm=DummyLM([{"answer": "Paris"}]))
    prediction = NoRetrieval()(question="Capital of France?")
    assert prediction.answer == "Paris"
    assert prediction.counts["llm_calls"] == 1 and prediction.counts["retrieval_calls"] == 0
    assert [r["stage"] for r in prediction.stage_trace] == ["answer"]


def test_single_step_rag_retrieves_once_then_answers(static_retriever):
    lm, engine = scripted_lm(lambda prompt: {"answer": "text 1"})
    dspy.configure(lm=lm)
    prediction = SingleStepRAG(retriever=static_retriever, k=3)(question="Which text?")
    assert static_retriever.calls == [("Which text?", 3)]
    assert prediction.answer == "text 1"
    assert prediction.passage_ids == [p.id for p in static_retriever.passages[:3]]
    assert prediction.counts["llm_calls"] == 1 and prediction.counts["retrieval_calls"] == 1
    assert prediction.counts["passage_ids"] == prediction.passage_ids
    assert prediction.counts["tokens"] > 0
    assert "T2: text 2" in engine.requests[0]  # the retrieved passages reach the prompt


def test_retriever_falls_back_to_dspy_settings_rm(static_retriever):
    dspy.configure(lm=DummyLM([{"answer": "x"}]), rm=static_retriever)
    SingleStepRAG(k=2)(question="q")
    assert static_retriever.calls == [("q", 2)]
    with pytest.raises(ValueError, match="needs a retriever"):
        dspy.configure(rm=None)
        SingleStepRAG()(question="q")


def test_unparsable_output_degrades_to_an_empty_answer(static_retriever):
    lm, _ = scripted_lm(lambda prompt: {"nonsense": "???"})
    dspy.configure(lm=lm)
    prediction = SingleStepRAG(retriever=static_retriever)(question="q")
    assert prediction.answer == ""
    assert prediction.counts["stage_errors"] == 1


def test_each_stage_can_run_on_its_own_lm(static_retriever):
    main, main_engine = scripted_lm(lambda p: {"answer": "main"}, name="main")
    stage, stage_engine = scripted_lm(lambda p: {"answer": "stage"}, name="stage")
    dspy.configure(lm=main)
    program = SingleStepRAG(retriever=static_retriever)
    program.set_stage_lm("answer", stage)
    prediction = program(question="q")
    assert prediction.answer == "stage" and len(stage_engine.requests) == 1 and not main_engine.requests
    assert prediction.stage_trace[-1]["lm"] == "local/stage"
    with pytest.raises(KeyError, match="no stage"):
        program.set_stage_lm("rerank", stage)


def test_predictors_are_visible_to_optimizers(static_retriever):
    assert [n for n, _ in SingleStepRAG(retriever=static_retriever).named_predictors()] == ["answer"]


def test_config_is_read_from_the_constructor_and_the_registry_knows_every_program(static_retriever):
    from multihop.programs import PROGRAMS, ComposeRAG, CoopRAG, takes_retriever

    assert SingleStepRAG(retriever=static_retriever, k=7).config() == {"k": 7, "n": 50, "rerank": None}
    assert NoRetrieval().config() == {}
    config = CoopRAG(retriever=static_retriever, rerank=None, n=30).config()
    assert config["n"] == 30 and config["rerank"] is None and "retriever" not in config
    assert {"NoRetrieval", "SingleStepRAG", "CoopRAG", "ComposeRAG"} <= set(PROGRAMS)
    assert PROGRAMS["ComposeRAG"] is ComposeRAG
    assert takes_retriever(CoopRAG) and not takes_retriever(NoRetrieval)

    class Forgetful(SingleStepRAG):
        def __init__(self, retriever=None, k=5, depth=2):
            super().__init__(retriever=retriever, k=k)

    # a setting kept as no attribute is read from the constructor call, its default when the call left it out
    assert Forgetful(depth=3).config() == {"k": 5, "depth": 3} and Forgetful().config() == {"k": 5, "depth": 2}
    forgotten = Forgetful(depth=3)
    del forgotten.__dict__["constructed_with"]  # a program built by no call: nothing to read it from
    with pytest.raises(TypeError, match="depth"):
        forgotten.config()


def test_a_second_program_of_the_same_name_is_refused():
    with pytest.raises(TypeError, match="registered already"):
        type("SingleStepRAG", (NoRetrieval,), {"__module__": "elsewhere"})


def test_every_stage_is_named_by_its_path_in_the_program(static_retriever):
    from multihop.programs import PROGRAMS, takes_retriever

    for name in (declaration.name for declaration in PROGRAMS.declared()):  # not the test modules' own programs
        cls = PROGRAMS[name]
        program = cls(retriever=static_retriever) if takes_retriever(cls) else cls()
        for path, predictor in program.named_predictors():
            assert program.stage_name(predictor) == program.stage_prefix + path.split(".")[0], (name, path)
    with pytest.raises(KeyError, match="no stage"):
        program.stage_name(dspy.Predict("question -> answer"))
