import json
import re

import dspy
import pytest

from multihop.data.corpus import Passage
from multihop.optimize.compile import compile_program
from multihop.programs import ComposeRAG, load, save
from multihop.programs.composerag.composition import (
    background,
    capped,
    decomposed_information,
    parse_ranking,
    previous_decompositions,
    qa_pairs,
    solving_record,
)
from multihop.programs.composerag.state import Hop, Solving

from helpers import StageScript, StaticRetriever, field

QUESTION = "Where was the founder of the company that makes the Xbox born?"
SUBS = ["Which company makes the Xbox?", "Who founded #1?", "Where was #2 born?"]
ANSWERS = {"Which company makes the Xbox?": "Microsoft [1].", "Who founded Microsoft?": "Bill Gates [2].",
           "Where was Bill Gates born?": "Seattle [1]."}
class Script(StageScript):
    """A scripted ComposeRAG LM: each stage answers from an overridable function of the prompt; ``seen`` lists the
    stages called, in order."""

    def __init__(self, **overrides):
        replies = {
            "decompose": lambda p: {"reasoning": "company, founder, birthplace", "sub_questions": json.dumps(SUBS)},
            "construct": lambda p: {"rewritten_question": self.construct(p)},
            "decide": lambda p: {"analysis": "needs facts", "needs_retrieval": "true"},
            "rewrite": lambda p: {"new_query": "rewritten " + field(p, "question")},
            "rank_passages": lambda p: {"reasoning": "r", "ranking": "[2] > [1] > [3]"},
            "answer": lambda p: {"reasoning": "from the context", "answer": ANSWERS.get(field(p, "question"),
                                                                                       "Seattle [1].")},
            "verify": lambda p: {"reason": "supported", "valid": "true"},
            "finalize": lambda p: {"reasoning": "combine", "answer": "Seattle"},
            "verify_final": lambda p: {"reason": "supported", "valid": "true"},
            "improve_analysis": lambda p: {"analysis": "- ask for the founder first"},
            "improve_decomposition": lambda p: {"reasoning": "new", "new_decomposition": json.dumps(SUBS)},
        }
        super().__init__({**replies, **overrides}, ComposeRAG())  # every stage is on by default

    @staticmethod
    def construct(prompt: str) -> str:
        pairs, new = field(prompt, "question_answer_pairs"), field(prompt, "new_question")
        answers = dict(re.findall(r"Answer #(\d+): (.*)", pairs))
        return re.sub(r"#(\d+)", lambda m: answers[m.group(1)].rstrip("."), new)


def run(static_retriever, script=None, **config):
    script = script or Script()
    dspy.configure(lm=script.lm)
    program = ComposeRAG(retriever=static_retriever, **config)
    return program, program(question=QUESTION), script


def pids(retriever, *indices: int) -> list[str]:
    return [retriever.passages[i].id for i in indices]


MULTIHOP = {"simple_qa": False}
HOP = ["decide", "rank_passages", "answer", "verify"]


def test_simple_question_is_resolved_by_the_simple_path(static_retriever):
    _, prediction, script = run(static_retriever)
    assert script.seen == ["answer", "verify"]
    assert static_retriever.calls == [(QUESTION, 10)]  # the simple pass reads the top k, 10 by default
    assert prediction.path == "simple" and prediction.answer == "Seattle."
    assert prediction.cited_ids == pids(static_retriever, 0) and prediction.grounded is True
    assert prediction.counts["simple_qa_resolved"] == 1 and prediction.counts["llm_calls"] == 2
    assert prediction.verdicts == [{"stage": "simple", "question": QUESTION, "answer": "Seattle [1].", "valid": True,
                                    "reason": "supported"}]
    hop = prediction.history[0]  # a plain record; the simple path's hop has no sub-question
    assert list(hop) == ["question", "passages", "passage_ids", "reasoning", "answer", "abstained", "cited",
                         "cited_ids", "cited_numbers", "queries", "retrieved", "verified"]
    assert hop["queries"] == [QUESTION] and hop["verified"] is True and hop["abstained"] is False
    assert json.loads(json.dumps(prediction.history)) == prediction.history


def test_failed_simple_verification_escalates_and_placeholders_resolve_across_three_hops(static_retriever):
    verdicts = iter(["false"] + ["true"] * 10)
    script = Script(verify=lambda p: {"reason": "r", "valid": next(verdicts)})
    _, prediction, script = run(static_retriever, script)
    assert script.seen == ["answer", "verify", "decompose", *HOP, "construct", *HOP, "construct", *HOP, "finalize",
                           "verify_final"]
    assert [q for q, _ in static_retriever.calls] == [QUESTION, *ANSWERS]  # the constructed sub-questions
    assert [hop["sub_question"] for hop in prediction.history] == SUBS
    assert [hop["question"] for hop in prediction.history] == list(ANSWERS)
    construct_prompts = [p for p in script.engine.requests if script.stage_of(p) == "construct"]
    assert "Answer #1: Microsoft." in field(construct_prompts[0], "question_answer_pairs")
    assert "Answer #2: Bill Gates." in field(construct_prompts[1], "question_answer_pairs")
    assert prediction.path == "multihop" and prediction.answer == "Seattle" and prediction.grounded is True
    assert prediction.counts["escalated"] == 1 and prediction.counts["sub_questions"] == 3
    assert [v["valid"] for v in prediction.verdicts] == [False, True, True, True, True]
    assert prediction.counts["llm_calls"] == len(script.seen) and prediction.counts["retrieval_calls"] == 4
    assert [r["stage"] for r in prediction.stage_trace if r["kind"] == "lm"] == script.seen  # per-stage trace


def test_reranking_reorders_passages_and_keeps_k(static_retriever):
    _, prediction, _ = run(static_retriever, k=2, **MULTIHOP)
    assert all(k == 10 for _, k in static_retriever.calls)  # n candidates for the reranker
    assert prediction.history[0]["passage_ids"] == pids(static_retriever, 1, 0)  # [2] > [1] > …, cut to k = 2
    assert prediction.history[0]["cited_ids"] == pids(static_retriever, 1)  # "[1]" = first passage shown


def test_a_failed_sub_answer_triggers_one_rewrite_and_a_retry(static_retriever):
    verdicts = iter(["false", "true"] + ["true"] * 10)
    script = Script(verify=lambda p: {"reason": "r", "valid": next(verdicts)})
    _, prediction, script = run(static_retriever, script, **MULTIHOP)
    assert script.seen[:8] == ["decompose", "decide", "rank_passages", "answer", "verify", "rewrite", "rank_passages",
                                "answer"]
    rewrite_prompt = next(p for p in script.engine.requests if script.stage_of(p) == "rewrite")
    assert field(rewrite_prompt, "last_rewritten_query") == "none"
    assert static_retriever.calls[:2] == [(SUBS[0], 10), ("rewritten " + SUBS[0], 10)]
    assert prediction.history[0]["queries"] == [SUBS[0], "rewritten " + SUBS[0]]
    assert prediction.counts["rewrites"] == 1


def test_rewrites_are_bounded(static_retriever):
    script = Script(verify=lambda p: {"reason": "unsupported", "valid": "false"})
    _, prediction, script = run(static_retriever, script, max_reflections=0, max_rewrites=2, **MULTIHOP)
    assert script.seen.count("rewrite") == 2 * len(SUBS)
    assert all(len(hop["queries"]) == 3 for hop in prediction.history)


def test_final_verification_failure_triggers_reflection_bounded_at_three(static_retriever):
    script = Script(verify_final=lambda p: {"reason": "unsupported", "valid": "false"})
    _, prediction, script = run(static_retriever, script, **MULTIHOP)
    assert script.seen.count("verify_final") == 4 and script.seen.count("decompose") == 1
    assert script.seen.count("improve_analysis") == script.seen.count("improve_decomposition") == 3
    assert prediction.reflections == prediction.counts["reflections"] == 3
    assert len(prediction.decompositions) == 4 and prediction.grounded is False
    assert prediction.answer == "I don't know." and prediction.counts["abstained_ungrounded"] == 1  # §4.1.3
    improve = [p for p in script.engine.requests if script.stage_of(p) == "improve_decomposition"][-1]
    previous = field(improve, "previous_decompositions")
    assert "Incorrect decomposition 3:" in previous and "- ask for the founder first" in previous
    analysis = next(p for p in script.engine.requests if script.stage_of(p) == "improve_analysis")
    assert "Rewritten sub-question #2: Who founded Microsoft?" in field(analysis, "sub_questions_solving_record")


def test_an_ungrounded_abstention_is_not_counted_as_a_substitution(static_retriever):
    script = Script(verify_final=lambda p: {"reason": "unsupported", "valid": "false"},
                    finalize=lambda p: {"reasoning": "nothing fits", "answer": "I don't know."})
    _, prediction, _ = run(static_retriever, script, **MULTIHOP, max_reflections=0)
    assert prediction.answer == "I don't know." and prediction.grounded is False
    assert prediction.counts["abstained_ungrounded"] == 0 and prediction.counts["abstained"] == 1


def test_an_ungrounded_answer_is_kept_when_asked(static_retriever):
    script = Script(verify_final=lambda p: {"reason": "unsupported", "valid": "false"})
    _, prediction, _ = run(static_retriever, script, **MULTIHOP, abstain_ungrounded=False)
    assert prediction.answer == "Seattle" and prediction.grounded is False
    assert prediction.counts["abstained_ungrounded"] == 0


def test_a_passing_reflection_stops_early_and_reruns_the_new_decomposition(static_retriever):
    verdicts = iter(["false", "true"])
    new = ["Who founded the company behind the Xbox?", "Where was #1 born?"]
    script = Script(verify_final=lambda p: {"reason": "r", "valid": next(verdicts)},
                    improve_decomposition=lambda p: {"reasoning": "r", "new_decomposition": json.dumps(new)})
    _, prediction, script = run(static_retriever, script, **MULTIHOP)
    assert prediction.reflections == 1 and prediction.grounded is True and script.seen.count("verify_final") == 2
    assert prediction.decompositions == [SUBS, new] and prediction.sub_questions == new
    assert [hop["sub_question"] for hop in prediction.history] == new  # the rerun answered the new sub-questions
    asked = [field(p, "question") for p in script.engine.requests if script.stage_of(p) == "answer"]
    assert asked[-2] == "Who founded the company behind the Xbox?"


@pytest.mark.parametrize(("switches", "removed"), [
    ({"passage_reranking": False}, {"rank_passages"}),
    ({"retrieval_decision": False}, {"decide"}),
    ({"query_rewriting": False}, {"rewrite"}),
    ({"answer_verification": False, "query_rewriting": False, "max_reflections": 0},
     {"verify", "verify_final", "rewrite", "improve_analysis", "improve_decomposition"}),
    ({"decomposition": False, "max_reflections": 0},
     {"decompose", "construct", "finalize", "verify_final", "improve_analysis", "improve_decomposition"}),
])
def test_each_ablation_switch_removes_exactly_its_modules_calls(static_retriever, switches, removed):
    def failing_script():  # every module gets called: first verifications fail, one reflection runs
        verdicts, finals = iter(["false"] + ["true"] * 20), iter(["false", "true"])
        return Script(verify=lambda p: {"reason": "r", "valid": next(verdicts)},
                      verify_final=lambda p: {"reason": "r", "valid": next(finals)})

    _, _, full = run(static_retriever, failing_script(), **MULTIHOP)
    program, _, ablated = run(static_retriever, failing_script(), **MULTIHOP, **switches)
    assert set(full.seen) - set(ablated.seen) == removed and set(ablated.seen) <= set(full.seen)
    assert not {name.split(".")[0] for name in program.stage_names()} & removed


def test_switches_that_need_verification_are_refused_without_it():
    with pytest.raises(ValueError, match="query_rewriting, simple_qa, max_reflections"):
        ComposeRAG(answer_verification=False)
    with pytest.raises(ValueError, match="needs decomposition"):
        ComposeRAG(decomposition=False)


def test_no_retrieval_decision_answers_from_the_question_and_retrieves_if_that_fails(static_retriever):
    verdicts = iter(["false"] + ["true"] * 10)
    script = Script(decide=lambda p: {"analysis": "all given", "needs_retrieval": "false"},
                    verify=lambda p: {"reason": "r", "valid": next(verdicts)})
    _, prediction, script = run(static_retriever, script, **MULTIHOP)
    first = prediction.history[0]
    assert script.seen[:7] == ["decompose", "decide", "answer", "verify", "rank_passages", "answer", "verify"]
    assert first["retrieved"] and first["queries"] == [SUBS[0]]
    answer_prompt = next(p for p in script.engine.requests if script.stage_of(p) == "answer")
    assert SUBS[0] in field(answer_prompt, "context")
    assert prediction.counts["retrieval_skipped"] == 3 and len(static_retriever.calls) == 1


def test_a_placeholder_pointing_nowhere_goes_through_construction(static_retriever):
    script = Script(decompose=lambda p: {"reasoning": "r", "sub_questions": json.dumps(["Who founded #3?"])},
                    construct=lambda p: {"rewritten_question": "Who founded the company that makes the Xbox?"})
    _, prediction, script = run(static_retriever, script, **MULTIHOP)
    assert script.seen.count("construct") == 1  # rule e: rewritten from the original question
    assert prediction.history[0]["question"] == "Who founded the company that makes the Xbox?"
    assert prediction.counts["placeholder_dangling"] == 1 and prediction.counts.get("placeholder_fallback", 0) == 0


def test_a_placeholder_construction_cannot_resolve_falls_back_to_the_question(static_retriever):
    script = Script(decompose=lambda p: {"reasoning": "r", "sub_questions": json.dumps(["Who founded #3?"])},
                    construct=lambda p: {"rewritten_question": "Who founded #3?"})
    _, prediction, _ = run(static_retriever, script, **MULTIHOP)
    assert prediction.history[0]["question"] == QUESTION and prediction.counts["placeholder_fallback"] == 1


def test_an_abstention_is_never_substituted_for_a_placeholder(static_retriever):
    answers = {**ANSWERS, "Which company makes the Xbox?": "I don't know."}
    script = Script(answer=lambda p: {"reasoning": "r", "answer": answers.get(field(p, "question"), "Seattle [1].")},
                    construct=lambda p: {"rewritten_question": field(p, "new_question")})  # leaves "#1" in
    _, prediction, _ = run(static_retriever, script, **MULTIHOP)
    assert all("know" not in hop["question"] for hop in prediction.history)
    assert prediction.history[1]["question"] == QUESTION and prediction.counts["placeholder_fallback"] >= 1


def test_a_question_that_was_not_decomposed_gets_no_background(static_retriever):
    script = Script(decompose=lambda p: {"reasoning": "r", "sub_questions": "not a list"})
    _, prediction, script = run(static_retriever, script, **MULTIHOP)
    assert prediction.sub_questions == [QUESTION]
    answer_prompt = next(p for p in script.engine.requests if script.stage_of(p) == "answer")
    assert field(answer_prompt, "background") == "none"


def test_placeholder_left_by_the_lm_is_substituted(static_retriever):
    script = Script(construct=lambda p: {"rewritten_question": field(p, "new_question")})  # returns it unchanged
    _, prediction, _ = run(static_retriever, script, **MULTIHOP)
    assert [hop["question"] for hop in prediction.history] == list(ANSWERS)
    assert prediction.counts["placeholder_substituted"] == 2


def test_abstention_fails_verification_without_a_verifier_call(static_retriever):
    script = Script(answer=lambda p: {"reasoning": "nothing", "answer": "I don't know."},
                    finalize=lambda p: {"reasoning": "nothing", "answer": "I do not know"})
    _, prediction, script = run(static_retriever, script, max_reflections=0)
    assert "verify" not in script.seen and "verify_final" not in script.seen
    assert prediction.answer == "I don't know." and prediction.abstained and prediction.counts["abstained"] == 1
    assert all(v["reason"] == "abstained" and not v["valid"] for v in prediction.verdicts)
    assert prediction.counts["rewrites"] == 3  # one per hop, then the hop stays unanswered


def test_unparsable_stages_fall_back_without_crashing(static_retriever):
    script = Script(decompose=lambda p: {"nonsense": "x"}, verify=lambda p: {"reason": "r", "valid": "maybe"})
    _, prediction, script = run(static_retriever, script, max_reflections=0, **MULTIHOP)
    assert [r["stage"] for r in prediction.stage_trace if "error" in r][:2] == ["decompose", "decompose"]  # one retry
    assert prediction.sub_questions == [QUESTION] and prediction.counts["decompose.fallback"] == 1
    assert prediction.grounded is False and "finalize" not in script.seen


def test_per_stage_lms_are_used_by_their_stages_only(static_retriever):
    main, upgraded = Script(), Script()
    dspy.configure(lm=main.lm)
    program = ComposeRAG(retriever=static_retriever, simple_qa=False)
    program.set_stage_lm("rank_passages", upgraded.lm)
    program.set_stage_lm("decompose", upgraded.lm)
    program(question=QUESTION)
    assert set(upgraded.seen) == {"rank_passages", "decompose"} and upgraded.seen.count("rank_passages") == 3
    assert not {"rank_passages", "decompose"} & set(main.seen)


def test_upgrading_one_module_moves_all_its_stages(static_retriever):
    main, upgraded = Script(), Script()
    dspy.configure(lm=main.lm)
    program = ComposeRAG(retriever=static_retriever, simple_qa=False)
    program.set_module_lm("AV", upgraded.lm)
    program(question=QUESTION)
    assert set(upgraded.seen) == {"verify", "verify_final"} and not {"verify", "verify_final"} & set(main.seen)
    with pytest.raises(KeyError, match="switched off"):
        ComposeRAG(passage_reranking=False).set_module_lm("PR", upgraded.lm)


@pytest.mark.parametrize(("ranking", "order", "repaired"), [
    ("[2] > [3] > [1]", [1, 2, 0], False),
    ("[2] > [2] > [1]", [1, 0, 2], True),  # repeated, and [3] skipped: appended in retriever order
    ("[9] > [3]", [2, 0, 1], True),  # [9] invented
    ("no ranking at all", [0, 1, 2], True),
])
def test_broken_listwise_rankings_are_repaired(ranking, order, repaired):
    assert parse_ranking(ranking, 3) == (order, repaired)


def answered(question: str, answer: str, reasoning: str = "r") -> Hop:
    return Hop(question=question, passages=[], passage_ids=[], reasoning=reasoning, answer=answer, abstained=False,
               cited=[], cited_ids=[])


def test_the_prompt_records_read_the_hops_without_citations():
    hops = [answered("Which company makes the Xbox?", "Microsoft [1].", "the Xbox page"),
            answered("Who founded Microsoft?", "Bill Gates [2].")]
    assert qa_pairs(hops) == ("Question #1: Which company makes the Xbox?\nReasoning #1: the Xbox page\n"
                              "Answer #1: Microsoft.\nQuestion #2: Who founded Microsoft?\nReasoning #2: r\n"
                              "Answer #2: Bill Gates.")
    assert qa_pairs([]) == "none"
    assert background(QUESTION, hops[:1]) == (f"Original question: {QUESTION}\nPrevious sub-questions and answers:\n"
                                              "Which company makes the Xbox? Microsoft.")
    assert background(QUESTION, []) == f"Original question: {QUESTION}"
    assert decomposed_information(hops[1:]) == ("Sub-question 1: Who founded Microsoft?\nReasoning: r\n"
                                                "Answer: Bill Gates.")
    assert solving_record(SUBS[:2], hops[1:]) == (
        "Original decomposition:\n1. Which company makes the Xbox?\n2. Who founded #1?\n"
        "Rewritten sub-question #1: Who founded Microsoft?\nReasoning #1: r\nAnswer #1: Bill Gates.")


def test_reflection_rounds_pair_each_decomposition_with_its_analysis():
    run = Solving(QUESTION, decompositions=[SUBS, SUBS[:1]], analyses=["- ask for the founder first"])
    assert run.sub_questions == SUBS[:1] and run.rounds() == [(SUBS, "- ask for the founder first")]
    assert previous_decompositions(run.rounds()) == (
        "Incorrect decomposition 1:\n1. Which company makes the Xbox?\n2. Who founded #1?\n3. Where was #2 born?\n"
        "New decomposition instructions 1:\n- ask for the founder first")
    assert Solving(QUESTION).sub_questions == [] and Solving(QUESTION).rounds() == []


def test_a_repaired_ranking_is_counted_in_the_program(static_retriever):
    script = Script(rank_passages=lambda p: {"reasoning": "r", "ranking": "[4] > [4] > [42]"})
    _, prediction, _ = run(static_retriever, script, max_reflections=0, **MULTIHOP)
    assert prediction.history[0]["passage_ids"] == pids(static_retriever, 3, 0, 1, 2, 4, 5, 6, 7)
    assert prediction.counts["rerank_repaired"] == 3


def test_a_hop_answers_from_the_top_10_of_the_listwise_ranking_as_its_prompt_asks():
    retriever = StaticRetriever([Passage.make(f"T{i}", f"text {i}") for i in range(12)])
    ranking = " > ".join(f"[{i}]" for i in (12, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
    script = Script(rank_passages=lambda p: {"reasoning": "r", "ranking": ranking})
    program, prediction, _ = run(retriever, script, n=12, max_reflections=0, **MULTIHOP)
    assert program.k == 10  # the default reads the prompt's top 10
    assert retriever.calls[0] == (SUBS[0], 12)  # n candidates ranked
    assert prediction.history[0]["passage_ids"] == pids(retriever, 11, 10, *range(8))  # the ranking's first 10
    (context,) = {field(p, "context") for p in script.prompts_of("answer")[:1]}
    assert "T11: text 11" in context and "T8: text 8" not in context


def test_compiles_saves_and_loads(static_retriever, tmp_path):
    script = Script()
    dspy.configure(lm=script.lm)
    program = ComposeRAG(retriever=static_retriever, simple_qa=False, max_reflections=1, passage_reranking=False)
    trainset = [dspy.Example(question=QUESTION, answers=["Seattle"]).with_inputs("question")]
    compiled = compile_program(program, trainset, optimizer="bootstrap", metric="cover_em")
    assert compiled.answer.demos and compiled.decompose.demos[0].sub_questions == SUBS  # bootstrapped, not the paper's
    save(compiled, tmp_path / "compiled")
    loaded = load(tmp_path / "compiled", retriever=static_retriever)
    assert loaded.config() == program.config()
    assert [d["answer"] for d in loaded.answer.demos] == [d["answer"] for d in compiled.answer.demos]
    assert "rank_passages" not in loaded.stage_names()
    with pytest.raises(ValueError, match="config"):
        load(tmp_path / "compiled", program=ComposeRAG(retriever=static_retriever))


def test_paper_demos_are_demos_of_the_decomposition_stages():
    program = ComposeRAG()
    assert len(program.decompose.demos) == 5 and program.decompose.demos[0].sub_questions == []
    assert program.improve_decomposition.demos[0].new_decomposition[-1] == "Which city is home to #3?"
    assert not ComposeRAG(paper_demos=False).decompose.demos


@pytest.mark.slow
def test_smollm2_answers_a_real_question_end_to_end(musique_dev, cached_retriever):
    from multihop.lm.backends import configure_lm

    configure_lm("local:smollm2", max_tokens=64)  # the 135M model rambles: a short cap keeps this test near a minute
    program = ComposeRAG(retriever=cached_retriever, max_reflections=0, max_sub_questions=2)
    prediction = program(question=musique_dev[0].question)
    assert isinstance(prediction.answer, str) and prediction.path in {"simple", "multihop"}
    lm_stages = [r["stage"] for r in prediction.stage_trace if r["kind"] == "lm"]
    assert lm_stages[:1] == ["answer"] and prediction.counts["llm_calls"] == len(lm_stages) >= 2
    assert prediction.counts["retrieval_calls"] >= 1
    assert set(prediction.passage_ids) <= {p.id for p in cached_retriever.corpus}
    assert len(prediction.verdicts) == prediction.counts["verifications"] >= 1
    assert prediction.counts["stage_errors"] == 0  # every stage reply parsed: decoded under its schema
    simple = prediction.verdicts[0]  # the path follows the simple verdict: verified → simple, failed → escalated
    assert simple["stage"] == "simple" and simple["valid"] == (prediction.path == "simple")
    assert prediction.counts.get("escalated", 0) == int(prediction.path == "multihop")
    assert set(prediction.cited_ids) <= set(prediction.passage_ids)  # citations resolve to passages it read
    assert prediction.abstained == (prediction.answer == "I don't know.")


def test_the_verifier_sees_the_cited_passages_under_the_numbers_the_answer_cites(static_retriever):
    sources = []

    def verify(prompt):
        sources.append(field(prompt, "source"))
        return {"reason": "supported", "valid": "true"}

    answers = {**ANSWERS, QUESTION: "Bill Gates [2], born in Seattle [3]."}
    script = Script(verify=verify, answer=lambda p: {"reasoning": "r", "answer": answers.get(field(p, "question"),
                                                                                           "Seattle [1].")})
    _, prediction, _ = run(static_retriever, script)
    cited = re.findall(r"\[(\d+)\]", sources[0])
    assert cited == ["2", "3"]  # the answer's own numbers, not renumbered from [1]
    assert static_retriever.passages[1].text in sources[0] and static_retriever.passages[2].text in sources[0]


def test_a_long_decomposition_keeps_its_last_step_and_counts_the_cut(static_retriever):
    assert capped(["a", "b", "c"], 6) == (["a", "b", "c"], False)
    assert capped(["s1", "s2", "s3", "s4", "s5", "compare #4 and #5"], 4) == (["s1", "s2", "s3", "compare #4 and #5"],
                                                                             True)
    seven = [f"step {i}" for i in range(1, 7)] + ["Which is older, #4 or #5?"]
    script = Script(decompose=lambda p: {"reasoning": "r", "sub_questions": json.dumps(seven)})
    program, prediction, _ = run(static_retriever, script, **MULTIHOP)
    assert program.max_sub_questions == 6
    assert prediction.sub_questions[-1] == "Which is older, #4 or #5?" and len(prediction.sub_questions) == 6
    assert prediction.counts["decomposition_cut"] == 1
    with pytest.raises(ValueError, match="max_sub_questions must be at least 1"):
        ComposeRAG(retriever=static_retriever, max_sub_questions=0)
