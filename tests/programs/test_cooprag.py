import hashlib
import json
import time

import dspy
import pytest
from typer.testing import CliRunner

from multihop.cli import app
from multihop.data.corpus import Corpus, Passage
from multihop.optimize.compile import compile_program
from multihop.programs import CoopRAG, load, save
from multihop.programs.cooprag.chain import normalize_chain, repair_fill, unrolled_query
from multihop.programs.cooprag.training import read_unrolled, unroll_questions
from multihop.retrievers import DenseRetriever, Encoder, Hits, MaxSim, RaLa, RerankedRetriever
from multihop.signatures.cooprag import SPECIAL_TOKENS

from helpers import StageScript, StaticRetriever, TypedScript, data_root, example, scripted_lm

QUESTION = "Who founded the company that makes the Xbox?"
SUBS = ["Which company makes the Xbox?", "Who founded Microsoft?"]
MASKED = [["Xbox", "made by", "<UNCERTAIN>"], ["<UNCERTAIN>", "founded by", "<FILL>"]]
COMPLETED = [["Xbox", "made by", "Microsoft"], ["Microsoft", "founded by", "Bill Gates"]]


def cooprag_script(unroll_chain=MASKED, unrolling_ok=True) -> StageScript:
    """Every CoopRAG stage answered as a capable LM would; attach the programs it serves."""
    unroll = {"hop_count": "2", "reasoning_structure": "company, then founder", "sub_questions": json.dumps(SUBS),
              "reasoning_chain": json.dumps(unroll_chain)}
    return StageScript({
        "unroll": unroll if unrolling_ok else {"nonsense": "I cannot do that"},
        "complete": {"completed_chain": json.dumps(COMPLETED)},
        "reason": {"answer": "Bill Gates"},
        "complete_and_reason": {"completed_chain": json.dumps(COMPLETED), "answer": "Bill Gates"},
    }, cache=True)


def scripted(program: CoopRAG, **script) -> tuple[CoopRAG, StageScript]:
    """``program`` with a :func:`cooprag_script` configured as the LM."""
    stages = cooprag_script(**script)
    stages.attach(program)
    dspy.configure(lm=stages.lm)
    return program, stages


def test_three_stages_run_in_order_with_the_right_inputs(static_retriever):
    program, script = scripted(CoopRAG(retriever=static_retriever, rerank=None, k=3))
    prediction = program(question=QUESTION)
    assert script.seen == ["unroll", "complete", "reason"]
    assert static_retriever.calls == [(unrolled_query(QUESTION, SUBS, MASKED), 3)]
    assert prediction.answer == "Bill Gates"
    assert prediction.sub_questions == SUBS and prediction.hop_count == 2
    assert prediction.masked_chain == MASKED and prediction.completed_chain == COMPLETED
    assert prediction.passage_ids == [p.id for p in static_retriever.passages[:3]]
    completion, reasoning = script.engine.requests[1], script.engine.requests[2]
    assert "<UNCERTAIN>" in completion.split("reasoning_chain ## ]]")[-1] and "T2: text 2" in completion
    assert "Bill Gates" in reasoning and "<FILL>" not in reasoning.split("reasoning_chain ## ]]")[-1]
    counts = prediction.counts
    assert counts["llm_calls"] == 3 and counts["retrieval_calls"] == 1
    assert counts["unrolling_fallback"] == counts["fill_repaired"] == counts["complete.fallback"] == 0
    assert [r["kind"] for r in prediction.stage_trace] == ["lm", "retriever", "lm", "lm"]


def test_unrolled_query_is_question_then_sub_questions_then_chain():
    query = unrolled_query(QUESTION, SUBS, MASKED)
    assert query == " ".join([QUESTION, *SUBS, json.dumps(MASKED)])
    assert query.index(SUBS[1]) < query.index("<FILL>")
    assert unrolled_query(QUESTION, [], []) == QUESTION
    # Table 16's rows keep only some parts of U
    assert unrolled_query(QUESTION, SUBS, MASKED, "MQ") == QUESTION
    assert unrolled_query(QUESTION, SUBS, MASKED, "MQ+SQ") == " ".join([QUESTION, *SUBS])
    assert unrolled_query(QUESTION, SUBS, MASKED, "MQ+RC") == " ".join([QUESTION, json.dumps(MASKED)])
    with pytest.raises(ValueError, match="query parts"):
        unrolled_query(QUESTION, SUBS, MASKED, "SQ")


def test_unified_variant_completes_and_answers_in_one_call(static_retriever):
    program, script = scripted(CoopRAG(retriever=static_retriever, rerank=None, unified=True))
    prediction = program(question=QUESTION)
    assert script.seen == ["unroll", "complete_and_reason"]
    assert prediction.counts["llm_calls"] == 2 and prediction.answer == "Bill Gates"
    assert prediction.completed_chain == COMPLETED
    assert program.stage_names() == ["unroll", "complete_and_reason"]


def test_without_uncertainty_mask_there_is_no_mask_instruction_no_completion_and_no_uncertain(static_retriever):
    program, script = scripted(CoopRAG(retriever=static_retriever, rerank=None, uncertainty_mask=False),
                               unroll_chain=[["<UNCERTAIN>", "made", "Xbox"], ["Xbox", "made by", "<UNCERTAIN>"],
                                             ["Microsoft", "founded by", "Bill Gates"]])
    prediction = program(question=QUESTION)
    assert script.seen == ["unroll", "reason"] and "complete" not in program.stage_names()
    assert "<UNCERTAIN>" not in script.engine.requests[0]
    query = static_retriever.calls[0][0]
    assert "<UNCERTAIN>" not in query and "Bill Gates" not in query  # masks the LM wrote anyway are dropped
    # Table 8: <FILL> stays the answer placeholder, so the guessed answer is replaced by it
    assert prediction.masked_chain == [["", "made", "Xbox"], ["Xbox", "made by", ""],
                                       ["Microsoft", "founded by", "<FILL>"]]
    assert prediction.counts["fill_repaired"] == 1
    assert prediction.counts["llm_calls"] == 2
    assert prediction.completed_chain == prediction.masked_chain


def test_without_unrolling_the_raw_question_is_the_query(static_retriever):
    program, script = scripted(CoopRAG(retriever=static_retriever, rerank=None, unrolling=False))
    prediction = program(question=QUESTION)
    assert script.seen == ["reason"] and static_retriever.calls[0][0] == QUESTION
    assert prediction.sub_questions == [] and prediction.counts["llm_calls"] == 1


def test_unparsable_unrolling_retries_once_then_falls_back_to_the_question(static_retriever):
    program, script = scripted(CoopRAG(retriever=static_retriever, rerank=None), unrolling_ok=False)
    prediction = program(question=QUESTION)
    assert static_retriever.calls[0][0] == QUESTION
    assert prediction.counts["unrolling_fallback"] == 1
    assert prediction.counts["stage_errors"] == 2  # the first try and the retry, both in the trace
    assert [r["stage"] for r in prediction.stage_trace if "error" in r] == ["unroll", "unroll"]
    assert "complete" not in script.seen and script.seen[-1] == "reason"  # nothing to complete: answer from documents
    assert prediction.answer == "Bill Gates"


def test_a_chain_that_lost_its_fill_is_repaired(static_retriever):
    program, _ = scripted(CoopRAG(retriever=static_retriever, rerank=None),
                          unroll_chain=[["Xbox", "made by", "Microsoft"], ["Microsoft", "founded by", "Paul"]])
    prediction = program(question=QUESTION)
    assert prediction.masked_chain[-1] == ["Microsoft", "founded by", "<FILL>"]
    assert "Paul" not in static_retriever.calls[0][0]  # the guessed answer never reaches the query
    assert prediction.counts["fill_repaired"] == 1


def test_empty_answer_stays_empty(static_retriever):
    program, _ = scripted(CoopRAG(retriever=static_retriever, rerank=None))
    program.set_stage_lm("reason", scripted_lm(lambda prompt: {"answer": "  "}, name="empty")[0])
    assert program(question=QUESTION).answer == ""


def test_normalize_chain_makes_every_row_a_triple():
    raw = [["a", "b", "c"], ["a", "born in", "year", "<FILL>"], ["x", "y"], [], ["only"], "loose"]
    assert normalize_chain(raw) == [["a", "b", "c"], ["a", "born in year", "<FILL>"], ["x", "y", "<UNCERTAIN>"]]
    assert repair_fill([]) == ([], False)
    unmasked = [["<UNCERTAIN>", "made", "Xbox"], ["x", "y"], ["a", "<UNCERTAIN>", "b", "<FILL>"]]
    assert normalize_chain(unmasked, mask=False) == [["", "made", "Xbox"], ["x", "y", ""], ["a", "b", "<FILL>"]]


RALA = {"buckets": 2, "omega": True, "seed": None}


@pytest.mark.parametrize(("rerank", "config"), [("rala-eq4", RALA), ("maxsim", {}), ("rala-eq3", RALA)])
def test_rerank_switches_choose_the_reranker_of_the_registry(cached_retriever, rerank, config):
    program = CoopRAG(retriever=cached_retriever, rerank=rerank, buckets=2, n=10, k=3)
    search = program.searcher()
    assert isinstance(search, RerankedRetriever) and search.first_stage is cached_retriever
    assert program.searcher() is search
    reranker = search.reranker
    assert type(reranker) is (MaxSim if rerank == "maxsim" else RaLa)
    assert {key: reranker.config()[key] for key in config} == config and reranker.config()["reranker"] == rerank
    assert (search.n, search.k) == (10, 3)
    assert reranker.special_tokens == SPECIAL_TOKENS and reranker.encoder.special_tokens == SPECIAL_TOKENS
    assert CoopRAG(retriever=cached_retriever, rerank=None).searcher() is cached_retriever
    assert CoopRAG(retriever=search, rerank=None).searcher() is cached_retriever
    assert CoopRAG(retriever=cached_retriever, rerank="rala-eq4", omega=False).searcher().reranker.omega is False
    assert CoopRAG().rerank == "rala-eq4" and CoopRAG(rerank=False).rerank is None
    with pytest.raises(ValueError, match="unknown rerank 'rala_eq4'; choose one of maxsim, rala-eq4.*, or None for "
                       r"no reranking \(--set rerank=none or rerank=null on the command line\)"):
        CoopRAG(rerank="rala_eq4")


def test_an_index_built_with_the_markers_lends_its_encoder_and_token_cache_to_the_reranker(tmp_path):
    facts = ["Volcanoes erupt lava.", "A violin has four strings.", "Glaciers are slow rivers of ice.",
             "Penguins live in Antarctica.", "Saffron is a costly spice.", "Comets have icy tails."]
    corpus = Corpus([Passage.make(f"T{i}", fact) for i, fact in enumerate(facts)])
    dense = DenseRetriever.build(corpus, encoder=Encoder("minilm", special_tokens=SPECIAL_TOKENS),
                                 work_dir=tmp_path, token_layers=())
    search = CoopRAG(retriever=dense, n=4, k=2).searcher()
    assert search.reranker.encoder is dense.encoder and search.reranker.tokens is dense.tokens
    assert search.encodes_once and search("Which instrument has four strings? <FILL>").ids[0] == corpus[1].id


def test_rala_reranks_the_first_stage_candidates_of_a_real_corpus(cached_retriever, musique_dev):
    program, _ = scripted(CoopRAG(retriever=cached_retriever, buckets=2, n=10, k=3))
    prediction = program(question=musique_dev[0].question)
    assert len(prediction.candidates) == 10 and set(prediction.passage_ids) <= set(prediction.candidates)
    assert prediction.scores == sorted(prediction.scores, reverse=True)
    assert prediction.counts["retrieval_calls"] == 1  # the reranker's first stage is not counted twice


def test_bootstrap_compiles_demos_for_all_three_stages(static_retriever):
    program, _ = scripted(CoopRAG(retriever=static_retriever, rerank=None))
    trainset = [dspy.Example(question=QUESTION, answer="Bill Gates", answers=["Bill Gates"]).with_inputs("question")]
    compiled = compile_program(program, trainset, optimizer="bootstrap")
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
    from multihop.lm.backends import configure_lm

    configure_lm("local:smollm2", max_tokens=256)
    program = CoopRAG(retriever=cached_retriever, n=10, k=5, buckets=2)
    for question in musique_dev[:2]:
        prediction = program(question=question.question)
        stages = [r["stage"] for r in prediction.stage_trace if r["kind"] == "lm"]
        assert stages[0] == "unroll" and stages[-1] == "reason"
        assert prediction.counts["llm_calls"] == len(stages) and prediction.counts["retrieval_calls"] == 1
        completes = stages.count("complete")
        assert completes == (1 if prediction.masked_chain else 0)
        assert prediction.query.startswith(question.question)
        assert len(prediction.passages) == 5 and prediction.scores == sorted(prediction.scores, reverse=True)
        assert isinstance(prediction.answer, str)


def questions(n):
    return [example(i, question=f"Who founded the company that makes product {i}?") for i in range(n)]


def test_unrolling_file_has_eq1_queries_and_sub_questions_and_resumes(tmp_path):
    program, script = scripted(CoopRAG(rerank=None))
    out = tmp_path / "unrolled.jsonl"
    unroll_questions(program, questions(2), out, progress=False)
    with open(out, "a") as torn:
        torn.write('{"id": "q2", "unrol')  # a run that died mid-write
    rows = unroll_questions(program, questions(4), out, progress=False)
    assert script.seen == ["unroll"] * 4  # q0, q1 once each; the torn q2 and q3 on the rerun
    assert list(rows) == ["q0", "q1", "q2", "q3"]
    record = read_unrolled(out)["q3"]
    assert record["sub_questions"] == SUBS and record["reasoning_chain"] == MASKED and record["hop_count"] == 2
    assert record["unrolled"] == unrolled_query(questions(4)[3].question, SUBS, MASKED)
    assert record["fallback"] is False


def test_a_failed_unrolling_keeps_the_raw_question_and_says_so(tmp_path):
    lm, _ = scripted_lm(lambda prompt: {"nonsense": "no"})
    dspy.configure(lm=lm)
    rows = unroll_questions(CoopRAG(rerank=None), questions(1), tmp_path / "u.jsonl", progress=False)
    assert rows["q0"]["fallback"] is True and rows["q0"]["sub_questions"] == []
    assert rows["q0"]["unrolled"] == questions(1)[0].question


class JitteredScript(TypedScript):
    """Replies drawn from the output types, each after a delay drawn from its prompt, so calls sent at once end out
    of order."""

    def respond(self, prompt: str) -> dict:
        time.sleep(int(hashlib.sha256(prompt.encode()).hexdigest()[:2], 16) / 255 * 0.02)
        return super().respond(prompt)


def test_a_threaded_unrolling_writes_the_serial_file(tmp_path):
    program = CoopRAG(rerank=None)
    with dspy.context(lm=JitteredScript(program).lm):  # some replies garbled: fallbacks are rows too
        serial = unroll_questions(program, questions(12), tmp_path / "serial.jsonl", progress=False)
        threaded = unroll_questions(program, questions(12), tmp_path / "threaded.jsonl", progress=False, threads=4)
    assert (tmp_path / "threaded.jsonl").read_text() == (tmp_path / "serial.jsonl").read_text()
    assert list(threaded) == list(serial) == [f"q{i}" for i in range(12)]
    assert 0 < sum(row["fallback"] for row in serial.values()) < 12


def test_cli_unroll_writes_the_file_cooprag_train_reads(tmp_path, monkeypatch):
    from multihop.lm.options import LMOptions

    script = cooprag_script()
    script.attach(CoopRAG(rerank=None))
    monkeypatch.setattr(LMOptions, "configure", lambda *args, **kwargs: dspy.configure(lm=script.lm))
    data = data_root() / "musique/dev/musique_qa_100.json"
    result = CliRunner().invoke(app, ["cooprag", "unroll", str(data), "--out", str(tmp_path / "u.jsonl"),
                                      "--limit", "3", "--threads", "2"])
    assert result.exit_code == 0, result.output
    assert "unrolled 3 questions (0 fell back" in result.output and script.seen == ["unroll"] * 3
    assert len(read_unrolled(tmp_path / "u.jsonl")) == 3


def test_a_program_over_dspy_settings_rm_builds_its_reranked_search_once(cached_retriever, musique_dev):
    program, _ = scripted(CoopRAG(buckets=2, n=6, k=3))
    dspy.configure(rm=cached_retriever)
    first = program.searcher()
    program(question=musique_dev[0].question)
    assert program.searcher() is first and first.first_stage is cached_retriever
    dspy.configure(rm=RerankedRetriever(cached_retriever, None))
    assert program.searcher() is not first  # another rm: another search


def test_query_parts_reach_the_retriever(static_retriever):
    program, _ = scripted(CoopRAG(retriever=static_retriever, rerank=None, query_parts="MQ+SQ"))
    program(question=QUESTION)
    assert static_retriever.calls[0][0] == " ".join([QUESTION, *SUBS])
    with pytest.raises(ValueError, match="query_parts"):
        CoopRAG(retriever=static_retriever, query_parts="RC")


class ShiftingRetriever(StaticRetriever):
    """Each retrieval one passage further down the list than the one before, as a new query finds new passages."""

    def forward(self, query, k=5):
        shift = len(self.calls)
        self.calls.append((query, k))
        hits = self.passages[shift : shift + k]
        return Hits(passages=[p.render() for p in hits], ids=[p.id for p in hits], scores=[1.0] * len(hits))


@pytest.fixture
def shifting_retriever():
    return ShiftingRetriever([Passage.make(f"T{i}", f"text {i}") for i in range(8)])


def key_extract_script(program: CoopRAG, replies: list[dict]) -> tuple[CoopRAG, StageScript]:
    """``program`` scripted as by :func:`scripted`, its KeyExtract rounds answered by ``replies`` in turn."""
    program, script = scripted(program)
    rounds = iter(replies)
    script.replies["key_extract"] = lambda prompt: next(rounds)
    return program, script


def test_key_extract_appends_the_key_sentence_and_retrieves_again_until_an_answer(shifting_retriever):
    program, script = key_extract_script(
        CoopRAG(retriever=shifting_retriever, rerank=None, k=3, key_extract_rounds=3),
        [{"document": "2", "key_sentence": "Xbox is made by Microsoft.", "answer": "False"},
         {"document": "3", "key_sentence": "Microsoft was founded by Bill Gates.", "answer": "Bill Gates"}])
    prediction = program(question=QUESTION)
    assert script.seen == ["unroll", "key_extract", "key_extract", "complete", "reason"]
    query = unrolled_query(QUESTION, SUBS, MASKED)
    assert shifting_retriever.calls == [(query, 3), (f"{query} Xbox is made by Microsoft.", 3)]  # no third: answered
    assert prediction.query == f"{query} Xbox is made by Microsoft."
    first_round, second_round = script.engine.requests[1], script.engine.requests[2]
    assert "Document [1]: T0: text 0" in first_round and "Document [3]: T2: text 2" in first_round
    assert "Document [1]: T1: text 1" in second_round and "Document [3]: T3: text 3" in second_round
    ids = [p.id for p in shifting_retriever.passages]
    assert prediction.passage_ids == [ids[1], ids[3], ids[2]]  # the selected documents first, then the last retrieval
    assert [step["document"] for step in prediction.key_extraction] == [2, 3]
    assert prediction.counts["key_extract_rounds"] == 2 and prediction.counts["key_extract_answered"] == 1
    assert prediction.counts["llm_calls"] == 5 and prediction.answer == "Bill Gates"  # the reasoning stage answers


def test_key_extract_stops_after_its_rounds(shifting_retriever):
    undetermined = [{"document": "9", "key_sentence": f"sentence {i}", "answer": "False."} for i in range(5)]
    program, script = key_extract_script(CoopRAG(retriever=shifting_retriever, rerank=None, k=3, key_extract_rounds=2),
                                         undetermined)
    prediction = program(question=QUESTION)
    assert script.seen.count("key_extract") == 2 and len(shifting_retriever.calls) == 3  # U, then one per round
    assert prediction.counts["key_extract_answered"] == 0
    assert prediction.passage_ids == [p.id for p in shifting_retriever.passages[2:5]]  # document 9 does not exist


@pytest.mark.parametrize("sentence", ["", "Which company makes the Xbox?"])
def test_key_extract_stops_when_the_key_sentence_adds_nothing_to_the_query(shifting_retriever, sentence):
    program, script = key_extract_script(CoopRAG(retriever=shifting_retriever, rerank=None, k=3, key_extract_rounds=3),
                                         [{"document": "1", "key_sentence": sentence, "answer": "False"}] * 3)
    program(question=QUESTION)
    assert script.seen.count("key_extract") == 1 and len(shifting_retriever.calls) == 1


def test_key_extract_exists_only_when_switched_on():
    assert "key_extract" not in CoopRAG(rerank=None).stage_names()
    assert CoopRAG(rerank=None, key_extract_rounds=2).stage_names() == ["unroll", "key_extract", "complete", "reason"]
    with pytest.raises(ValueError, match="key_extract_rounds"):
        CoopRAG(key_extract_rounds=-1)


@pytest.mark.slow
def test_the_unrolling_fits_the_default_local_budget_on_real_questions(musique_dev, capfd):
    from multihop.lm.backends import configure_lm
    from multihop.signatures.cooprag import QuestionUnrolling

    configure_lm("local:smollm2")  # the default cap, 128 tokens: the unrolling's schema gets what it needs
    unroll = dspy.Predict(QuestionUnrolling)
    for question in (e.question for e in musique_dev[:5]):
        unrolled = unroll(question=question)  # an unparsable reply would raise
        assert unrolled.reasoning_chain is not None
    assert "truncated" not in capfd.readouterr().err  # DSPy's own logger writes to stderr
