"""CIRAG: construction with provenance, the distiller's loop, ACMG's cascade, the switches and the offline
triple cache, on scripted LMs, a real BM25 index and the MiniLM encoder; and its pure triple helpers (normal form,
well-formed triples, provenance assignment, top-N, matching the distiller's core triples back to the candidates)
against hand-computed values."""

import hashlib
import json
import time

import dspy
import pytest
from typer.testing import CliRunner

from multihop.data.corpus import Corpus, Passage
from multihop.optimize.trajectories import EmptyTrajectoriesError
from multihop.programs import CIRAG, load, save
from multihop.programs.cirag.cache import CacheMismatchError, Extraction, TripleCache, build_cache, read_all
from multihop.programs.cirag.program import is_stop
from multihop.programs.cirag.triples import Triple, assign, match_core, normalize_phrase, top_n, well_formed
from multihop.programs.text import split_sentences
from multihop.retrievers import BM25Retriever
from multihop.signatures.cirag import CASCADE_LEVELS, UNANSWERABLE

from helpers import StageScript, TypedScript, field

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
    assert prediction.core_sentences == ["Erik Hort: Erik Hort was born in Montebello.",
                                         "Montebello, New York: Montebello is located in Rockland County."]
    assert prediction.passage_ids == [DOCS[0].id, DOCS[1].id]
    assert prediction.answer == "Rockland County" and prediction.answered_level == "triple"
    assert prediction.counts["iterations"] == 2 and prediction.counts["answered.triple"] == 1
    assert prediction.counts["extraction_calls"] == 2 * stages.seen.count("extract_triples")
    second = stages.engine.requests[[i for i, s in enumerate(stages.seen) if s == "integrate"][1]]
    history = json.loads(field(second, "historical_context"))
    assert len(history) == 1 and history[0].startswith("[[## fact_before_filter ##]]: ")  # Fig. 11's sections
    assert "[[## question ##]]: Where is Montebello?" in history[0]
    assert "('erik hort', 'is', 'american')" in history[0]  # Eq. 2: a candidate the round did not keep is history too


def test_the_stop_accepts_the_papers_marker_and_bare_refusals_only():
    assert all(is_stop(q) for q in ["<no question>", "No question.", "", "  ", "None", "n/a"])
    assert is_stop("<no question> The facts suffice.")
    assert not any(is_stop(q) for q in ["Where is Montebello?", "Is none of them older?", "No",
                                        "Is there no question about Bob's age?"])


def test_the_loop_never_passes_max_iterations_and_malformed_distiller_output_ends_it():
    prog = program(max_iterations=2)
    stages = script(prog, integrate=lambda p: {"thought": "t", "fact_after_filter": "[]", "question": "More?"})
    assert run(prog, stages).counts["iterations"] == 2 and stages.seen.count("integrate") == 2
    stages = script(prog, integrate={"thought": "t"})
    prediction = run(prog, stages)
    assert prediction.counts["iterations"] == 1 and prediction.counts["integrate.fallback"] == 1


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
    assert prediction.answer == "" and prediction.answered_level == "default"
    assert stages.seen[-3:] == ["answer_triple", "answer_sentence", "answer_passage"]
    nothing = script(prog, integrate=distiller(([], "<no question>")))
    prediction = run(prog, nothing)  # no core document and no fallback: the paper's default, nothing answered
    assert prediction.answered_level == "default" and "answer_passage" not in nothing.seen
    fallback = program(topk_fallback=True)
    nothing = script(fallback, integrate=distiller(([], "<no question>")))
    prediction = run(fallback, nothing)  # ours: the last round's top-K get a passage-level try
    assert prediction.answered_level == "top_k" and nothing.seen[-1] == "answer_passage"
    assert prediction.counts["topk_fallback"] == 1
    abstains = script(prog, answer_triple={"thought": "t", "answer": "I don't know."})
    assert run(prog, abstains).answered_level == "sentence"  # any abstention falls through
    yes_no = script(prog, answer_triple={"thought": "t", "answer": "No"})
    assert run(prog, yes_no).answered_level == "triple"  # "No" is an answer, not a refusal


def test_granularity_subsets_change_the_calls():
    prog = program(granularities=("sentence", "passage"))
    assert "answer_triple" not in prog.stage_names()
    stages = script(prog, answer_sentence={"thought": "t", "answer": "Unanswerable"})
    prediction = run(prog, stages)
    assert prediction.answered_level == "passage" and "answer_triple" not in stages.seen
    only = program(granularities=("triple",))
    assert only.stage_names()[-1] == "answer_triple" and "answer_passage" not in only.stage_names()
    nothing = script(only, integrate=distiller(([], "<no question>")))
    prediction = run(only, nothing)  # no core triple: the triple level has nothing to read and no other level runs
    assert prediction.answered_level == "default" and not any(s.startswith("answer_") for s in nothing.seen)
    with pytest.raises(ValueError, match="finest first"):
        program(granularities=("passage", "triple"))
    with pytest.raises(ValueError, match="distinct levels"):
        program(granularities=("words",))


def test_the_reranker_keeps_the_n_triples_most_similar_to_the_query():
    from multihop.retrievers import Encoder

    prog = program(n_triples=2)
    stages = script(prog)
    prediction = run(prog, stages)
    ranked = [record for record in prediction.stage_trace if record["kind"] == "rerank"]
    assert ranked and ranked[0]["stage"] == "rerank" and len(ranked[0]["outputs"]["ids"]) == 2  # a traced step
    read = prediction.rounds[0]["retrieved_ids"]
    triples = [t for doc in DOCS if doc.id in read for t in TRIPLES[doc.title]]
    encoder = Encoder("minilm")  # the expected order, from the encoder's cosines computed here
    scores = (encoder.encode([" ".join(t) for t in triples]) @ encoder.encode([QUESTION]).T)[:, 0]
    expected = [triples[i] for i in sorted(range(len(triples)), key=lambda i: -scores[i])[:2]]
    first = stages.engine.requests[stages.seen.index("integrate")]
    assert json.loads(field(first, "fact_before_filter")) == [Triple(*t).render() for t in expected]
    assert prediction.rounds[0]["candidates"] == 2
    everything = program(n_triples=1, reranker=False)
    stages = script(everything)
    prediction = run(everything, stages)
    assert prediction.rounds[0]["candidates"] == len(triples) == 3  # every triple of the documents read
    assert not hasattr(everything, "rank_triples") and not any(r["kind"] == "rerank" for r in prediction.stage_trace)


def test_the_cache_replaces_extraction_is_resumable_and_refuses_another_corpus(tmp_path):
    corpus = Corpus(DOCS)
    calls = []

    def extract(passage):
        calls.append(passage.id)
        if len(calls) == 2 and not (tmp_path / "died").exists():
            (tmp_path / "died").touch()
            raise KeyboardInterrupt  # the build dies on the second passage
        return Extraction(["e"], [tuple(t) for t in TRIPLES[passage.title]])

    cache = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        build_cache(corpus, cache, extract, shard_size=2, progress=False, extractor="lm-a")
    assert list(read_all(cache)) == [DOCS[0].id]
    assert build_cache(corpus, cache, extract, shard_size=2, progress=False, extractor="lm-a") == (2, 0)  # the rest
    assert len(TripleCache(cache)) == 3 and sorted(p.name for p in cache.glob("*.jsonl")) \
        == ["triples-00000.jsonl", "triples-00001.jsonl"]
    with pytest.raises(CacheMismatchError, match="another corpus"):
        build_cache(Corpus(DOCS[:1]), cache, extract, shard_size=2, progress=False, extractor="lm-a")
    with pytest.raises(CacheMismatchError, match="extractor"):  # one cache never mixes two LMs' triples
        build_cache(corpus, cache, extract, shard_size=2, progress=False, extractor="lm-b")
    prog = program(triple_cache=str(cache))
    stages = script(prog)
    prediction = run(prog, stages)
    assert "extract_triples" not in stages.seen and "extraction_calls" not in prediction.counts
    assert prediction.counts["cache_hits"] > 0 and prediction.answer == "Rockland County"
    online = script(program())
    run(program(), online)
    shown = [field(stages.engine.requests[i], "fact_before_filter") for i, s in enumerate(stages.seen)
             if s == "integrate"]
    assert shown == [field(online.engine.requests[i], "fact_before_filter") for i, s in enumerate(online.seen)
                     if s == "integrate"]  # cached and online runs give the distiller the same candidates


def test_failed_extractions_are_kept_marked_and_retried_by_a_rebuild(tmp_path):
    corpus, replies = Corpus(DOCS), {DOCS[1].id: [Extraction([], [], failed=True), Extraction(["M"], [
        ("Montebello", "is located in", "Rockland County")])]}

    def extract(passage):
        queue = replies.get(passage.id)
        return queue.pop(0) if queue else Extraction(["e"], [tuple(t) for t in TRIPLES[passage.title]])

    assert build_cache(corpus, tmp_path / "c", extract, progress=False) == (3, 1)
    assert TripleCache(tmp_path / "c").get(DOCS[1].id).failed
    with open(tmp_path / "c" / "triples-00000.jsonl", "a", encoding="utf-8") as sink:
        sink.write('{"id": "torn')  # a build died mid-line
    assert build_cache(corpus, tmp_path / "c", extract, progress=False) == (1, 0)  # only the failed passage
    row = TripleCache(tmp_path / "c").get(DOCS[1].id)
    assert not row.failed and row.triples == [("Montebello", "is located in", "Rockland County")]
    assert len(TripleCache(tmp_path / "c")) == 3


def passages(n):
    return Corpus([Passage.make(f"Place {i}", f"Place {i} lies near Paris. Nolan was born in Place {i}.")
                   for i in range(n)])


def shards(folder):
    return {path.name: path.read_text() for path in sorted(folder.glob("triples-*.jsonl"))}


class JitteredScript(TypedScript):
    """Replies drawn from the output types, each after a delay drawn from its prompt, so calls sent at once end out
    of order."""

    def respond(self, prompt: str) -> dict:
        time.sleep(int(hashlib.sha256(prompt.encode()).hexdigest()[:2], 16) / 255 * 0.02)
        return super().respond(prompt)


def test_extract_with_threads_writes_the_serial_shards_and_counts(tmp_path, monkeypatch):
    from multihop.cli import app
    from multihop.lm.options import LMOptions

    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({f"Place {i}": f"Place {i} lies near Paris." for i in range(12)}))
    lm = JitteredScript(CIRAG()).lm  # some replies garbled, so some rows fail
    monkeypatch.setattr(LMOptions, "configure", lambda *args, **kwargs: dspy.configure(lm=lm) or lm)
    printed = {}
    for threads in ("1", "4"):
        result = CliRunner().invoke(app, ["cirag", "extract", str(corpus), "--out", str(tmp_path / threads),
                                          "--shard-size", "5", "--threads", threads])
        assert result.exit_code == 0, result.output
        output = " ".join(result.output.split())
        printed[threads] = output[output.index("extracted 12 passages ("):].split(" → ")[0]  # after the progress bar
    assert shards(tmp_path / "4") == shards(tmp_path / "1") and len(shards(tmp_path / "1")) == 3
    assert printed["4"] == printed["1"]
    assert "(0 failed" not in printed["1"]  # the garbled replies made failed rows


def test_an_interrupted_threaded_build_keeps_its_finished_chunks_and_resumes_to_the_serial_shards(tmp_path):
    corpus, extractor = passages(20), CIRAG()

    def dies_on_the_18th(passage):
        if passage.id == corpus[17].id:
            raise KeyboardInterrupt  # in the second chunk (4 threads: chunks of 16)
        return extractor.extract(passage)

    with dspy.context(lm=JitteredScript(extractor, garbled=0).lm):
        build_cache(corpus, tmp_path / "serial", extractor.extract, shard_size=6, progress=False)
        with pytest.raises(KeyboardInterrupt):
            build_cache(corpus, tmp_path / "threaded", dies_on_the_18th, shard_size=6, progress=False, threads=4)
        assert list(read_all(tmp_path / "threaded")) == [p.id for p in corpus][:16]  # the first chunk, in order
        assert build_cache(corpus, tmp_path / "threaded", extractor.extract, shard_size=6, progress=False,
                           threads=4) == (4, 0)
    assert shards(tmp_path / "threaded") == shards(tmp_path / "serial")


def test_the_table_7_case_study_runs_as_the_paper_prints_it():
    docs = [Passage.make("God's Gift to Women", "God's Gift to Women is a 1931 romantic musical comedy film directed "
                         "by Michael Curtiz."),
            Passage.make("Aldri annet enn bråk", "Aldri annet enn bråk is a 1954 Norwegian comedy-drama film directed "
                         "by Edith Carlmar."),
            Passage.make("Edith Carlmar", "Edith Carlmar (15 November 1911 - 17 May 2003) was a Norwegian film "
                         "director. Edith Carlmar started Carlmar Film A/S."),
            Passage.make("Michael Curtiz", "Michael Curtiz (December 24, 1886 - April 10, 1962) was a film director "
                         "and his birth years were in Hungary.")]
    triples = {"God's Gift to Women": [["God's Gift to Women", "directed by", "Michael Curtiz"],
                                       ["God's Gift to Women", "is a", "romantic musical comedy film"]],
               "Aldri annet enn bråk": [["Aldri annet enn bråk", "directed by", "Edith Carlmar"]],
               "Edith Carlmar": [["Edith Carlmar", "started", "Carlmar Film A/S"],
                                 ["Edith Carlmar", "born on", "15 November 1911"]],
               "Michael Curtiz": [["Michael Curtiz", "born on", "December 24 1886"]]}
    question = "Which film has the director who is older, God's Gift To Women or Aldri Annet Enn Bråk?"
    prog = CIRAG(retriever=BM25Retriever(Corpus(docs)), k=2, encoder="minilm")
    stages = StageScript({
        "extract_entities": {"named_entities": "[]"},
        "extract_triples": lambda prompt: {"triples": json.dumps(triples[field(prompt, "title")])},
        "integrate": distiller(
            ([["god s gift to women", "directed by", "michael curtiz"],
              ["aldri annet enn br k", "directed by", "edith carlmar"]],
             "What are the birth years of Michael Curtiz and Edith Carlmar?"),
            ([["edith carlmar", "born on", "15 november 1911"], ["michael curtiz", "born on", "december 24 1886"]],
             "<no question>")),
        "answer_triple": {"thought": "Michael Curtiz is older.", "answer": "God's Gift To Women"}}, prog)
    with dspy.context(lm=stages.lm):
        prediction = prog(question=question)
    assert [r["query"] for r in prediction.rounds] == [
        question, "What are the birth years of Michael Curtiz and Edith Carlmar?"]
    assert prediction.core_triples == [  # Table 7's cumulative triple set, in its normal form
        "('god s gift to women', 'directed by', 'michael curtiz')",
        "('aldri annet enn br k', 'directed by', 'edith carlmar')",
        "('edith carlmar', 'born on', '15 november 1911')", "('michael curtiz', 'born on', 'december 24 1886')"]
    assert prediction.counts["core_unmatched"] == 0 and prediction.rounds[-1]["question"] == "<no question>"
    assert prediction.answer == "God's Gift To Women" and prediction.answered_level == "triple"
    assert stages.seen.count("integrate") == 2 and stages.seen[-1] == "answer_triple"


def test_save_and_load_keep_the_switches(tmp_path):
    prog = program(granularities=("triple", "passage"), max_iterations=2)
    save(prog, tmp_path / "p")
    loaded = load(tmp_path / "p", retriever=prog.retriever)
    assert loaded.config() == prog.config() and loaded.stage_names() == prog.stage_names()


@pytest.mark.slow
def test_smollm2_runs_cirag_online_on_a_real_question(musique_dev):
    from multihop.data.loaders import build_corpus
    from multihop.lm.backends import configure_lm

    configure_lm("local:smollm2", max_tokens=96)
    prog = CIRAG(retriever=BM25Retriever(build_corpus(musique_dev[:3])), k=3, max_iterations=2, encoder="minilm")
    prediction = prog(question=musique_dev[0].question)
    lm_stages = [r["stage"] for r in prediction.stage_trace if r["kind"] == "lm"]
    assert lm_stages[:2] == ["extract_entities", "extract_triples"] and prediction.counts["llm_calls"] == len(lm_stages)
    assert 1 <= prediction.counts["iterations"] == lm_stages.count("integrate") <= 2
    assert prediction.counts["extraction_calls"] == lm_stages.count("extract_entities") * 2
    assert prediction.answered_level in ("triple", "sentence", "passage", "top_k", "default")
    assert set(prediction.passage_ids) <= set(prediction.retrieved_ids)


def test_gold_integration_rows_keep_each_rounds_triples_and_ask_the_next_hop():
    from multihop.optimize.gold_targets import gold_targets

    wiki = dspy.Example(
        id="w1", question="What is the date of birth of the performer of Get Low?", answer="October 5, 1987",
        decomposition=["Who is the performer of Get Low?", "What is the date of birth of Dillon Francis?"],
        evidences=[["Get Low", "performer", "Dillon Francis"], ["Dillon Francis", "date of birth", "October 5, 1987"]],
        supporting_sentences=[], paragraphs=[
            {"id": "g1", "title": "Get Low", "text": "Get Low is a song by Dillon Francis.", "is_supporting": True},
            {"id": "g2", "title": "Dillon Francis", "text": "Dillon Francis was born on October 5, 1987.",
             "is_supporting": True}]).with_inputs("question")
    targets = list(gold_targets(CIRAG(encoder="minilm"), [wiki]))
    rows = [(t.inputs, t.outputs) for t in targets if t.stage == "integrate"]
    assert [r[1]["question"] for r in rows] == ["What is the date of birth of Dillon Francis?", "<no question>"]
    assert rows[0][0]["fact_before_filter"] == ["('get low', 'performer', 'dillon francis')"]  # no later hop leaks
    assert sorted(rows[1][0]["fact_before_filter"]) == ["('dillon francis', 'date of birth', 'october 5 1987')",
                                                        "('get low', 'performer', 'dillon francis')"]
    assert rows[1][1]["fact_after_filter"] == [["dillon francis", "date of birth", "october 5 1987"]]
    assert rows[1][0]["historical_context"][0].startswith("[[## fact_before_filter ##]]: ")
    extraction = {(t.stage, t.inputs.get("title")): t.outputs for t in targets if t.stage.startswith("extract")}
    assert extraction[("extract_triples", "Get Low")] == {"triples": [["Get Low", "performer", "Dillon Francis"]]}
    assert extraction[("extract_triples", "Dillon Francis")] == {
        "triples": [["Dillon Francis", "date of birth", "October 5, 1987"]]}
    entities = [t for t in targets if t.stage == "extract_entities"]
    assert [t.outputs["named_entities"] for t in entities] == [["Get Low", "Dillon Francis"],
                                                              ["Dillon Francis", "October 5, 1987"]]
    assert entities[0].inputs == {"passage": "Get Low: Get Low is a song by Dillon Francis."}


COMPARISON = dspy.Example(
    id="c1", question="Which film has the director who is older, Film A or Film B?", answer="Film A",
    decomposition=["Who directed Film A?", "Who directed Film B?", "When was Ann born?", "When was Bob born?"],
    evidences=[["Film A", "director", "Ann"], ["Film B", "director", "Bob"], ["Ann", "date of birth", "1900"],
               ["Bob", "date of birth", "1910"]],
    supporting_sentences=[], paragraphs=[
        {"id": "a", "title": "Film A", "text": "Film A is directed by Ann.", "is_supporting": True},
        {"id": "b", "title": "Film B", "text": "Film B is directed by Bob.", "is_supporting": True},
        {"id": "ann", "title": "Ann", "text": "Ann was born in 1900.", "is_supporting": True},
        {"id": "bob", "title": "Bob", "text": "Bob was born in 1910.", "is_supporting": True},
        {"id": "x", "title": "Film C", "text": "Film C is a comedy by Cid.", "is_supporting": False}]
).with_inputs("question")


def test_gold_rows_carry_cached_distractors_and_a_comparison_asks_about_both_entities(tmp_path):
    from multihop.data.loaders import build_corpus
    from multihop.optimize.gold_targets import gold_targets

    cached = {"a": [("Film A", "directed by", "Ann"), ("Film A", "genre", "drama")],
              "b": [("Film B", "director", "Bob")],
              "ann": [("Ann", "date of birth", "1900"), ("Ann", "nationality", "Norway")],
              "bob": [("Bob", "date of birth", "1910")], "x": [("Film C", "director", "Cid")]}
    build_cache(build_corpus([COMPARISON]), tmp_path / "cache", lambda p: Extraction([], cached[p.id]),
                progress=False)
    rows = [(t.inputs, t.outputs) for t in gold_targets(CIRAG(encoder="minilm", triple_cache=str(tmp_path / "cache"),
                                                              n_triples=3), [COMPARISON]) if t.stage == "integrate"]
    assert rows[0][1]["question"] == "When was Ann born? When was Bob born?"  # every hop of the next round
    first = rows[0][0]["fact_before_filter"]
    assert {"('film a', 'directed by', 'ann')", "('film b', 'director', 'bob')"} <= set(first) and len(first) == 3
    assert "('film a', 'director', 'ann')" not in first  # the gold fact in the extractor's wording, shown once
    assert set(first) & {"('film a', 'genre', 'drama')", "('film c', 'director', 'cid')"}  # a distractor to drop
    assert not any("1900" in t or "norway" in t for t in first)  # the later hops' paragraphs stay hidden
    assert rows[0][1]["fact_after_filter"] == [["film a", "directed by", "ann"], ["film b", "director", "bob"]]
    last = rows[1][0]["fact_before_filter"]
    assert len(last) == 4 and "('ann', 'nationality', 'norway')" not in last  # N=3: the four gold kept, no noise
    assert rows[1][1]["question"] == "<no question>" and len(rows[1][1]["fact_after_filter"]) == 2


def test_teacher_trajectories_keep_only_complete_distiller_runs_with_complete_only(tmp_path):
    from multihop.optimize.trajectories import collect

    prog = program(max_iterations=2)
    stops = {"thought": "t", "fact_after_filter": '[["erik hort", "born in", "montebello"]]',
             "question": "<no question>"}
    stages = script(prog, integrate=lambda p: stops if field(p, "query") == QUESTION else
                    {"thought": "t", "fact_after_filter": '[["Montebello", "is located in", "Rockland County"]]',
                     "question": "More?"})
    questions = [dspy.Example(id=qid, question=q, answers=["Rockland County"]).with_inputs("question")
                 for qid, q in [("stops", QUESTION), ("capped", "Which county is Montebello in?")]]
    manifest = collect(prog, questions, tmp_path / "all", teacher_lm=stages.lm, min_score=0.01)
    assert manifest["kept"] == 2
    manifest = collect(prog, questions, tmp_path / "complete", teacher_lm=stages.lm, min_score=0.01,
                       complete_only=True)
    assert manifest["kept"] == 1 and manifest["incomplete"] == 1  # the run L cut off is no trajectory to distil
    rows = [json.loads(line) for line in (tmp_path / "complete" / "integrate.jsonl").read_text().splitlines()]
    assert {row["question_id"] for row in rows} == {"stops"} and len(rows) == 1


def test_the_papers_trajectory_filter_keeps_a_complete_run_whatever_its_answer_and_ours_needs_f1_above_0(tmp_path):
    from multihop.optimize.trajectories import collect

    prog = program(max_iterations=2)
    stops = {"thought": "t", "fact_after_filter": '[["erik hort", "born in", "montebello"]]',
             "question": "<no question>"}
    stages = script(prog, integrate=stops, answer_triple={"thought": "t", "answer": "Montebello"})  # a wrong answer
    wrong = [dspy.Example(id="q", question=QUESTION, answers=["Rockland County"]).with_inputs("question")]
    paper = collect(prog, wrong, tmp_path / "paper", teacher_lm=stages.lm, min_score=0, complete_only=True)
    assert paper["kept"] == 1 and paper["incomplete"] == 0  # §4.3: complete trajectories, no answer test
    with pytest.raises(EmptyTrajectoriesError, match="f1 >= 0.01"):  # ours: a final F1 > 0 as well
        collect(prog, wrong, tmp_path / "ours", teacher_lm=stages.lm, min_score=0.01, complete_only=True)


def test_the_normal_form_is_the_case_studys():
    assert normalize_phrase("Aldri annet enn bråk") == "aldri annet enn br k"
    assert normalize_phrase("God's Gift to Women") == "god s gift to women"
    assert normalize_phrase("December 24, 1886") == "december 24 1886"


def test_well_formed_keeps_three_non_empty_strings_once():
    raw = [["Erik Hort", "born in", "Montebello"], ["erik hort", "Born in", "montebello!"], ["a", "b"],
           ["x", "", "y"], "text", ["Montebello", "is located in", "Rockland County"]]
    assert well_formed(raw) == [("Erik Hort", "born in", "Montebello"),
                                ("Montebello", "is located in", "Rockland County")]
    assert well_formed({"triples": []}) == []


def test_a_triple_renders_as_fig_12_prints_it_and_keeps_its_provenance():
    triple = Triple("Erik Hort", "born in", "Montebello", doc_id="d1", sentence="Erik Hort was born in Montebello.")
    assert triple.render() == "('erik hort', 'born in', 'montebello')"
    assert triple.words() == "Erik Hort born in Montebello" and triple.doc_id == "d1"


def test_assign_takes_each_triples_most_similar_sentence_and_top_n_the_highest_scores():
    assert assign([[0.1, 0.9, 0.3], [0.5, 0.5], []]) == [1, 0, -1]  # a tie: the first sentence
    assert top_n([0.2, 0.9, 0.5, 0.9], 3) == [1, 3, 2] and top_n([0.1], 5) == [0]


def test_core_triples_match_exactly_then_by_a_reworded_relation_and_the_rest_are_counted():
    born = Triple("Erik Hort", "born in", "Montebello", "d1")
    county = Triple("Montebello", "is located in", "Rockland County", "d2")
    other = Triple("Rockland County", "is in", "New York", "d2")
    core = [["erik hort", "born in", "montebello"],          # exact in normal form
            ["Montebello", "located in", "Rockland County"],  # reworded: its words are among "is located in"'s
            ["Erik Hort", "born in", "Montebello"],          # a repeat: kept once
            ["Paris", "capital of", "France"], ["bad"]]       # no candidate; malformed
    assert match_core(core, [born, county, other]) == ([born, county], 2, 1)
    performer = Triple("Get Low", "performer", "Dillon Francis")
    reworded = [["Get Low", "performers", "Dillon Francis"]]  # ratio 2·9/19 ≈ 0.95
    assert match_core(reworded, [performer]) == ([performer], 0, 1)
    different = [["Erik Hort", "died in", "Montebello"],      # another relation: ratio 2·3/14 ≈ 0.43
                 ["Get Low", "producer", "Dillon Francis"],   # ratio 2·3/17 ≈ 0.35
                 ["Erik Hort", "born in", "Montebelo"],       # another object
                 ["Erik Horst", "born in", "Montebello"]]     # another subject
    assert match_core(different, [born, performer]) == ([], 4, 0)


def test_sentences_split_at_ends_but_not_after_initials():
    assert split_sentences("G. Stanley Hall was born in 1844. He died in 1924.  ") == [
        "G. Stanley Hall was born in 1844.", "He died in 1924."]


def test_the_cascade_levels_share_figure_12s_prompt_over_their_own_evidence():
    assert list(CASCADE_LEVELS) == ["triple", "sentence", "passage"]
    assert "analyze triples" in CASCADE_LEVELS["triple"].instructions
    assert "analyze sentences" in CASCADE_LEVELS["sentence"].instructions
    assert "analyze passages" in CASCADE_LEVELS["passage"].instructions
    assert all(UNANSWERABLE in s.instructions for s in CASCADE_LEVELS.values())
