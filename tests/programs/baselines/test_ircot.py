"""IRCoT: its loop on scripted LMs — which sentence each retrieval used, the stop rules and caps (its paragraph cap on
its first retrieval too, and its paragraph word limits), the answer it returns, the counts — and its gold rows from the
annotations."""

import pytest

from multihop.data.corpus import Corpus, Passage
from multihop.programs import IRCoT
from multihop.programs.baselines.ircot.paragraphs import cut, shown, without_long, words
from multihop.retrievers.query import Hits

from helpers import LOST_GRAVITY as DOCS
from helpers import LOST_GRAVITY_QUESTION as QUESTION
from helpers import QueryRecordingBM25, StaticRetriever, field, gold_stage_rows, run_loop, sentences


def test_ircot_retrieves_with_each_sentence_and_stops_on_the_answer_phrase():
    program = IRCoT(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1)
    reason = sentences("Lost Gravity was manufactured by Mack Rides.", "Mack Rides is based in Germany.",
                       "So the answer is: Germany.", "never asked")
    prediction, script = run_loop(program, reason=reason,
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

    run_loop(IRCoT(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1), reason=reason, answer={"answer": "Germany"})
    assert seen[0][1] in ("[]", "") and "Mack Rides is a company based in Waldkirch." in seen[1][1]
    assert seen == [(0, seen[0][1]), (1, seen[1][1])]  # the sentence's retrieval added Mack Rides' paragraph


def test_ircot_stops_at_the_step_cap_and_the_paragraph_cap():
    program = IRCoT(retriever=QueryRecordingBM25(Corpus(DOCS)), k=2, max_steps=3, max_paragraphs=3)
    steps = iter(["Waldkirch is a town.", "The Xbox is a console.", "Mack Rides.", "never asked"])
    prediction, script = run_loop(program, reason=lambda p: {"next_sentence": next(steps)},
                                  answer={"answer": "Germany"})
    assert script.seen.count("reason") == 3 and prediction.counts["step_cap"] == 1
    assert len(program.rm.asked) == 3  # the question, then the first two sentences: none after the last step
    assert len(prediction.passage_ids) == 3 and DOCS[3].id not in prediction.passage_ids  # the Xbox came too late


def test_ircot_caps_the_questions_first_retrieval_at_max_paragraphs_too():
    program = IRCoT(retriever=StaticRetriever(DOCS), k=3, max_paragraphs=2)  # the authors cap every addition
    prediction, script = run_loop(program, reason=sentences("So the answer is: Germany."), answer={"answer": "Germany"})
    assert program.rm.calls == [(QUESTION, 3)] and prediction.passage_ids == [DOCS[0].id, DOCS[1].id]
    assert prediction.counts["paragraphs"] == 2
    for stage in ("reason", "answer"):  # the chain's context and the reader's: the first two of the three
        (prompt,) = script.prompts_of(stage)
        assert "Mack Rides is a company" in field(prompt, "passages") and "Waldkirch is a town" not in field(
            prompt, "passages")


def test_ircot_cot_reader_reasons_over_the_collected_paragraphs():
    program = IRCoT(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1, cot_reader=True)
    assert "answer" not in program.stage_names() and "cot_answer" in program.stage_names()
    prediction, script = run_loop(program, reason=sentences("Mack Rides is a company based in Waldkirch.",
                                                            "So the answer is: Waldkirch."),
                                  cot_answer=lambda p: {"reasoning": "Mack Rides is in Germany.",
                                                        "answer": "Germany" if "Waldkirch, Germany" in p else "?"})
    assert prediction.answer == "Germany" and script.seen == ["reason", "reason", "cot_answer"]


def test_ircot_without_reader_answers_with_the_chain_and_never_invents_one():
    chain = IRCoT(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1, reader=False)
    assert "answer" not in chain.stage_names()
    assert run_loop(chain, reason=sentences("So the answer is: Germany."))[0].answer == "Germany"
    capped = IRCoT(retriever=QueryRecordingBM25(Corpus(DOCS)), k=1, reader=False, max_steps=2)
    assert run_loop(capped, reason=sentences("One.", "Two."))[0].answer == ""


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
    program = IRCoT(retriever=QueryRecordingBM25(corpus), k=6)
    assert (program.paragraph_words, program.long_paragraph_words) == (350, 600)  # the authors' values
    prediction, script = run_loop(program, reason=sentences("So the answer is: Germany."), answer={"answer": "Germany"})
    assert long.id not in prediction.passage_ids and wordy.id in prediction.passage_ids
    assert prediction.counts["long_paragraphs"] == 1 and prediction.counts["paragraphs"] == len(prediction.passage_ids)
    for stage in ("reason", "answer"):  # the chain's context and the reader's
        passages = field(script.prompts_of(stage)[0], "passages")
        assert "v347" in passages and "v348" not in passages and "w0" not in passages  # 2 + 348 words shown
    whole = IRCoT(retriever=QueryRecordingBM25(corpus), k=6, paragraph_words=None, long_paragraph_words=None)
    prediction, script = run_loop(whole, reason=sentences("So the answer is: Germany."), answer={"answer": "Germany"})
    assert long.id in prediction.passage_ids and prediction.counts["long_paragraphs"] == 0
    assert "v397" in field(script.prompts_of("reason")[0], "passages")
    with pytest.raises(ValueError, match="paragraph word limits"):
        IRCoT(paragraph_words=0)


def test_gold_rows_chain_the_hops_evidence_and_ask_the_hops(musique_example):
    rows = gold_stage_rows(IRCoT(k=2), musique_example)["reason"]
    assert [out["next_sentence"] for _, out in rows] == [DOCS[0].text, DOCS[1].text, "So the answer is: Germany."]
    assert rows[2][0]["reasoning"] == [DOCS[0].text, DOCS[1].text]
    (inputs, outputs), = gold_stage_rows(IRCoT(k=2, cot_reader=True), musique_example)["cot_answer"]
    assert outputs == {"reasoning": f"{DOCS[0].text} {DOCS[1].text}", "answer": "Germany"}
    assert set(inputs) == {"passages", "question"} and len(inputs["passages"]) == 3  # both hops and a distractor


def test_gold_rows_show_each_paragraph_cut_as_the_program_shows_it(musique_example):
    long_text = " ".join(f"w{i}" for i in range(400))
    example = musique_example.copy(paragraphs=[{**musique_example.paragraphs[0], "text": long_text},
                                               *musique_example.paragraphs[1:]])
    cut_doc = "Lost Gravity: " + " ".join(f"w{i}" for i in range(350))
    for stage in ("reason", "answer"):
        assert cut_doc in gold_stage_rows(IRCoT(k=2), example)[stage][0][0]["passages"]
    whole = gold_stage_rows(IRCoT(k=2, paragraph_words=None), example)["answer"][0][0]["passages"]
    assert f"Lost Gravity: {long_text}" in whole
