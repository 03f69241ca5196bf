"""Self-Ask: each follow-up retrieved and answered until the final answer, the chain so far shown to each decision,
the caps, its own answer to a follow-up whose retrieval returned nothing (after the chain so far), closed-book
follow-ups without retrieval, and its gold rows from the annotations; on scripted LMs."""

import pytest

from multihop.data.corpus import Corpus
from multihop.programs import SelfAsk

from helpers import LOST_GRAVITY as DOCS
from helpers import LOST_GRAVITY_QUESTION as QUESTION
from helpers import KeyedRetriever, QueryRecordingBM25, field, gold_stage_rows, run_loop


def follow_ups(*decisions):
    replies = iter(decisions)

    def reply(prompt):
        question, final = next(replies)
        return {"follow_up_needed": str(question is not None).lower(), "follow_up": question or "",
                "final_answer": final}

    return reply


def test_self_ask_retrieves_each_follow_up_and_stops_on_the_final_answer():
    program = SelfAsk(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1)
    prediction, script = run_loop(
        program, follow_up=follow_ups(("Who manufactured Lost Gravity?", ""), ("Where is Mack Rides based?", ""),
                                           (None, "Germany")),
        intermediate=lambda p: {"intermediate_answer": field(p, "passages").split(" by ")[-1][:20]})
    assert [q for q, _ in program.rm.asked] == ["Who manufactured Lost Gravity?", "Where is Mack Rides based?"]
    assert [step["question"] for step in prediction.follow_ups] == ["Who manufactured Lost Gravity?",
                                                                     "Where is Mack Rides based?"]
    assert prediction.answer == "Germany" and prediction.counts["follow_ups"] == 2
    assert script.seen == ["follow_up", "intermediate", "follow_up", "intermediate", "follow_up"]


def test_self_ask_shows_each_answered_follow_up_to_the_next_decision():
    lines = []

    def decide(prompt):
        lines.append(field(prompt, "follow_ups"))
        return {"follow_up_needed": str(len(lines) == 1).lower(), "follow_up": "Who made it?" if len(lines) == 1
                else "", "final_answer": "" if len(lines) == 1 else "Mack Rides"}

    run_loop(SelfAsk(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1), follow_up=decide,
        intermediate={"intermediate_answer": "Mack Rides"})
    assert "Follow up: Who made it? Intermediate answer: Mack Rides" in lines[1]


def test_self_ask_cap_repeat_and_no_final_answer_end_with_one_concluding_call():
    program = SelfAsk(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1, max_follow_ups=2)
    asking = iter(range(100))
    concluded = []

    def conclude(prompt):
        concluded.append(field(prompt, "follow_ups"))
        return {"final_answer": "Germany"}

    prediction, script = run_loop(program, follow_up=lambda p: {"follow_up_needed": "true",
                                                                "follow_up": f"Q{next(asking)}?", "final_answer": ""},
                                  own_answer={"intermediate_answer": "Mack Rides"}, conclude=conclude)  # BM25: no hit
    assert len(program.rm.asked) == 2 and prediction.counts["follow_up_cap"] == 1
    assert prediction.answer == "Germany" and script.seen[-1] == "conclude" and prediction.counts["concluded"] == 1
    assert "Follow up: Q1? Intermediate answer: Mack Rides" in concluded[0]  # it reads every answered follow-up
    repeat = SelfAsk(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1)
    prediction, _ = run_loop(repeat, follow_up=lambda p: {"follow_up_needed": "true", "follow_up": "Same?",
                                                          "final_answer": ""},
                             own_answer={"intermediate_answer": "Waldkirch"}, conclude={"final_answer": "Germany"})
    assert len(repeat.rm.asked) == 1 and prediction.counts["repeated_follow_up"] == 1
    silent = SelfAsk(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1)
    prediction, script = run_loop(silent, follow_up=follow_ups((None, "")), conclude={"final_answer": "Germany"})
    assert prediction.answer == "Germany" and script.seen == ["follow_up", "conclude"]
    answered = SelfAsk(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1)
    prediction, script = run_loop(answered, follow_up=follow_ups((None, "Germany")), conclude={"final_answer": "never"})
    assert script.seen == ["follow_up"] and prediction.counts["concluded"] == 0


def test_self_ask_without_retrieval_answers_follow_ups_closed_book():
    program = SelfAsk(retriever=QueryRecordingBM25(Corpus(DOCS)), retrieval=False)
    prediction, script = run_loop(program, follow_up=follow_ups(("Who made Lost Gravity?", ""), (None, "Germany")),
                                  intermediate={"intermediate_answer": "Mack Rides"})
    assert not getattr(program.rm, "asked", []) and prediction.passage_ids == []
    assert "passages" not in program.intermediate.signature.input_fields and prediction.answer == "Germany"


def test_self_ask_alone_answers_each_follow_up_after_the_chain_so_far_unless_told_the_follow_up_alone():
    decisions = (("Who made Lost Gravity?", ""), ("Where is Mack Rides based?", ""), (None, "Germany"))
    answers = iter(["Mack Rides", "Waldkirch"])
    program = SelfAsk(retrieval=False)
    _, script = run_loop(program, follow_up=follow_ups(*decisions),
                         intermediate=lambda p: {"intermediate_answer": next(answers)})
    first, second = script.prompts_of("intermediate")
    assert field(first, "question") == QUESTION and field(first, "follow_ups").strip() == "[]"
    assert "Follow up: Who made Lost Gravity? Intermediate answer: Mack Rides" in field(second, "follow_ups")
    assert field(second, "follow_up") == "Where is Mack Rides based?"
    alone = SelfAsk(retrieval=False, own_answer_context="follow_up")
    assert set(alone.intermediate.signature.input_fields) == {"follow_up"}
    _, script = run_loop(alone, follow_up=follow_ups(*decisions), intermediate={"intermediate_answer": "Mack Rides"})
    assert "Follow up:" not in script.prompts_of("intermediate")[1].rsplit("[[ ## follow_up ## ]]", 1)[1]
    with pytest.raises(ValueError, match="unknown own_answer_context 'all'"):
        SelfAsk(own_answer_context="all")


def test_self_ask_answers_a_follow_up_itself_when_its_retrieval_returns_nothing():
    retriever = KeyedRetriever({"Who manufactured Lost Gravity?": [DOCS[0]]}, [])  # nothing for any other query
    decisions = (("Who manufactured Lost Gravity?", ""), ("Where is Mack Rides based?", ""), (None, "Germany"))
    program = SelfAsk(retriever=retriever, k=1)  # the authors' code: the LM writes the answer the search lacks
    assert program.own_answer_fallback and "passages" not in program.own_answer.signature.input_fields
    prediction, script = run_loop(program, follow_up=follow_ups(*decisions),
                                  intermediate={"intermediate_answer": "Mack Rides"},
                                  own_answer={"intermediate_answer": "Germany"})
    assert script.seen == ["follow_up", "intermediate", "follow_up", "own_answer", "follow_up"]
    own = script.prompts_of("own_answer")[0]  # the authors' model continues the scaffold: it sees the chain so far
    assert field(own, "follow_up") == "Where is Mack Rides based?" and field(own, "question") == QUESTION
    assert "Follow up: Who manufactured Lost Gravity? Intermediate answer: Mack Rides" in field(own, "follow_ups")
    assert [step["answer"] for step in prediction.follow_ups] == ["Mack Rides", "Germany"]
    assert prediction.counts["own_answers"] == 1 and prediction.passage_ids == [DOCS[0].id]

    reader = SelfAsk(retriever=retriever, k=1, own_answer_fallback=False)  # the reader reads no passage
    assert "own_answer" not in reader.stage_names()
    prediction, script = run_loop(reader, follow_up=follow_ups(*decisions), intermediate=lambda p: {
        "intermediate_answer": "Mack Rides" if "Lost Gravity" in field(p, "passages") else "unknown"})
    assert script.seen == ["follow_up", "intermediate", "follow_up", "intermediate", "follow_up"]
    assert prediction.follow_ups[1]["answer"] == "unknown" and prediction.counts["own_answers"] == 0


def test_self_ask_gold_rows_ask_each_hop_and_answer_it_from_the_hops_evidence_or_closed_book(musique_example):
    decisions = gold_stage_rows(SelfAsk(), musique_example)["follow_up"]
    assert [out["follow_up"] for _, out in decisions] == ["What is the manufacturer of Lost Gravity?",
                                                         "What is the country of Mack Rides?", ""]
    assert decisions[-1][1] == {"follow_up_needed": False, "follow_up": "", "final_answer": "Germany"}
    own = gold_stage_rows(SelfAsk(), musique_example)["own_answer"]  # closed-book: the LM's when a search finds none
    assert [out["intermediate_answer"] for _, out in own] == ["Mack Rides", "Germany"]
    assert own[1][0] == {"question": QUESTION, "follow_ups": [
        "Follow up: What is the manufacturer of Lost Gravity? Intermediate answer: Mack Rides"],
        "follow_up": "What is the country of Mack Rides?"}  # after the hop before it, as the scaffold shows it
    assert gold_stage_rows(SelfAsk(own_answer_context="follow_up"), musique_example)["own_answer"][1][0] == {
        "follow_up": "What is the country of Mack Rides?"}
    assert gold_stage_rows(SelfAsk(retrieval=False), musique_example)["intermediate"] == own
    answers = gold_stage_rows(SelfAsk(k=2), musique_example)["intermediate"]
    assert [out["intermediate_answer"] for _, out in answers] == ["Mack Rides", "Germany"]
    assert any("Mack Rides is a company" in passage for passage in answers[1][0]["passages"])
