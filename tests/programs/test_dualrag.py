"""DualRAG: the RaQ ↔ pKA loop, its switches, fallbacks, gold targets and the DualRAG-FT rows, on scripted
LMs and a real BM25 index over Table 9's documents."""

import json
from collections import Counter

import dspy
import numpy as np
import pytest

from multihop.data.corpus import Corpus, Passage
from multihop.optimize.gold_targets import gold_targets
from multihop.optimize.trajectories import render_call
from multihop.programs import DualRAG, SingleStepRAG, load, save
from multihop.programs.dualrag.gold import gold_rounds
from multihop.programs.dualrag.outline import Outline, link_entities, merge_by_score
from multihop.programs.dualrag.sft import gold_knowledge, link_to_titles, sft_rows
from multihop.retrievers import RERANKERS, BM25Retriever, Hits, RerankedRetriever, make_reranker

from helpers import StageScript, data_root, field

QUESTION = "Which film has the director who was born later, El Extraño Viaje or Love In Pawn?"
DOCS = [
    Passage.make("El extraño viaje", "El extraño viaje is a 1964 Spanish black drama film directed by Fernando "
                 "Fernán Gómez."),
    Passage.make("Love in Pawn", "Love in Pawn is a 1953 British comedy film directed by Charles Saunders."),
    Passage.make("Fernando Fernán Gómez", "Fernando Fernán Gómez (28 August 1921 – 21 November 2007) was a Spanish "
                 "actor and director."),
    Passage.make("Charles Saunders (director)", "Charles Joel Saunders (8 April 1904 – April 1997) was an English "
                 "film director."),
    Passage.make("A Lover in Pawn", "A Lover in Pawn is a 1920 Swedish silent drama film directed by Victor "
                 "Sjöström."),
    Passage.make("La vida alrededor", "La vida alrededor is a 1959 Spanish comedy film directed by Fernando Fernán "
                 "Gómez."),
]
TABLE_9_ENTITIES = {"El Extraño Viaje": ["El Extraño Viaje director"], "Love In Pawn": ["Love In Pawn director"]}


def listed(entities: dict) -> str:
    """Entities as the Entity Identifier writes them: a JSON list of {entity, queries}."""
    return json.dumps([{"entity": name, "queries": queries} for name, queries in entities.items()])


class CountingRetriever(BM25Retriever):
    """BM25 that records every query and k it is asked."""

    def search(self, queries, k):
        self.asked = [*getattr(self, "asked", []), *((q, k) for q in queries)]
        return super().search(queries, k)


def retriever() -> CountingRetriever:
    return CountingRetriever(Corpus(DOCS))


def reasoner(*needs: bool):
    """A Reasoner that asks for retrieval as ``needs`` says, call by call (then concludes)."""
    replies = iter(needs)

    def reply(prompt):
        need = next(replies, False)
        return {"thought": "I need more." if need else "Fernando Fernán Gómez was born later.",
                "need_retrieval": str(need).lower()}

    return reply


def script(program, **replies) -> StageScript:
    defaults = {"reason": reasoner(True), "identify": {"entities": listed(TABLE_9_ENTITIES)},
                "summarize": lambda p: {"knowledge": json.loads(field(p, "documents"))[0]},
                "answer": {"answer": "El extraño viaje"}}
    return StageScript({**defaults, **replies}, program)


def run(program, stages: StageScript, question=QUESTION):
    with dspy.context(lm=stages.lm):
        return program(question=question)


def test_the_loop_stops_when_the_reasoner_says_so_and_answers_from_the_outline():
    program = DualRAG(retriever=retriever(), rerank=None, k=2)
    stages = script(program, reason=reasoner(True, True))
    prediction = run(program, stages)
    assert stages.seen == ["reason", "identify", "summarize", "summarize", "reason", "identify", "reason", "answer"]
    assert prediction.answer == "El extraño viaje"
    assert prediction.retrieval_iterations == prediction.counts["retrieval_iterations"] == 2
    assert [t["need_retrieval"] for t in prediction.thoughts] == [True, True, False]
    assert list(prediction.outline) == ["El Extraño Viaje", "Love In Pawn"]
    assert prediction.outline["Love In Pawn"][0].startswith("Love in Pawn: Love in Pawn is a 1953")
    answer_prompt = stages.engine.requests[-1]
    assert "El Extraño Viaje:\n- El extraño viaje: El extraño viaje is a 1964" in answer_prompt
    assert prediction.counts["completion_tokens.reason"] > 0 and prediction.counts["completion_tokens.summarize"] > 0


def test_the_loop_never_exceeds_max_iterations_and_the_last_requested_round_still_retrieves():
    program = DualRAG(retriever=retriever(), rerank=None, k=2, max_iterations=3)
    rounds = iter(["El extraño viaje", "Love in Pawn", "Charles Saunders"])
    stages = script(program, reason=reasoner(*[True] * 10),
                    identify=lambda p: {"entities": listed({next(rounds): ["director born"]})})
    prediction = run(program, stages)
    assert stages.seen.count("reason") == 3 and stages.seen[-1] == "answer"
    assert stages.seen.count("identify") == 3 and prediction.retrieval_iterations == 3
    last = stages.seen[len(stages.seen) - 1 - stages.seen[::-1].index("identify"):]
    assert last == ["identify", "summarize", "answer"]  # the third round retrieved and summarized before answering
    assert prediction.counts["retrieval_calls"] == 3 and "Charles Saunders" in prediction.outline


def test_max_iterations_zero_answers_from_an_empty_outline_with_no_other_stage():
    program = DualRAG(retriever=retriever(), max_iterations=0)
    assert program.stage_names() == ["answer"]
    stages = script(program)
    prediction = run(program, stages)
    assert stages.seen == ["answer"] and prediction.outline == {} and prediction.counts["retrieval_calls"] == 0
    assert "[[ ## knowledge_outline ## ]]\n\n" in stages.engine.requests[0]


@pytest.fixture
def by_length(monkeypatch) -> list:
    """A reranker registered as "by-length" (any reranker behind the protocol: the shortest candidates first); the
    list of its calls, (query, candidate ids)."""
    calls = []

    class ByLength:
        def rerank(self, query, candidates, k):
            calls.append((query, list(candidates.ids)))
            order = sorted(range(len(candidates.ids)), key=lambda i: len(candidates.passages[i]))[:k]
            return Hits(passages=[candidates.passages[i] for i in order], ids=[candidates.ids[i] for i in order],
                        scores=[1.0] * len(order))

        def config(self):
            return {"reranker": "by-length"}

    monkeypatch.setitem(RERANKERS, "by-length", ByLength)
    return calls


def test_every_query_is_retrieved_then_merged_deduplicated_and_reranked_against_the_entity_to_k(by_length):
    calls = by_length
    bm25 = retriever()
    program = DualRAG(retriever=bm25, rerank="by-length", n=4, k=2)
    entities = {"Love In Pawn": ["Love in Pawn director", "Love in Pawn film", "Love in Pawn director"]}
    prediction = run(program, script(program, identify={"entities": listed(entities)}))
    assert bm25.asked == [("Love in Pawn director", 4), ("Love in Pawn film", 4)]  # the repeat is searched once
    (query, candidates), = calls
    assert query == "Love In Pawn" and len(candidates) == len(set(candidates)) > 4  # merged without repeats
    record, = prediction.entities
    shortest = sorted(candidates, key=lambda pid: len(bm25.corpus[pid].render()))[:2]
    assert record["passage_ids"] == shortest and record["queries"] == ["Love in Pawn director", "Love in Pawn film"]


def test_a_summarizer_sees_only_the_documents_new_to_its_entity():
    program = DualRAG(retriever=retriever(), rerank=None, k=2)
    shown = []

    def summarize(prompt):
        shown.append((field(prompt, "entity"), json.loads(field(prompt, "documents"))))
        return {"knowledge": f"fact {len(shown)}"}

    queries = iter([["Love in Pawn director"], ["Love in Pawn Charles Saunders director"]])
    stages = script(program, reason=reasoner(True, True), summarize=summarize,
                    identify=lambda p: {"entities": listed({"Love In Pawn": next(queries)})})
    prediction = run(program, stages)
    first, second = prediction.entities
    assert set(first["new_ids"]) == set(first["passage_ids"]) and len(first["new_ids"]) == 2
    assert second["new_ids"] == [pid for pid in second["passage_ids"] if pid not in first["passage_ids"]]
    assert len(shown) == 2 and len(shown[1][1]) == len(second["new_ids"]) == 1
    assert prediction.outline == {"Love In Pawn": ["fact 1", "fact 2"]}


def test_empty_summaries_never_reach_the_outline_and_an_entity_with_nothing_is_left_out():
    program = DualRAG(retriever=retriever(), rerank=None, k=2)
    stages = script(program, summarize=lambda p: {"knowledge": "None." if "El Extra" in field(p, "entity")
                                                  else "Love in Pawn was directed by Charles Saunders."})
    prediction = run(program, stages)
    assert prediction.outline == {"Love In Pawn": ["Love in Pawn was directed by Charles Saunders."]}
    assert prediction.counts["empty_fragments"] == 1
    love = next(e for e in prediction.entities if e["entity"] == "Love In Pawn")
    assert prediction.passage_ids == love["new_ids"]  # only documents behind a fragment count for recall


def test_a_summary_that_states_a_fact_and_what_is_missing_is_kept():
    outline = Outline()
    assert outline.add("A", "Gómez was born in 1921; there is no information about his death.")
    assert not outline.add("A", "No information about the director.") and not outline.add("A", "N/A")


def test_two_questions_in_a_row_share_no_outline_seen_documents_or_counts():
    program = DualRAG(retriever=retriever(), rerank=None, k=2)
    stages = script(program, reason=lambda p: {"thought": "t", "need_retrieval": str(
        not field(p, "knowledge_outline")).lower()})  # retrieval once, while the outline is empty
    first, second = run(program, stages), run(program, stages, question="Who directed Love in Pawn?")
    assert first.outline == second.outline and first.entities == second.entities  # the same retrieval, nothing seen
    assert stages.seen.count("summarize") == 4 and second.counts["retrieval_calls"] == 2
    assert second.counts["queries"] == 2 and second.counts["entities"] == 2


def test_entity_linking_reuses_an_earlier_name_and_merges_names_of_one_entity():
    written = [{"entity": "the love in pawn", "queries": ["q1"]}, {"entity": "Love In Pawn!", "queries": ["q2", "q1"]},
               {"entity": "X", "queries": []}]
    linked, relinked, cut = link_entities(written, ["Love in Pawn"], max_entities=4, max_queries=3)
    assert linked == {"Love in Pawn": ["q1", "q2"], "X": ["X"]} and relinked == 2 and not cut
    program = DualRAG(retriever=retriever(), rerank=None, k=2)
    names = iter([TABLE_9_ENTITIES, {"love in pawn": ["Love in Pawn cast"]}])
    known = []

    def identify(prompt):
        known.append(json.loads(field(prompt, "known_entities")))
        return {"entities": listed(next(names))}

    prediction = run(program, script(program, reason=reasoner(True, True), identify=identify))
    assert known == [[], ["El Extraño Viaje", "Love In Pawn"]]
    assert [e["entity"] for e in prediction.entities][-1] == "Love In Pawn"
    assert prediction.counts["entities_linked"] == 1 and prediction.counts["entities"] == 2


def test_without_the_reasoner_retrieval_follows_every_sentence_until_so_the_answer_is():
    program = DualRAG(retriever=retriever(), rerank=None, k=2, reasoner=False)
    sentences = iter(["The directors are needed.", "Their birth years are needed.",
                      "Gómez was born in 1921, later. So the answer is El extraño viaje."])
    stages = script(program, reason=lambda p: {"thought": next(sentences)})
    prediction = run(program, stages)
    assert "need_retrieval" not in program.reason.signature.output_fields
    assert stages.seen.count("reason") == 3 and stages.seen.count("identify") == 2
    assert prediction.retrieval_iterations == 2


def test_without_the_entity_identifier_the_thought_is_the_query_and_documents_group_by_title():
    bm25 = retriever()
    program = DualRAG(retriever=bm25, rerank=None, k=3, entity_identifier=False)
    assert "identify" not in program.stage_names()
    stages = script(program, reason=lambda p: {"thought": "I need the director of Love in Pawn.",
                                               "need_retrieval": str("Love in Pawn:" not in p).lower()})
    prediction = run(program, stages)
    assert bm25.asked == [("I need the director of Love in Pawn.", 3)]
    assert prediction.counts["queries"] == 1  # one search, however many titles it gives
    titles = [e["entity"] for e in prediction.entities]
    assert len(titles) == 3 and titles[0] == "Love in Pawn" and stages.seen.count("summarize") == 3
    assert all(e["queries"] == ["I need the director of Love in Pawn."] for e in prediction.entities)


def test_without_the_knowledge_outline_raw_documents_join_it_flat_and_nothing_summarizes():
    program = DualRAG(retriever=retriever(), rerank=None, k=2, knowledge_outline=False)
    assert "summarize" not in program.stage_names()
    stages = script(program)
    prediction = run(program, stages)
    assert "summarize" not in stages.seen
    assert prediction.outline["Love In Pawn"][0] == DOCS[1].render()
    answer_prompt = stages.engine.requests[-1]
    assert f"- {DOCS[1].render()}" in answer_prompt and "Love In Pawn:\n" not in answer_prompt


def test_a_flat_outline_keeps_the_summaries_without_their_entities():
    outline = Outline()
    outline.add("A", "fact a")
    outline.add("B", "fact a")
    outline.add("B", "fact b")
    assert not outline.add("B", "  ") and not outline.add("B", "no relevant information")
    assert outline.render() == "A:\n- fact a\n\nB:\n- fact a\n- fact b"
    assert outline.render(structured=False) == "- fact a\n- fact b"
    program = DualRAG(retriever=retriever(), rerank=None, k=2, outline_structure=False)
    stages = script(program)
    run(program, stages)
    assert stages.seen.count("summarize") == 2 and "El Extraño Viaje:\n-" not in stages.engine.requests[-1]


def test_without_reranking_each_query_takes_k_from_the_first_stage_merged_by_score():
    merged = merge_by_score([Hits(ids=["a", "b"], passages=["A", "B"], scores=[0.5, 0.9], titles=["a", "b"]),
                             Hits(ids=["b", "c"], passages=["B", "C"], scores=[0.2, 0.7], titles=["b", "c"])])
    assert (merged.ids, merged.passages, merged.scores) == (["b", "c", "a"], ["B", "C", "A"], [0.9, 0.7, 0.5])
    assert merged.titles == ["b", "c", "a"] and "texts" not in merged  # a field every hit carries is kept
    bm25 = retriever()
    program = DualRAG(retriever=bm25, rerank=None, n=50, k=2)
    run(program, script(program))
    assert {k for _, k in bm25.asked} == {2}


def test_malformed_outputs_take_their_documented_fallbacks_and_are_counted():
    program = DualRAG(retriever=retriever(), rerank=None, k=2)
    thought = "Who directed Love in Pawn?"
    stages = script(program, reason=lambda p: {"thought": thought, "need_retrieval": str("[[ ## reasoning_history "
                                                                                         "## ]]\n[]" in p).lower()},
                    identify={"entities": "not a mapping"}, answer={"answer": ""},
                    summarize=lambda p: {"knowledge": "Summary."} if "Love in Pawn" == field(p, "entity") else {})
    prediction = run(program, stages)
    counts = prediction.counts
    assert counts["entity_fallback"] == 1  # the thought became the query, documents grouped by title
    assert [e["entity"] for e in prediction.entities] == ["Love in Pawn", "A Lover in Pawn"]
    assert all(e["queries"] == [thought] for e in prediction.entities)
    assert counts["summarize.fallback"] == 1  # a summary with no field keeps the entity's best new document
    assert prediction.outline == {"Love in Pawn": ["Summary."], "A Lover in Pawn": [DOCS[4].render()]}
    assert counts["answer.fallback"] == 0 and prediction.answer == ""  # an empty answer stays empty
    assert counts["identify.fallback"] == 1
    broken = DualRAG(retriever=retriever(), rerank=None, k=2)
    stages = script(broken, reason={"thought": "x", "need_retrieval": "perhaps"}, answer={"answer": ["not", "text"]})
    stages.replies["answer"] = lambda p: {}  # no answer field at all
    prediction = run(broken, stages)
    assert prediction.counts["reason.fallback"] == 1 and stages.seen[-1] == "answer"
    assert "identify" not in stages.seen and prediction.retrieval_iterations == 0
    assert prediction.counts["answer.fallback"] == 1 and prediction.answer == ""
    ircot = DualRAG(retriever=retriever(), rerank=None, k=2, reasoner=False)
    prediction = run(ircot, script(ircot, reason=lambda p: {}))
    assert prediction.counts["reason.fallback"] == 1 and prediction.retrieval_iterations == 0


def test_switches_are_checked():
    with pytest.raises(ValueError, match="unknown rerank"):
        DualRAG(rerank="bge")
    with pytest.raises(ValueError, match="max_iterations"):
        DualRAG(max_iterations=-1)
    assert DualRAG(rerank=False).rerank is None and DualRAG().config()["n"] == 50


def test_native_rag_reranks_the_first_stages_top_n_to_k_only_when_given_a_reranker(by_length):
    bm25 = retriever()
    plain = SingleStepRAG(retriever=bm25, k=2)
    assert plain.config() == {"k": 2, "n": 50, "rerank": None}  # the default reads the retriever as it is
    prediction = run(plain, StageScript({"answer": {"answer": "x"}}, plain), question="Love in Pawn director")
    assert bm25.asked == [("Love in Pawn director", 2)] and not by_length
    first_two = prediction.passage_ids

    bm25 = retriever()
    reranked = SingleStepRAG(retriever=bm25, k=2, n=4, rerank="by-length")  # App. H.4: top n → reranker → top k
    stages = StageScript({"answer": {"answer": "x"}}, reranked)
    prediction = run(reranked, stages, question="Love in Pawn director")
    assert bm25.asked == [("Love in Pawn director", 4)]  # one search, of the question, for n
    (query, candidates), = by_length
    assert query == "Love in Pawn director" and len(candidates) == 4 and candidates[:2] == first_two
    shortest = sorted(candidates, key=lambda pid: len(bm25.corpus[pid].render()))[:2]
    assert prediction.passage_ids == shortest and prediction.counts["llm_calls"] == 1
    assert all(bm25.corpus[pid].render() in stages.engine.requests[0] for pid in shortest)  # what the answer reads
    assert prediction.counts["retrieval_calls"] == 1
    with pytest.raises(ValueError, match="n=1 < k=2"):
        SingleStepRAG(k=2, n=1, rerank="by-length")
    with pytest.raises(ValueError, match="unknown rerank"):
        SingleStepRAG(rerank="bge")

    by_length.clear()
    own = RerankedRetriever(retriever(), make_reranker("by-length"), n=3, k=2)  # a retriever that reranks on its own
    run(SingleStepRAG(retriever=own, k=2), StageScript({"answer": {"answer": "x"}}, plain))
    assert len(by_length) == 1 and len(by_length[0][1]) == 3  # kept as it is without a reranker of the program's


def test_save_and_load_keep_the_switches_and_the_demos(tmp_path):
    program = DualRAG(retriever=retriever(), rerank=None, k=2, outline_structure=False)
    program.reason.demos = [dspy.Example(question="q", knowledge_outline="", reasoning_history=[], thought="t",
                                         need_retrieval=True)]
    save(program, tmp_path / "saved")
    loaded = load(tmp_path / "saved", retriever=retriever())
    assert loaded.config() == program.config() and len(loaded.reason.demos) == 1


def test_compile_with_bootstrap_few_shot_reaches_every_stage():
    program = DualRAG(retriever=retriever(), rerank=None, k=2)
    stages = script(program, reason=lambda p: {"thought": "t", "need_retrieval": str("Love in Pawn:" not in p)
                                               .lower()})
    trainset = [dspy.Example(question=QUESTION, answer="El extraño viaje").with_inputs("question")]
    with dspy.context(lm=stages.lm):
        compiled = dspy.BootstrapFewShot(metric=lambda e, p, trace=None: e.answer == p.answer,
                                         max_bootstrapped_demos=1, max_labeled_demos=0).compile(program,
                                                                                               trainset=trainset)
    assert {name: len(p.demos) for name, p in compiled.named_predictors()} == {
        "reason": 1, "identify": 1, "summarize": 1, "answer": 1}


MUSIQUE = dspy.Example(
    id="2hop__1", question="Who directed the film in which Anna played?", answer="Karl Berg", answers=["Karl Berg"],
    decomposition=["Anna >> cast member of", "#1 >> director"], decomposition_answers=["Frozen Lake", "Karl Berg"],
    decomposition_support=["p1", "p2"], paragraphs=[
        {"id": "p1", "title": "Anna", "text": "Anna is an actress. She played in Frozen Lake.", "is_supporting": True},
        {"id": "p2", "title": "Frozen Lake", "text": "Frozen Lake is a film. It was directed by Karl Berg.",
         "is_supporting": True},
        {"id": "p3", "title": "Other", "text": "Other is a town.", "is_supporting": False}]).with_inputs("question")
WIKI = dspy.Example(
    id="w1", question=QUESTION, answer="El extraño viaje", answers=["El extraño viaje"], decomposition=[],
    evidences=[["El extraño viaje", "director", "Fernando Fernán Gómez"], ["Love in Pawn", "director",
               "Charles Saunders"], ["Fernando Fernán Gómez", "date of birth", "28 August 1921"],
               ["Charles Saunders", "date of birth", "8 April 1904"]],
    supporting_sentences=[DOCS[0].text, DOCS[1].text], paragraphs=[
        {"id": p.id, "title": p.title, "text": p.text, "is_supporting": i < 4} for i, p in enumerate(DOCS)]
).with_inputs("question")


def test_gold_rounds_chain_musique_hops_and_search_a_comparisons_entities_together():
    rounds = gold_rounds(MUSIQUE)
    assert [[(h.entity, h.query, h.knowledge) for h in r] for r in rounds] == [
        [("Anna", "What is the cast member of Anna?", "She played in Frozen Lake.")],
        [("Frozen Lake", "What is the director of Frozen Lake?", "It was directed by Karl Berg.")]]
    independent = MUSIQUE.copy(decomposition=["Anna >> cast member of", "Who founded Frozen Lake?", "Did #1 meet #2?"],
                               decomposition_answers=["Frozen Lake", "Karl Berg", "yes"],
                               decomposition_support=["p1", "p2", "p2"])
    assert [len(r) for r in gold_rounds(independent)] == [2, 1]  # steps that read no earlier answer share a round
    wiki = gold_rounds(WIKI)
    assert [[h.entity for h in r] for r in wiki] == [["El extraño viaje", "Love in Pawn"],
                                                     ["Fernando Fernán Gómez", "Charles Saunders (director)"]]
    assert wiki[0][0].knowledge == DOCS[0].text


def test_gold_targets_ask_for_retrieval_once_per_round_and_conclude_with_the_answer():
    program = DualRAG()
    targets = list(gold_targets(program, [MUSIQUE]))
    by_stage = Counter(t.stage for t in targets)
    assert by_stage == {"reason": 3, "identify": 2, "summarize": 3, "answer": 1}
    reason = [t for t in targets if t.stage == "reason"]
    assert [t.outputs["need_retrieval"] for t in reason] == [True, True, False]
    assert reason[2].outputs["thought"].endswith("So the answer is Karl Berg.")
    assert reason[2].inputs["knowledge_outline"] == ("Anna:\n- She played in Frozen Lake.\n\nFrozen Lake:\n- It was "
                                                      "directed by Karl Berg.")
    identify = [t for t in targets if t.stage == "identify"]
    assert identify[1].outputs == {"entities": [{"entity": "Frozen Lake",
                                                  "queries": ["What is the director of Frozen Lake?"]}]}
    assert identify[1].inputs["known_entities"] == ["Anna"]
    summaries = [t for t in targets if t.stage == "summarize"]
    assert summaries[-1].outputs == {"knowledge": ""} and all("Anna" not in d for d in summaries[-1].inputs[
        "documents"])
    flat = list(gold_targets(DualRAG(reasoner=False, knowledge_outline=False), [MUSIQUE]))
    last = [t for t in flat if t.stage == "reason"][-1]
    assert "need_retrieval" not in last.outputs and "- Anna: Anna is an actress." in last.inputs["knowledge_outline"]


def teacher_row(stage, qid, inputs, outputs, score=1.0):
    return {"stage": stage, "question_id": qid, "call": 0, "messages": [], "completion": "teacher's",
            "adapter": "ChatAdapter", "inputs": inputs, "outputs": outputs, "teacher": "big", "score": score}


def similarity(names, titles):
    """Word overlap standing in for the encoder's cosine."""
    def words(text):
        return set(text.lower().replace("(", "").replace(")", "").split())
    return np.array([[len(words(n) & words(t)) / len(words(n) | words(t)) for t in titles] for n in names])


def test_the_sft_builder_keeps_right_questions_links_entities_to_gold_titles_and_repairs_empty_summaries():
    documents = [DOCS[4].render(), DOCS[1].render()]
    rows = {
        "identify": [teacher_row("identify", "w1", {"question": QUESTION}, {"entities": [
            {"entity": "Love In Pawn film", "queries": ["who directed Love In Pawn"]},
            {"entity": "love in pawn", "queries": ["Love In Pawn director"]},
            {"entity": "cinema history", "queries": ["old films"]}]})],
        "summarize": [teacher_row("summarize", "w1", {"entity": "love in pawn", "documents": documents, "queries": [],
                                                      "question": QUESTION, "reasoning_history": []},
                                  {"knowledge": "None"}),
                      teacher_row("summarize", "w1", {"entity": "Love In Pawn film", "documents": [DOCS[4].render()],
                                                      "queries": [], "question": QUESTION, "reasoning_history": []},
                                  {"knowledge": ""}),
                      teacher_row("summarize", "w1", {"entity": "love in pawn", "documents": documents, "queries": [],
                                                      "question": QUESTION, "reasoning_history": []},
                                  {"knowledge": "Directed by Charles Saunders."}),
                      teacher_row("summarize", "w1", {"entity": "cinema history", "documents": documents,
                                                      "queries": [], "question": QUESTION, "reasoning_history": []},
                                  {"knowledge": "Old films."})],
        "reason": [teacher_row("reason", "w1", {}, {"thought": "t"}),
                   teacher_row("reason", "w2", {}, {"thought": "wrong"}, score=0.0)],
    }
    predictors = dict(DualRAG().named_predictors())

    def render(row, inputs, outputs):
        return render_call(predictors[row["stage"]], inputs, outputs, dspy.ChatAdapter())

    built, stats = sft_rows(rows, {"w1": WIKI, "w2": WIKI}, similarity, render, threshold=0.3)
    identify, = built["identify"]
    assert identify["outputs"]["entities"] == [{"entity": "Love in Pawn",
                                                "queries": ["who directed Love In Pawn", "Love In Pawn director"]}]
    assert "Love in Pawn" in identify["completion"] and stats["entities_dropped"] == 1
    assert stats["entities_merged"] == 1
    repaired, unrepaired, untouched = built["summarize"]  # the dropped entity's row is gone
    assert repaired["outputs"]["knowledge"] == DOCS[1].text and repaired["inputs"]["entity"] == "Love in Pawn"
    assert DOCS[1].text in repaired["completion"] and stats["summaries_repaired"] == 1
    assert unrepaired["outputs"]["knowledge"] == ""  # no gold document was read: nothing to repair from
    assert untouched["outputs"]["knowledge"] == "Directed by Charles Saunders."  # a written summary is kept
    assert stats["summarize_rows_dropped"] == 1
    assert all(row["completion"] != "teacher's" for rows in built.values() for row in rows)  # every row re-rendered
    assert [r["question_id"] for r in built["reason"]] == ["w1"]  # the wrong question's rows are dropped
    assert gold_knowledge(MUSIQUE, ["Frozen Lake: " + MUSIQUE.paragraphs[1]["text"]]) == "It was directed by Karl Berg."
    both = [DOCS[0].render(), DOCS[1].render()]
    assert gold_knowledge(WIKI, both, "Love in Pawn") == DOCS[1].text  # the entity's own gold document first
    assert gold_knowledge(MUSIQUE, ["Other: Other is a town."]) == ""
    assert link_to_titles({"x": []}, ["Love in Pawn"], similarity, 0.3) == ({}, {}, 1)


@pytest.mark.slow
def test_smollm2_runs_the_loop_on_a_real_question_with_maxsim_reranking(musique_dev, cached_retriever):
    from multihop.lm.backends import configure_lm

    configure_lm("local:smollm2", max_tokens=64)  # the 135M model rambles: a short cap keeps this test near a minute
    program = DualRAG(retriever=cached_retriever, n=20, k=3, max_iterations=2)
    prediction = program(question=musique_dev[0].question)
    lm_stages = [r["stage"] for r in prediction.stage_trace if r["kind"] == "lm"]
    assert lm_stages[0] == "reason" and lm_stages[-1] == "answer" and lm_stages.count("answer") == 1
    assert prediction.counts["llm_calls"] == len(lm_stages) and prediction.counts["stage_errors"] == 0
    assert lm_stages.count("reason") <= 2 and prediction.retrieval_iterations == lm_stages.count("identify") <= 2
    assert prediction.retrieval_iterations == sum(t["need_retrieval"] for t in prediction.thoughts)
    corpus = {p.id for p in cached_retriever.corpus}
    for record in prediction.entities:  # per entity: at most k reranked documents, the new ones among them
        assert len(record["passage_ids"]) <= 3 and set(record["new_ids"]) <= set(record["passage_ids"]) <= corpus
    assert set(prediction.outline) <= {record["entity"] for record in prediction.entities}
    assert all(fragment.strip() for fragments in prediction.outline.values() for fragment in fragments)
    assert set(prediction.passage_ids) <= set(prediction.retrieved_ids)
    assert sum(v for k, v in prediction.counts.items() if k.startswith("completion_tokens.")) == \
        prediction.counts["completion_tokens"]


def test_dualrag_sft_builds_gold_rows_for_the_students_adapter_and_post_processes_teacher_rows(tmp_path):
    from typer.testing import CliRunner

    from multihop.cli import app
    from multihop.data.loaders import load_dataset
    from multihop.optimize.trajectories import write_trajectories

    runner = CliRunner()
    root = data_root()
    gold = runner.invoke(app, ["dualrag", "sft", "--gold", "--data", "musique", "--limit", "2", "--k", "3", "--out",
                               str(tmp_path / "gold")])
    assert gold.exit_code == 0, gold.output
    rows = [json.loads(line) for line in (tmp_path / "gold" / "identify.jsonl").read_text().splitlines()]
    assert rows and all(row["adapter"] == "JSONAdapter" and row["completion"].startswith("{") for row in rows)
    assert json.loads((tmp_path / "gold" / "manifest.json").read_text())["program"] == "DualRAG"

    example = load_dataset(root / "musique/train/musique_ans_v1.0_train-200.jsonl", limit=1)[0]
    title = next(p["title"] for p in example.paragraphs if p["is_supporting"])
    entities = [{"entity": title, "queries": [f"What is {title}?"]}, {"entity": "qqqq zzzz", "queries": ["x"]}]
    teacher = {"identify": [teacher_row("identify", example.id, {"question": example.question, "knowledge_outline": "",
                                                                 "reasoning_history": ["t"], "known_entities": []},
                                        {"entities": entities})]}
    write_trajectories(tmp_path / "teacher", teacher, {"program": "DualRAG", "teacher": "big"})
    train = str(root / "musique/train/musique_ans_v1.0_train-200.jsonl")
    built = runner.invoke(app, ["dualrag", "sft", str(tmp_path / "teacher"), "--data", train, "--limit", "1",
                                "--encoder", "minilm", "--out", str(tmp_path / "ft")])
    assert built.exit_code == 0, built.output
    row, = [json.loads(line) for line in (tmp_path / "ft" / "identify.jsonl").read_text().splitlines()]
    assert row["outputs"]["entities"] == [entities[0]] and row["adapter"] == "JSONAdapter"
    assert json.loads((tmp_path / "ft" / "manifest.json").read_text())["processing"]["entities_dropped"] == 1

    write_trajectories(tmp_path / "other", teacher, {"program": "CoopRAG", "teacher": "big"})
    wrong = runner.invoke(app, ["dualrag", "sft", str(tmp_path / "other"), "--data", "musique", "--out",
                                str(tmp_path / "x")])
    assert wrong.exit_code != 0 and "not DualRAG's" in wrong.output
    both = runner.invoke(app, ["dualrag", "sft", str(tmp_path / "teacher"), "--gold", "--data", "musique", "--out",
                               str(tmp_path / "y")])
    assert both.exit_code != 0 and "--gold and none" in both.output
    dev = runner.invoke(app, ["dualrag", "sft", "--gold", "--data", str(root / "musique/dev/musique_qa_100.json"),
                              "--out", str(tmp_path / "z")])
    assert "held apart" in str(dev.exception) and not (tmp_path / "z").exists()  # `multihop` prints it as one line
