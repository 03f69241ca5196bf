import json

import dspy
import pytest

from multihop.optimize.compile import compile_program, load, save
from multihop.programs import CoopRAG
from multihop.programs.chain import normalize_chain, repair_fill, unrolled_query
from multihop.retrievers import Retriever

from scripted import scripted_lm

QUESTION = "Who founded the company that makes the Xbox?"
SUBS = ["Which company makes the Xbox?", "Who founded Microsoft?"]
MASKED = [["Xbox", "made by", "<UNCERTAIN>"], ["<UNCERTAIN>", "founded by", "<FILL>"]]
COMPLETED = [["Xbox", "made by", "Microsoft"], ["Microsoft", "founded by", "Bill Gates"]]


def stage_of(prompt: str) -> str:
    for marker, stage in (("CoopRAG unified", "complete_and_reason"), ("logical decomposition", "unroll"),
                          ("triple verification agent", "complete"), ("inference agent", "reason")):
        if marker in prompt:
            return stage
    raise AssertionError(f"unknown stage prompt: {prompt[:200]}")


def cooprag_lm(unroll_chain=MASKED, unrolling_ok=True):
    replies = {
        "unroll": {"hop_count": "2", "reasoning_structure": "company, then founder",
                   "sub_questions": json.dumps(SUBS), "reasoning_chain": json.dumps(unroll_chain)},
        "complete": {"completed_chain": json.dumps(COMPLETED)},
        "reason": {"answer": "Bill Gates"},
        "complete_and_reason": {"completed_chain": json.dumps(COMPLETED), "answer": "Bill Gates"},
    }
    if not unrolling_ok:
        replies["unroll"] = {"nonsense": "I cannot do that"}
    seen = []

    def respond(prompt):
        seen.append(stage_of(prompt))
        return replies[seen[-1]]

    lm, engine = scripted_lm(respond)
    return lm, engine, seen


def test_three_stages_run_in_order_with_the_right_inputs(static_retriever):
    lm, engine, seen = cooprag_lm()
    dspy.configure(lm=lm)
    prediction = CoopRAG(retriever=static_retriever, rerank=None, k=3)(question=QUESTION)
    assert seen == ["unroll", "complete", "reason"]
    assert static_retriever.calls == [(unrolled_query(QUESTION, SUBS, MASKED), 3)]
    assert prediction.answer == "Bill Gates"
    assert prediction.sub_questions == SUBS and prediction.hop_count == 2
    assert prediction.masked_chain == MASKED and prediction.completed_chain == COMPLETED
    assert prediction.passage_ids == [p.id for p in static_retriever.passages[:3]]
    completion, reasoning = engine.requests[1], engine.requests[2]
    assert "<UNCERTAIN>" in completion.split("reasoning_chain ## ]]")[-1] and "T2: text 2" in completion
    assert "Bill Gates" in reasoning and "<FILL>" not in reasoning.split("reasoning_chain ## ]]")[-1]
    counts = prediction.counts
    assert counts["llm_calls"] == 3 and counts["retrieval_calls"] == 1
    assert counts["unrolling_fallback"] == counts["fill_repaired"] == counts["completion_fallback"] == 0
    assert [r["kind"] for r in prediction.trace] == ["lm", "retriever", "lm", "lm"]


def test_unrolled_query_is_question_then_sub_questions_then_chain():
    query = unrolled_query(QUESTION, SUBS, MASKED)
    assert query == " ".join([QUESTION, *SUBS, json.dumps(MASKED)])
    assert query.index(SUBS[1]) < query.index("<FILL>")
    assert unrolled_query(QUESTION, [], []) == QUESTION


def test_unified_variant_completes_and_answers_in_one_call(static_retriever):
    lm, _, seen = cooprag_lm()
    dspy.configure(lm=lm)
    program = CoopRAG(retriever=static_retriever, rerank=None, unified=True)
    prediction = program(question=QUESTION)
    assert seen == ["unroll", "complete_and_reason"]
    assert prediction.counts["llm_calls"] == 2 and prediction.answer == "Bill Gates"
    assert prediction.completed_chain == COMPLETED
    assert program.stage_names() == ["unroll", "complete_and_reason"]


def test_without_uncertainty_mask_there_is_no_mask_instruction_and_no_completion(static_retriever):
    lm, engine, seen = cooprag_lm(unroll_chain=COMPLETED[:1] + [["Microsoft", "founded by", "<FILL>"]])
    dspy.configure(lm=lm)
    program = CoopRAG(retriever=static_retriever, rerank=None, uncertainty_mask=False)
    prediction = program(question=QUESTION)
    assert seen == ["unroll", "reason"] and "complete" not in program.stage_names()
    assert "<UNCERTAIN>" not in engine.requests[0]
    assert prediction.counts["llm_calls"] == 2
    assert prediction.completed_chain == prediction.masked_chain


def test_without_unrolling_the_raw_question_is_the_query(static_retriever):
    lm, _, seen = cooprag_lm()
    dspy.configure(lm=lm)
    prediction = CoopRAG(retriever=static_retriever, rerank=None, unrolling=False)(question=QUESTION)
    assert seen == ["reason"] and static_retriever.calls[0][0] == QUESTION
    assert prediction.sub_questions == [] and prediction.counts["llm_calls"] == 1


def test_unparsable_unrolling_retries_once_then_falls_back_to_the_question(static_retriever):
    lm, _, seen = cooprag_lm(unrolling_ok=False)
    dspy.configure(lm=lm)
    prediction = CoopRAG(retriever=static_retriever, rerank=None)(question=QUESTION)
    assert static_retriever.calls[0][0] == QUESTION
    assert prediction.counts["unrolling_fallback"] == 1
    assert prediction.counts["stage_errors"] == 2  # the first try and the retry, both in the trace
    assert [r["stage"] for r in prediction.trace if "error" in r] == ["unroll", "unroll"]
    assert "complete" not in seen and seen[-1] == "reason"  # nothing to complete: answer from the documents
    assert prediction.answer == "Bill Gates"


def test_a_chain_that_lost_its_fill_is_repaired(static_retriever):
    lm, engine, _ = cooprag_lm(unroll_chain=[["Xbox", "made by", "Microsoft"], ["Microsoft", "founded by", "Paul"]])
    dspy.configure(lm=lm)
    prediction = CoopRAG(retriever=static_retriever, rerank=None)(question=QUESTION)
    assert prediction.masked_chain[-1] == ["Microsoft", "founded by", "<FILL>"]
    assert "Paul" not in static_retriever.calls[0][0]  # the guessed answer never reaches the query
    assert prediction.counts["fill_repaired"] == 1


def test_empty_answer_stays_empty(static_retriever):
    lm, _, _ = cooprag_lm()
    dspy.configure(lm=lm)
    program = CoopRAG(retriever=static_retriever, rerank=None)
    program.set_stage_lm("reason", scripted_lm(lambda prompt: {"answer": "  "}, name="empty")[0])
    assert program(question=QUESTION).answer == ""


def test_normalize_chain_makes_every_row_a_triple():
    raw = [["a", "b", "c"], ["a", "born in", "year", "<FILL>"], ["x", "y"], [], ["only"], "loose"]
    assert normalize_chain(raw) == [["a", "b", "c"], ["a", "born in year", "<FILL>"], ["x", "y", "<UNCERTAIN>"]]
    assert repair_fill([]) == ([], False)


@pytest.mark.parametrize(("rerank", "omega", "scoring"), [("rala_eq4", True, "eq4"), ("maxsim", False, "eq4"),
                                                           ("rala_eq3", True, "eq3")])
def test_rerank_switches_choose_the_reranker(cached_retriever, rerank, omega, scoring):
    program = CoopRAG(retriever=cached_retriever, rerank=rerank, buckets=2, n=10, k=3)
    assert isinstance(program.search, Retriever) and program.search.first_stage is cached_retriever
    assert (program.search.reranker.scoring, program.search.reranker.omega) == (scoring, omega)
    assert (program.search.n, program.search.k, program.search.reranker.buckets) == (10, 3, 2)
    assert CoopRAG(retriever=cached_retriever, rerank=None).search is cached_retriever
    assert CoopRAG(retriever=program.search, rerank=None).search is cached_retriever
    assert CoopRAG(retriever=cached_retriever, rerank="rala_eq4", omega=False).search.reranker.omega is False
    with pytest.raises(ValueError, match="unknown rerank"):
        CoopRAG(rerank="colbert")


def test_rala_reranks_the_first_stage_candidates_of_a_real_corpus(cached_retriever, musique_dev):
    lm, _, _ = cooprag_lm()
    dspy.configure(lm=lm)
    question = musique_dev[0].question
    prediction = CoopRAG(retriever=cached_retriever, buckets=2, n=10, k=3)(question=question)
    assert len(prediction.candidates) == 10 and set(prediction.passage_ids) <= set(prediction.candidates)
    assert prediction.scores == sorted(prediction.scores, reverse=True)
    assert prediction.counts["retrieval_calls"] == 1  # the reranker's first stage is not counted twice


def test_bootstrap_compiles_demos_for_all_three_stages(static_retriever):
    lm, _, _ = cooprag_lm()
    dspy.configure(lm=lm)
    trainset = [dspy.Example(question=QUESTION, answers=["Bill Gates"]).with_inputs("question")]
    compiled, _ = compile_program(CoopRAG(retriever=static_retriever, rerank=None), trainset, optimizer="bootstrap")
    assert {name: len(p.demos) for name, p in compiled.named_predictors()} == {"unroll": 1, "complete": 1,
                                                                              "reason": 1}


def test_saved_program_loads_with_its_switches_and_refuses_another_config(static_retriever, tmp_path):
    program = CoopRAG(retriever=static_retriever, rerank=None, unified=True, n=30)
    program.unroll.demos = [dspy.Example(question="q", hop_count=1, reasoning_structure="r", sub_questions=["s"],
                                         reasoning_chain=[["a", "b", "<FILL>"]])]
    save(program, tmp_path / "coop")
    loaded = load(tmp_path / "coop", retriever=static_retriever)
    assert loaded.config() == program.config() and len(loaded.unroll.demos) == 1
    with pytest.raises(ValueError, match="cannot be loaded"):
        load(tmp_path / "coop", program=CoopRAG(retriever=static_retriever, rerank=None))


@pytest.mark.slow
def test_smollm2_runs_every_stage_on_two_real_questions(cached_retriever, musique_dev):
    from multihop.lms import configure_lm

    configure_lm("local:smollm2", max_tokens=256)
    program = CoopRAG(retriever=cached_retriever, n=10, k=5, buckets=2)
    for example in musique_dev[:2]:
        prediction = program(question=example.question)
        stages = [r["stage"] for r in prediction.trace if r["kind"] == "lm"]
        assert stages[0] == "unroll" and stages[-1] == "reason"
        assert prediction.counts["llm_calls"] == len(stages) and prediction.counts["retrieval_calls"] == 1
        completes = stages.count("complete")
        assert completes == (1 if prediction.masked_chain else 0)
        assert prediction.query.startswith(example.question)
        assert len(prediction.passages) == 5 and prediction.scores == sorted(prediction.scores, reverse=True)
        assert isinstance(prediction.answer, str)
