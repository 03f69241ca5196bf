"""CIRAG (issue 21): construction with provenance, the distiller's loop, ACMG's cascade, the switches and the offline
triple cache, on scripted LMs, a real BM25 index and the MiniLM encoder."""

import json

import dspy
import pytest

from multihop.corpus import Corpus, Passage
from multihop.programs import CIRAG, load, save
from multihop.programs.cirag.cache import CacheMismatchError, TripleCache, build_cache, read_all
from multihop.retrievers import BM25Retriever

from helpers import StageScript, field

QUESTION = "What county is Erik Hort's birthplace a part of?"
DOCS = [
    Passage.make("Erik Hort", "Erik Hort is an American soccer player. Erik Hort was born in Montebello."),
    Passage.make("Montebello, New York", "Montebello is a village. Montebello is located in Rockland County."),
    Passage.make("Rockland County", "Rockland County is a county of New York."),
]
TRIPLES = {"Erik Hort": [["Erik Hort", "born in", "Montebello"], ["Erik Hort", "is", "American"]],
           "Montebello, New York": [["Montebello", "is located in", "Rockland County"]],
           "Rockland County": [["Rockland County", "county of", "New York"]]}


def extract_triples(prompt):
    return {"triples": json.dumps(TRIPLES[field(prompt, "title")])}


def distiller(*rounds):
    """The distiller's replies round by round: (core triples, next question)."""
    replies = iter(rounds)

    def reply(prompt):
        core, question = next(replies)
        return {"thought": "t", "fact_after_filter": json.dumps(core), "question": question}

    return reply


def script(program, **replies) -> StageScript:
    defaults = {"extract_entities": {"named_entities": '["Erik Hort"]'}, "extract_triples": extract_triples,
                "integrate": distiller(([["erik hort", "born in", "montebello"]], "Where is Montebello?"),
                                       ([["Montebello", "is located in", "Rockland County"]], "<no question>")),
                "answer_triple": {"thought": "t", "answer": "Rockland County."},
                "answer_sentence": {"thought": "t", "answer": "Rockland County"},
                "answer_passage": {"thought": "t", "answer": "Rockland County"}}
    return StageScript({**defaults, **replies}, program)


def program(**switches) -> CIRAG:
    return CIRAG(retriever=BM25Retriever(Corpus(DOCS)), k=2, encoder="minilm", **switches)


def run(prog, stages):
    with dspy.context(lm=stages.lm):
        return prog(question=QUESTION)


def test_the_loop_stops_on_no_question_and_provenance_reaches_sentences_and_documents():
    prog = program()
    stages = script(prog)
    prediction = run(prog, stages)
    assert [r["query"] for r in prediction.rounds] == [QUESTION, "Where is Montebello?"]
    assert prediction.core_triples == ["('erik hort', 'born in', 'montebello')",
                                       "('montebello', 'is located in', 'rockland county')"]
    assert prediction.core_sentences == ["Erik Hort was born in Montebello.",
                                         "Montebello is located in Rockland County."]
    assert prediction.passage_ids == [DOCS[0].id, DOCS[1].id]
    assert prediction.answer == "Rockland County" and prediction.answered_level == "triple"
    assert prediction.counts["iterations"] == 2 and prediction.counts["answered.triple"] == 1
    assert prediction.counts["extraction_calls"] == 2 * stages.seen.count("extract_triples")
    second = stages.engine.requests[[i for i, s in enumerate(stages.seen) if s == "integrate"][1]]
    assert "born in" in field(second, "historical_context")  # the distiller sees the earlier round


def test_the_loop_never_passes_max_iterations_and_malformed_distiller_output_ends_it():
    prog = program(max_iterations=2)
    stages = script(prog, integrate=lambda p: {"thought": "t", "fact_after_filter": "[]", "question": "More?"})
    assert run(prog, stages).counts["iterations"] == 2 and stages.seen.count("integrate") == 2
    stages = script(prog, integrate={"thought": "t"})
    prediction = run(prog, stages)
    assert prediction.counts["iterations"] == 1 and prediction.counts["integrate_fallback"] == 1


def test_core_triples_that_match_no_candidate_are_dropped_and_counted():
    prog = program()
    stages = script(prog, integrate=distiller(([["Paris", "capital of", "France"], ["Erik Hort", "born in",
                                                                                    "Montebello"]], "<no question>")))
    prediction = run(prog, stages)
    assert prediction.core_triples == ["('erik hort', 'born in', 'montebello')"]
    assert prediction.counts["core_unmatched"] == 1


def test_the_cascade_falls_through_refusals_and_records_the_level():
    prog = program()
    stages = script(prog, answer_triple={"thought": "t", "answer": "Unanswerable"})
    prediction = run(prog, stages)
    assert prediction.answered_level == "sentence" and stages.seen[-2:] == ["answer_triple", "answer_sentence"]
    refuse = {"thought": "t", "answer": "Unanswerable"}
    stages = script(prog, answer_triple=refuse, answer_sentence=refuse, answer_passage=refuse)
    prediction = run(prog, stages)
    assert prediction.answer == "" and prediction.answered_level == "none"
    assert stages.seen[-3:] == ["answer_triple", "answer_sentence", "answer_passage"]
    nothing = script(prog, integrate=distiller(([], "<no question>")))
    prediction = run(prog, nothing)  # no core document and no fallback: the paper's default, nothing answered
    assert prediction.answered_level == "none" and "answer_passage" not in nothing.seen
    fallback = program(topk_fallback=True)
    nothing = script(fallback, integrate=distiller(([], "<no question>")))
    prediction = run(fallback, nothing)  # ours: the last round's top-K get a passage-level try
    assert prediction.answered_level == "top_k" and nothing.seen[-1] == "answer_passage"
    assert prediction.counts["topk_fallback"] == 1
    abstains = script(prog, answer_triple={"thought": "t", "answer": "I don't know."})
    assert run(prog, abstains).answered_level == "sentence"  # any abstention falls through


def test_granularity_subsets_change_the_calls():
    prog = program(granularities=("sentence", "passage"))
    assert "answer_triple" not in prog.stage_names()
    stages = script(prog, answer_sentence={"thought": "t", "answer": "Unanswerable"})
    prediction = run(prog, stages)
    assert prediction.answered_level == "passage" and "answer_triple" not in stages.seen
    with pytest.raises(ValueError, match="finest first"):
        program(granularities=("passage", "triple"))
    with pytest.raises(ValueError, match="distinct levels"):
        program(granularities=("words",))


def test_the_reranker_keeps_the_n_triples_most_similar_to_the_query():
    prog = program(n=1)
    stages = script(prog)
    prediction = run(prog, stages)
    first = stages.engine.requests[stages.seen.index("integrate")]
    assert json.loads(field(first, "fact_before_filter")) == ["('erik hort', 'born in', 'montebello')"]
    assert prediction.rounds[0]["candidates"] == 1
    everything = program(n=1, reranker=False)
    stages = script(everything)
    assert run(everything, stages).rounds[0]["candidates"] == 3  # both documents' triples


def test_the_cache_replaces_extraction_is_resumable_and_refuses_another_corpus(tmp_path):
    corpus = Corpus(DOCS)
    calls = []

    def extract(passage):
        calls.append(passage.id)
        if len(calls) == 2 and not (tmp_path / "died").exists():
            (tmp_path / "died").touch()
            raise KeyboardInterrupt  # the build dies on the second passage
        return ["e"], [tuple(t) for t in TRIPLES[passage.title]]

    with pytest.raises(KeyboardInterrupt):
        build_cache(corpus, tmp_path / "cache", extract, shard_size=2, progress=False)
    assert list(read_all(tmp_path / "cache")) == [DOCS[0].id]
    assert build_cache(corpus, tmp_path / "cache", extract, shard_size=2, progress=False) == 2  # only the rest
    assert len(TripleCache(tmp_path / "cache")) == 3 and sorted(p.name for p in (tmp_path / "cache").glob("*.jsonl")) \
        == ["triples-00000.jsonl", "triples-00001.jsonl"]
    with pytest.raises(CacheMismatchError):
        build_cache(Corpus(DOCS[:1]), tmp_path / "cache", extract, progress=False)
    prog = program(triple_cache=str(tmp_path / "cache"))
    stages = script(prog)
    prediction = run(prog, stages)
    assert "extract_triples" not in stages.seen and "extraction_calls" not in prediction.counts
    assert prediction.counts["cache_hits"] > 0 and prediction.answer == "Rockland County"


def test_save_and_load_keep_the_switches(tmp_path):
    prog = program(granularities=("triple", "passage"), max_iterations=2)
    save(prog, tmp_path / "p")
    loaded = load(tmp_path / "p", retriever=prog.retriever)
    assert loaded.config() == prog.config() and loaded.stage_names() == prog.stage_names()


@pytest.mark.slow
def test_smollm2_runs_cirag_online_on_a_real_question(musique_dev):
    from multihop.data import build_corpus
    from multihop.lms import configure_lm

    configure_lm("local:smollm2", max_tokens=96)
    prog = CIRAG(retriever=BM25Retriever(build_corpus(musique_dev[:3])), k=3, max_iterations=2, encoder="minilm")
    prediction = prog(question=musique_dev[0].question)
    lm_stages = [r["stage"] for r in prediction.stage_trace if r["kind"] == "lm"]
    assert lm_stages[:2] == ["extract_entities", "extract_triples"] and prediction.counts["llm_calls"] == len(lm_stages)
    assert 1 <= prediction.counts["iterations"] == lm_stages.count("integrate") <= 2
    assert prediction.counts["extraction_calls"] == lm_stages.count("extract_entities") * 2
    assert prediction.answered_level in ("triple", "sentence", "passage", "top_k", "none")
    assert set(prediction.passage_ids) <= set(prediction.retrieved_ids)


def test_gold_integration_rows_keep_each_rounds_triples_and_ask_the_next_hop():
    from multihop.optimize.gold import gold_targets

    wiki = dspy.Example(
        id="w1", question="What is the date of birth of the performer of Get Low?", answer="October 5, 1987",
        decomposition=["Who is the performer of Get Low?", "What is the date of birth of Dillon Francis?"],
        evidences=[["Get Low", "performer", "Dillon Francis"], ["Dillon Francis", "date of birth", "October 5, 1987"]],
        supporting_sentences=[], paragraphs=[
            {"id": "g1", "title": "Get Low", "text": "Get Low is a song by Dillon Francis.", "is_supporting": True},
            {"id": "g2", "title": "Dillon Francis", "text": "Dillon Francis was born on October 5, 1987.",
             "is_supporting": True}]).with_inputs("question")
    rows = [(t.inputs, t.outputs) for t in gold_targets(CIRAG(encoder="minilm"), [wiki])]
    assert [r[1]["question"] for r in rows] == ["What is the date of birth of Dillon Francis?", "<no question>"]
    assert rows[0][0]["fact_before_filter"] == ["('get low', 'performer', 'dillon francis')"]  # no later hop leaks
    assert sorted(rows[1][0]["fact_before_filter"]) == ["('dillon francis', 'date of birth', 'october 5 1987')",
                                                        "('get low', 'performer', 'dillon francis')"]
    assert rows[1][1]["fact_after_filter"] == [["dillon francis", "date of birth", "october 5 1987"]]
    assert rows[1][0]["historical_context"][0].startswith(f"Query: {wiki.question}\nThought: ")
