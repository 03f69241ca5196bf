"""IRCoT, Iter-RetGen and Self-Ask: their loops on scripted LMs — which text each retrieval used, the stop
rules and caps (IRCoT's paragraph cap on its first retrieval too, and its paragraph word limits), the answer each
returns (Self-Ask's own answer to a follow-up whose retrieval returned nothing, after the chain so far), the counts —
and their gold rows from the annotations."""

import dspy
import pytest

from multihop.data.corpus import Corpus, Passage
from multihop.optimize.gold_targets import gold_targets
from multihop.programs import IRCoT, IterRetGen, SelfAsk
from multihop.programs.baselines.ircot.paragraphs import cut, shown, without_long, words
from multihop.programs.baselines.iter_retgen import next_query
from multihop.retrievers import BM25Retriever
from multihop.retrievers.query import Hits

from helpers import KeyedRetriever, StageScript, StaticRetriever, field

DOCS = [
    Passage.make("Lost Gravity", "Lost Gravity is a roller coaster manufactured by Mack Rides."),
    Passage.make("Mack Rides", "Mack Rides is a company based in Waldkirch, Germany."),
    Passage.make("Waldkirch", "Waldkirch is a town in Baden-Württemberg."),
    Passage.make("Xbox", "The Xbox is a console made by Microsoft."),
]
QUESTION = "In what country was Lost Gravity manufactured?"


class Asked(BM25Retriever):
    """BM25 that records each query it was asked, with its k."""

    def search(self, queries, k):
        self.asked = [*getattr(self, "asked", []), *((q, k) for q in queries)]
        return super().search(queries, k)


def sentences(*texts: str):
    replies = iter(texts)
    return lambda prompt: {"next_sentence": next(replies)}


def run(program, **replies):
    script = StageScript(replies, program)
    with dspy.context(lm=script.lm):
        return program(question=QUESTION), script


def test_ircot_retrieves_with_each_sentence_and_stops_on_the_answer_phrase():
    program = IRCoT(retriever=Asked(Corpus(DOCS)), k=1)
    prediction, script = run(program, reason=sentences("Lost Gravity was manufactured by Mack Rides.",
                                                       "Mack Rides is based in Germany.", "So the answer is: Germany.",
                                                       "never asked"),
                             answer=lambda p: {"answer": "Germany" if "Waldkirch, Germany" in p else "unknown"})
    queries = [q for q, _ in program.rm.asked]
    assert queries == [QUESTION, "Lost Gravity was manufactured by Mack Rides.", "Mack Rides is based in Germany."]
    assert prediction.reasoning[-1] == "So the answer is: Germany." and prediction.answer == "Germany"
    assert script.seen == ["reason", "reason", "reason", "answer"]
    counts = prediction.counts
    assert counts["steps"] == 3 and counts["step_cap"] == 0 and counts["paragraphs"] == len(prediction.passage_ids)


def test_ircot_sees_the_growing_collection_and_the_chain_so_far():
    seen = []

    def reason(prompt):
        seen.append((field(prompt, "passages").count("Waldkirch"), field(prompt, "reasoning")))
        return {"next_sentence": ["Mack Rides is a company based in Waldkirch.", "So the answer is: Germany."][
            len(seen) - 1]}

    run(IRCoT(retriever=Asked(Corpus(DOCS)), k=1), reason=reason, answer={"answer": "Germany"})
    assert seen[0][1] in ("[]", "") and "Mack Rides is a company based in Waldkirch." in seen[1][1]
    assert seen == [(0, seen[0][1]), (1, seen[1][1])]  # the sentence's retrieval added Mack Rides' paragraph


def test_ircot_stops_at_the_step_cap_and_the_paragraph_cap():
    program = IRCoT(retriever=Asked(Corpus(DOCS)), k=2, max_steps=3, max_paragraphs=3)
    steps = iter(["Waldkirch is a town.", "The Xbox is a console.", "Mack Rides.", "never asked"])
    prediction, script = run(program, reason=lambda p: {"next_sentence": next(steps)}, answer={"answer": "Germany"})
    assert script.seen.count("reason") == 3 and prediction.counts["step_cap"] == 1
    assert len(program.rm.asked) == 3  # the question, then the first two sentences: none after the last step
    assert len(prediction.passage_ids) == 3 and DOCS[3].id not in prediction.passage_ids  # the Xbox came too late


def test_ircot_caps_the_questions_first_retrieval_at_max_paragraphs_too():
    program = IRCoT(retriever=StaticRetriever(DOCS), k=3, max_paragraphs=2)  # the authors cap every addition
    prediction, script = run(program, reason=sentences("So the answer is: Germany."), answer={"answer": "Germany"})
    assert program.rm.calls == [(QUESTION, 3)] and prediction.passage_ids == [DOCS[0].id, DOCS[1].id]
    assert prediction.counts["paragraphs"] == 2
    for stage in ("reason", "answer"):  # the chain's context and the reader's: the first two of the three
        (prompt,) = script.prompts_of(stage)
        assert "Mack Rides is a company" in field(prompt, "passages") and "Waldkirch is a town" not in field(
            prompt, "passages")


def test_ircot_cot_reader_reasons_over_the_collected_paragraphs():
    program = IRCoT(retriever=Asked(Corpus(DOCS)), k=1, cot_reader=True)
    assert "answer" not in program.stage_names() and "cot_answer" in program.stage_names()
    prediction, script = run(program, reason=sentences("Mack Rides is a company based in Waldkirch.",
                                                       "So the answer is: Waldkirch."),
                             cot_answer=lambda p: {"reasoning": "Mack Rides is in Germany.",
                                                   "answer": "Germany" if "Waldkirch, Germany" in p else "?"})
    assert prediction.answer == "Germany" and script.seen == ["reason", "reason", "cot_answer"]


def test_ircot_without_reader_answers_with_the_chain_and_never_invents_one():
    chain = IRCoT(retriever=Asked(Corpus(DOCS)), k=1, reader=False)
    assert "answer" not in chain.stage_names()
    assert run(chain, reason=sentences("So the answer is: Germany."))[0].answer == "Germany"
    capped = IRCoT(retriever=Asked(Corpus(DOCS)), k=1, reader=False, max_steps=2)
    assert run(capped, reason=sentences("One.", "Two."))[0].answer == ""


def test_paragraph_words_are_counted_and_cut_at_single_spaces_as_the_authors_do():
    assert words("a b  c") == 4 and words("a\nb c") == 2  # "a", "b", "", "c"; a newline stays inside a word
    # the cut is stripped, as para_to_text strips it
    assert cut("a b  c d", 3) == "a b" and cut("a\nb c d", 1) == "a\nb" and cut("a b", None) == "a b"
    hits = Hits(passages=["T: a b c", "U: d e f g", "V: h"], ids=["t", "u", "v"], scores=[0.9, 0.8, 0.7],
                titles=["T", "U", "V"], texts=["a b c", "d e f g", "h"])
    kept, dropped = without_long(hits, 3)
    assert (kept.ids, kept.scores, dropped) == (["t", "v"], [0.9, 0.7], 1)  # "d e f g" has 4 words
    assert without_long(hits, None)[0].ids == ["t", "u", "v"]
    assert shown(hits, 2) == ["T: a b", "U: d e", "V: h"]  # the title is no word of the text
    assert shown(hits, None) == hits.passages
    untitled = Hits(passages=["a b c"], ids=["x"], scores=[1.0])
    assert shown(untitled, 2) == ["a b"] and without_long(untitled, 2)[1] == 1


def test_ircot_drops_paragraphs_over_600_words_and_shows_each_cut_to_350_unless_switched_off():
    long = Passage.make("Long", "Lost Gravity " + " ".join(f"w{i}" for i in range(700)))  # 702 words: dropped
    wordy = Passage.make("Wordy", "Lost Gravity " + " ".join(f"v{i}" for i in range(398)))  # 400 words: cut
    corpus = Corpus([*DOCS, long, wordy])
    program = IRCoT(retriever=Asked(corpus), k=6)
    assert (program.paragraph_words, program.long_paragraph_words) == (350, 600)  # the authors' values
    prediction, script = run(program, reason=sentences("So the answer is: Germany."), answer={"answer": "Germany"})
    assert long.id not in prediction.passage_ids and wordy.id in prediction.passage_ids
    assert prediction.counts["long_paragraphs"] == 1 and prediction.counts["paragraphs"] == len(prediction.passage_ids)
    for stage in ("reason", "answer"):  # the chain's context and the reader's
        passages = field(script.prompts_of(stage)[0], "passages")
        assert "v347" in passages and "v348" not in passages and "w0" not in passages  # 2 + 348 words shown
    whole = IRCoT(retriever=Asked(corpus), k=6, paragraph_words=None, long_paragraph_words=None)
    prediction, script = run(whole, reason=sentences("So the answer is: Germany."), answer={"answer": "Germany"})
    assert long.id in prediction.passage_ids and prediction.counts["long_paragraphs"] == 0
    assert "v397" in field(script.prompts_of("reason")[0], "passages")
    with pytest.raises(ValueError, match="paragraph word limits"):
        IRCoT(paragraph_words=0)


def test_iter_retgen_queries_with_the_last_generation_then_the_question():
    program = IterRetGen(retriever=Asked(Corpus(DOCS)), k=1, iterations=3)
    answers = iter(["Mack Rides", "Germany", "Germany"])
    prediction, script = run(program, generate=lambda p: {"reasoning": f"It saw {field(p, 'passages')[:30]}",
                                                          "answer": next(answers)})
    queries = [q for q, _ in program.rm.asked]
    assert queries[0] == QUESTION and len(queries) == 3 and script.seen == ["generate"] * 3
    first = prediction.generations[0]
    assert queries[1] == next_query(QUESTION, first["reasoning"], first["answer"])
    assert queries[1].endswith(QUESTION) and queries[1].startswith("It saw")
    assert prediction.answer == "Germany" and prediction.counts["answer_changed"] == 1
    assert prediction.counts["rounds"] == 3


def test_iter_retgen_keeps_the_last_generation_when_one_fails():
    program = IterRetGen(retriever=Asked(Corpus(DOCS)), k=1, iterations=2)
    calls = []

    def generate(prompt):  # the second round (and DSPy's JSON retry of it) replies with no field
        calls.append(prompt)
        return {"reasoning": "Made by Mack Rides.", "answer": "Germany"} if len(calls) == 1 else {}

    prediction, _ = run(program, generate=generate)
    assert prediction.answer == "Germany" and prediction.counts["generate.fallback"] == 1


def follow_ups(*decisions):
    replies = iter(decisions)

    def reply(prompt):
        question, final = next(replies)
        return {"follow_up_needed": str(question is not None).lower(), "follow_up": question or "",
                "final_answer": final}

    return reply


def test_self_ask_retrieves_each_follow_up_and_stops_on_the_final_answer():
    program = SelfAsk(retriever=Asked(Corpus(DOCS)), k=1)
    prediction, script = run(
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

    run(SelfAsk(retriever=Asked(Corpus(DOCS)), k=1), follow_up=decide,
        intermediate={"intermediate_answer": "Mack Rides"})
    assert "Follow up: Who made it? Intermediate answer: Mack Rides" in lines[1]


def test_self_ask_cap_repeat_and_no_final_answer_end_with_one_concluding_call():
    program = SelfAsk(retriever=Asked(Corpus(DOCS)), k=1, max_follow_ups=2)
    asking = iter(range(100))
    concluded = []

    def conclude(prompt):
        concluded.append(field(prompt, "follow_ups"))
        return {"final_answer": "Germany"}

    prediction, script = run(program, follow_up=lambda p: {"follow_up_needed": "true", "follow_up": f"Q{next(asking)}?",
                                                           "final_answer": ""},
                             own_answer={"intermediate_answer": "Mack Rides"}, conclude=conclude)  # BM25: no hit
    assert len(program.rm.asked) == 2 and prediction.counts["follow_up_cap"] == 1
    assert prediction.answer == "Germany" and script.seen[-1] == "conclude" and prediction.counts["concluded"] == 1
    assert "Follow up: Q1? Intermediate answer: Mack Rides" in concluded[0]  # it reads every answered follow-up
    repeat = SelfAsk(retriever=Asked(Corpus(DOCS)), k=1)
    prediction, _ = run(repeat, follow_up=lambda p: {"follow_up_needed": "true", "follow_up": "Same?",
                                                     "final_answer": ""},
                        own_answer={"intermediate_answer": "Waldkirch"}, conclude={"final_answer": "Germany"})
    assert len(repeat.rm.asked) == 1 and prediction.counts["repeated_follow_up"] == 1
    silent = SelfAsk(retriever=Asked(Corpus(DOCS)), k=1)
    prediction, script = run(silent, follow_up=follow_ups((None, "")), conclude={"final_answer": "Germany"})
    assert prediction.answer == "Germany" and script.seen == ["follow_up", "conclude"]
    answered = SelfAsk(retriever=Asked(Corpus(DOCS)), k=1)
    prediction, script = run(answered, follow_up=follow_ups((None, "Germany")), conclude={"final_answer": "never"})
    assert script.seen == ["follow_up"] and prediction.counts["concluded"] == 0


def test_self_ask_without_retrieval_answers_follow_ups_closed_book():
    program = SelfAsk(retriever=Asked(Corpus(DOCS)), retrieval=False)
    prediction, script = run(program, follow_up=follow_ups(("Who made Lost Gravity?", ""), (None, "Germany")),
                             intermediate={"intermediate_answer": "Mack Rides"})
    assert not getattr(program.rm, "asked", []) and prediction.passage_ids == []
    assert "passages" not in program.intermediate.signature.input_fields and prediction.answer == "Germany"


def test_self_ask_alone_answers_each_follow_up_after_the_chain_so_far_unless_told_the_follow_up_alone():
    decisions = (("Who made Lost Gravity?", ""), ("Where is Mack Rides based?", ""), (None, "Germany"))
    answers = iter(["Mack Rides", "Waldkirch"])
    program = SelfAsk(retrieval=False)
    _, script = run(program, follow_up=follow_ups(*decisions),
                    intermediate=lambda p: {"intermediate_answer": next(answers)})
    first, second = script.prompts_of("intermediate")
    assert field(first, "question") == QUESTION and field(first, "follow_ups").strip() == "[]"
    assert "Follow up: Who made Lost Gravity? Intermediate answer: Mack Rides" in field(second, "follow_ups")
    assert field(second, "follow_up") == "Where is Mack Rides based?"
    alone = SelfAsk(retrieval=False, own_answer_context="follow_up")
    assert set(alone.intermediate.signature.input_fields) == {"follow_up"}
    _, script = run(alone, follow_up=follow_ups(*decisions), intermediate={"intermediate_answer": "Mack Rides"})
    assert "Follow up:" not in script.prompts_of("intermediate")[1].rsplit("[[ ## follow_up ## ]]", 1)[1]
    with pytest.raises(ValueError, match="unknown own_answer_context 'all'"):
        SelfAsk(own_answer_context="all")


def test_self_ask_answers_a_follow_up_itself_when_its_retrieval_returns_nothing():
    retriever = KeyedRetriever({"Who manufactured Lost Gravity?": [DOCS[0]]}, [])  # nothing for any other query
    decisions = (("Who manufactured Lost Gravity?", ""), ("Where is Mack Rides based?", ""), (None, "Germany"))
    program = SelfAsk(retriever=retriever, k=1)  # the authors' code: the LM writes the answer the search lacks
    assert program.own_answer_fallback and "passages" not in program.own_answer.signature.input_fields
    prediction, script = run(program, follow_up=follow_ups(*decisions),
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
    prediction, script = run(reader, follow_up=follow_ups(*decisions), intermediate=lambda p: {
        "intermediate_answer": "Mack Rides" if "Lost Gravity" in field(p, "passages") else "unknown"})
    assert script.seen == ["follow_up", "intermediate", "follow_up", "intermediate", "follow_up"]
    assert prediction.follow_ups[1]["answer"] == "unknown" and prediction.counts["own_answers"] == 0


@pytest.fixture
def musique_example():
    hop1 = {"id": "p1", "title": "Lost Gravity", "text": DOCS[0].text, "is_supporting": True}
    hop2 = {"id": "p2", "title": "Mack Rides", "text": DOCS[1].text, "is_supporting": True}
    other = {"id": "p3", "title": "Xbox", "text": DOCS[3].text, "is_supporting": False}
    return dspy.Example(id="q1", question=QUESTION, answer="Germany", paragraphs=[hop1, hop2, other],
                        gold_passage_ids=["p1", "p2"], decomposition=["Lost Gravity >> manufacturer",
                                                                      "#1 >> country"],
                        decomposition_answers=["Mack Rides", "Germany"],
                        decomposition_support=["p1", "p2"]).with_inputs("question")


def stage_rows(program, example) -> dict[str, list[tuple[dict, dict]]]:
    rows: dict[str, list] = {}
    for target in gold_targets(program, [example]):
        rows.setdefault(target.stage, []).append((target.inputs, target.outputs))
    return rows


def test_gold_rows_chain_the_hops_evidence_and_ask_the_hops(musique_example):
    rows = stage_rows(IRCoT(k=2), musique_example)["reason"]
    assert [out["next_sentence"] for _, out in rows] == [DOCS[0].text, DOCS[1].text, "So the answer is: Germany."]
    assert rows[2][0]["reasoning"] == [DOCS[0].text, DOCS[1].text]
    (inputs, outputs), = stage_rows(IRCoT(k=2, cot_reader=True), musique_example)["cot_answer"]
    assert outputs == {"reasoning": f"{DOCS[0].text} {DOCS[1].text}", "answer": "Germany"}
    assert set(inputs) == {"passages", "question"} and len(inputs["passages"]) == 3  # both hops and a distractor
    decisions = stage_rows(SelfAsk(), musique_example)["follow_up"]
    assert [out["follow_up"] for _, out in decisions] == ["What is the manufacturer of Lost Gravity?",
                                                         "What is the country of Mack Rides?", ""]
    assert decisions[-1][1] == {"follow_up_needed": False, "follow_up": "", "final_answer": "Germany"}
    own = stage_rows(SelfAsk(), musique_example)["own_answer"]  # closed-book: the LM's when a retrieval finds nothing
    assert [out["intermediate_answer"] for _, out in own] == ["Mack Rides", "Germany"]
    assert own[1][0] == {"question": QUESTION, "follow_ups": [
        "Follow up: What is the manufacturer of Lost Gravity? Intermediate answer: Mack Rides"],
        "follow_up": "What is the country of Mack Rides?"}  # after the hop before it, as the scaffold shows it
    assert stage_rows(SelfAsk(own_answer_context="follow_up"), musique_example)["own_answer"][1][0] == {
        "follow_up": "What is the country of Mack Rides?"}
    assert stage_rows(SelfAsk(retrieval=False), musique_example)["intermediate"] == own
    answers = stage_rows(SelfAsk(k=2), musique_example)["intermediate"]
    assert [out["intermediate_answer"] for _, out in answers] == ["Mack Rides", "Germany"]
    assert any("Mack Rides is a company" in passage for passage in answers[1][0]["passages"])


def test_gold_rows_show_each_paragraph_cut_as_the_program_shows_it(musique_example):
    long_text = " ".join(f"w{i}" for i in range(400))
    example = musique_example.copy(paragraphs=[{**musique_example.paragraphs[0], "text": long_text},
                                               *musique_example.paragraphs[1:]])
    cut_doc = "Lost Gravity: " + " ".join(f"w{i}" for i in range(350))
    for stage in ("reason", "answer"):
        assert cut_doc in stage_rows(IRCoT(k=2), example)[stage][0][0]["passages"]
    whole = stage_rows(IRCoT(k=2, paragraph_words=None), example)["answer"][0][0]["passages"]
    assert f"Lost Gravity: {long_text}" in whole
