"""FLARE and the token log-probabilities it reads: the threshold rule, the masked query each retrieval sends,
the stop rules and caps, the error without log-probabilities and the field-span helper, all on scripted LMs; the
engines' log-probabilities against the model's own (the tiny transformers model) and, slow, llama.cpp's under a JSON
schema."""

import json
import math
from types import SimpleNamespace

import dspy
import httpx
import pytest
from dspy.lm15 import Config, Message, Request

from multihop.data.corpus import Corpus, Passage
from multihop.evaluation.runner import evaluate
from multihop.lm.engines.local_engine import LogprobsUnavailable
from multihop.lm.engines.served import ServedEngine
from multihop.optimize.gold_targets import gold_targets
from multihop.programs import FLARE
from multihop.programs.baselines.flare import Piece, field_pieces, low_confidence, masked_query
from multihop.retrievers import BM25Retriever
from multihop.signatures.flare import NextSentence

from helpers import StageScript, field, tiny_causal_lm

DOCS = [
    Passage.make("Hypocrite (film)", "Hypocrite is a 1949 Mexican film directed by Miguel Morayta."),
    Passage.make("Miguel Morayta", "Miguel Morayta was a Spanish film director. He died on 19 June 2013."),
    Passage.make("Xbox", "The Xbox is a console made by Microsoft."),
]
QUESTION = "When did the director of film Hypocrite die?"


class Asked(BM25Retriever):
    """BM25 that records each query it was asked, with its k."""

    def search(self, queries, k):
        self.asked = [*getattr(self, "asked", []), *((q, k) for q in queries)]
        return super().search(queries, k)


def scripted(program, generate, answer=None, unsure: dict[str, float] | None = None, logprobs: bool = True):
    """A StageScript for ``program`` whose replies' tokens are their words, each of probability 1 but those ``unsure``
    names (a word, stripped, → its probability); ``logprobs=False``: an LM that gives none."""
    script = StageScript({"generate": generate, "answer": answer or {"answer": "read"}}, program)
    probability = dict(unsure or {})

    def words(text):
        tokens = type(script.engine).logprobs(script.engine, text)
        return tuple(type(t)(token=t.token, logprob=math.log(probability.get(t.token.strip(), 1.0))) for t in tokens)

    script.engine.logprobs = words if logprobs else (lambda text: None)
    return script


def run(program, generate, **options):
    script = scripted(program, generate, **options)
    with dspy.context(lm=script.lm):
        return program(question=QUESTION), script


def in_turn(*sentences: str):
    replies = iter(sentences)
    return lambda prompt: {"sentence": next(replies)}


def queries(program) -> list[str]:
    return [query for query, _ in program.rm.asked]


# --- the field-span helper and the rules, on hand-computed values -------------------------------------------------

def content(*tokens) -> dict:
    """A prediction's ``logprobs`` as DSPy hands them on: (token, logprob) or (token, logprob, bytes)."""
    return {"content": [{"token": t[0], "logprob": t[1], "bytes": list(t[2]) if len(t) > 2 else None,
                         "top_logprobs": []} for t in tokens]}


def test_a_json_replys_field_keeps_only_the_tokens_that_write_its_value():
    # {"reasoning": "a, b", "sentence": "Ham" + "let" + " said \"x\"." }
    logprobs = content(('{"', -9.0), ('reason', -9.0), ('ing": "a', -9.0), (', b", "', -9.0), ('sent', -9.0),
                       ('ence', -9.0), ('": "Ham', -0.5), ('let', -0.1), (' said', -0.2), (' \\"', -0.3),
                       ('x', -0.4), ('\\".', -0.6), ('"}', -9.0))
    pieces = field_pieces(logprobs, "sentence")
    assert pieces == [Piece("Ham", -0.5), Piece("let", -0.1), Piece(" said", -0.2), Piece(' "', -0.3),
                      Piece("x", -0.4), Piece('".', -0.6)]  # escapes decoded, each piece cut to the value
    assert "".join(p.text for p in pieces) == json.loads('{"reasoning": "a, b", "sentence": "Hamlet said \\"x\\"."}'
                                                         )["sentence"]
    assert field_pieces(logprobs, "reasoning") == [Piece("a", -9.0), Piece(", b", -9.0)]
    assert field_pieces(logprobs, "answer") is None


def test_a_character_split_over_tokens_belongs_to_the_token_of_its_first_byte():
    # "Café": é is two bytes, each its own token (its text a replacement character)
    logprobs = content(('{"sentence": "Caf', -1.0), ("\ufffd", -2.0, b"\xc3"), ("\ufffd", -3.0, b"\xa9"), ('"}', 0.0))
    assert field_pieces(logprobs, "sentence") == [Piece("Caf", -1.0), Piece("é", -2.0)]


def test_a_chat_adapter_section_and_an_openai_object_are_read_too():
    text = "[[ ## sentence ## ]]\nParis is big.\n\n[[ ## completed ## ]]"
    tokens = [SimpleNamespace(token=t, logprob=-float(i), bytes=None) for i, t in enumerate(
        ["[[", " ##", " sentence", " ##", " ]]\nParis", " is", " big.", "\n\n[[", " ##", " completed", " ##", " ]]"])]
    assert "".join(t.token for t in tokens) == text
    assert field_pieces(SimpleNamespace(content=tokens), "sentence") == [Piece("Paris", -4.0), Piece(" is", -5.0),
                                                                         Piece(" big.", -6.0)]


def test_the_threshold_rule_and_the_masked_query():
    pieces = [Piece("Joe", math.log(0.9)), Piece(" Biden", math.log(0.3)), Piece(" attended", math.log(0.95)),
              Piece(" the", math.log(0.5)), Piece(" University", math.log(0.39))]
    assert low_confidence(pieces, 0.8) and low_confidence(pieces, 0.3) and not low_confidence(pieces, 0.29)
    assert low_confidence([Piece("Paris", 0.0)], 1.0)  # θ = 1: every sentence, however sure
    assert masked_query(pieces, 0.4) == "Joe attended the"  # at or below β: " Biden" and " University"
    assert masked_query(pieces, 0.5) == "Joe attended"  # the authors keep a token above β only
    assert masked_query(pieces, 0.0) == "Joe Biden attended the University"  # β = 0: the whole sentence
    assert masked_query(pieces, 1.0) == ""


# --- the program's control flow -----------------------------------------------------------------------------------

def test_an_unsure_look_ahead_retrieves_with_its_sure_tokens_and_is_written_again_from_the_new_documents():
    program = FLARE(retriever=Asked(Corpus(DOCS)), k=1)
    seen = []

    def generate(prompt):
        passages, so_far = field(prompt, "passages"), field(prompt, "answer_so_far")
        seen.append((passages, so_far))
        if not so_far:
            return {"sentence": "The film Hypocrite was directed by Miguel Morayta."}
        if "died" not in so_far:  # unsure of the date until Morayta's page is read
            return {"sentence": "Miguel Morayta died on 19 June 2013." if "19 June 2013" in passages else
                    "Miguel Morayta died on 12 May 1990."}
        return {"sentence": "So the answer is 19 June 2013."}

    prediction, script = run(program, generate, unsure={"12": 0.3, "May": 0.2, "1990.": 0.1, "died": 0.7})
    # the look-ahead's tokens below β = 0.4 masked out; "died" (0.7) is below θ = 0.8, not below β
    assert queries(program) == [QUESTION, "Miguel Morayta died on"]
    assert prediction.queries == queries(program)
    assert prediction.sentences == ["The film Hypocrite was directed by Miguel Morayta.",
                                    "Miguel Morayta died on 19 June 2013.", "So the answer is 19 June 2013."]
    assert prediction.answer == "19 June 2013" and script.seen == ["generate"] * 4  # no reader: the text states it
    assert "19 June 2013" not in seen[1][0] and "19 June 2013" in seen[2][0]  # written again from the new documents
    assert seen[2][1] == seen[1][1]  # after the same answer so far
    assert "19 June 2013" in seen[3][0]  # the new documents replaced the question's
    counts = prediction.counts
    assert (counts["retrievals"], counts["low_confidence"], counts["sentences"], counts["stated"]) == (2, 1, 3, 1)
    assert counts["capped"] == 0 and counts["retrieval_calls"] == 2
    assert prediction.passage_ids == [DOCS[0].id, DOCS[1].id]  # what the generator read, in order


@pytest.mark.parametrize(("probability", "retrieves"), [(0.79, True), (0.81, False)])
def test_one_token_under_theta_triggers_a_retrieval_and_one_above_does_not(probability, retrieves):
    program = FLARE(retriever=Asked(Corpus(DOCS)), k=1, threshold=0.8, max_sentences=1)
    prediction, _ = run(program, in_turn("Miguel Morayta directed it.", "Miguel Morayta directed the film."),
                        unsure={"directed": probability, "##": 0.01, "sentence": 0.01, "[[": 0.01})
    # the reply's structure tokens ([[ ## sentence ## ]]) are improbable: they are not the sentence's
    assert queries(program) == [QUESTION, *(["Miguel Morayta directed it."] if retrieves else [])]
    assert prediction.counts["low_confidence"] == int(retrieves)
    assert prediction.sentences == ["Miguel Morayta directed the film." if retrieves else "Miguel Morayta directed it."]


def test_theta_zero_never_retrieves_again_and_beta_zero_queries_with_the_whole_sentence():
    sentence = "Hypocrite was directed by Miguel Morayta."
    never = FLARE(retriever=Asked(Corpus(DOCS)), threshold=0.0, max_sentences=2)
    run(never, in_turn(sentence, sentence), unsure={"Miguel": 0.01})
    assert queries(never) == [QUESTION]
    whole = FLARE(retriever=Asked(Corpus(DOCS)), mask_threshold=0.0, max_sentences=1)
    run(whole, in_turn(sentence, sentence), unsure={"Miguel": 0.01})
    assert queries(whole) == [QUESTION, sentence]


def test_a_query_with_every_token_masked_retrieves_nothing_and_keeps_the_look_ahead():
    program = FLARE(retriever=Asked(Corpus(DOCS)), max_sentences=1)
    prediction, script = run(program, in_turn("Luis Buñuel.", "never asked"), unsure={"Luis": 0.1, "Buñuel.": 0.1})
    assert queries(program) == [QUESTION] and prediction.sentences == ["Luis Buñuel."]
    assert prediction.counts["empty_query"] == 1 and script.seen == ["generate", "answer"]


def test_the_sentence_cap_and_the_token_cap_end_the_text_and_the_reader_answers():
    program = FLARE(retriever=Asked(Corpus(DOCS)), max_sentences=3)
    prediction, script = run(program, in_turn("One fact here.", "Two facts here.", "Three facts here.", "never"),
                             answer=lambda p: {"answer": "2013" if "Three facts" in field(p, "reasoning") else "?"})
    assert len(prediction.sentences) == 3 and script.seen == ["generate"] * 3 + ["answer"]
    assert prediction.answer == "2013" and prediction.counts["capped"] == 1 and prediction.counts["stated"] == 0
    tokens = FLARE(retriever=Asked(Corpus(DOCS)), max_generation_tokens=5)  # three tokens a sentence: stops at 6
    prediction, _ = run(tokens, in_turn("One fact here.", "Two facts here.", "never"))
    assert prediction.sentences == ["One fact here.", "Two facts here."] and prediction.counts["capped"] == 1
    silent = FLARE(retriever=Asked(Corpus(DOCS)), max_sentences=1, reader=False)
    prediction, script = run(silent, in_turn("One fact here."))
    assert prediction.answer == "" and script.seen == ["generate"]  # never invented


def test_an_empty_sentence_ends_the_text():
    program = FLARE(retriever=Asked(Corpus(DOCS)))
    prediction, script = run(program, in_turn("One fact here.", ""))
    assert prediction.sentences == ["One fact here."] and script.seen == ["generate", "generate", "answer"]
    assert prediction.counts["capped"] == 0


def test_an_lm_without_logprobs_is_one_clear_error_naming_what_to_use_and_stops_an_evaluation(tmp_path):
    program = FLARE(retriever=Asked(Corpus(DOCS)))
    with pytest.raises(LogprobsUnavailable, match="local model in-process.*vLLM or SGLang"):
        run(program, in_turn("One fact here."), logprobs=False)
    script = scripted(program, in_turn(*["One fact here."] * 4), logprobs=False)
    examples = [dspy.Example(id=f"q{i}", question=QUESTION, answers=["2013"]).with_inputs("question") for i in (1, 2)]
    with dspy.context(lm=script.lm), pytest.raises(LogprobsUnavailable):  # not one error row a question
        evaluate(program, examples, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "results.jsonl").exists() or not (tmp_path / "run" / "results.jsonl").read_text()


def test_a_server_that_returns_no_logprobs_is_asked_for_them_and_the_error_follows():
    from multihop.lm.backends import make_lm
    from multihop.lm.loopback import loopback_server

    with loopback_server(latency=0.0, lifetime=60) as server:
        lm = make_lm("hosted_vllm/qwen", api_base=server.api_base, cache=False)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), pytest.raises(LogprobsUnavailable):
            FLARE(retriever=Asked(Corpus(DOCS)))(question=QUESTION)
        assert server.requests[-1]["logprobs"] is True


def test_the_served_engine_hands_on_the_servers_logprobs_and_names_a_refusal():
    engine = ServedEngine("http://127.0.0.1:9/v1", "m", timeout=1, schema_form="json_schema")
    config = Config(max_tokens=8, logprobs=2)
    assert engine.body([], config, 8, None)["logprobs"] is True and engine.body([], config, 8, None)[
        "top_logprobs"] == 2
    assert "logprobs" not in engine.body([], Config(max_tokens=8), 8, None)
    reply = {"choices": [{"message": {"content": "Paris"}, "finish_reason": "stop", "logprobs": {"content": [
        {"token": "Par", "logprob": -0.5, "bytes": [80, 97, 114], "top_logprobs": [{"token": "Lon", "logprob": -2.0}]},
        {"token": "is", "logprob": -0.1}]}}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    generation = engine.generation(httpx.Response(200, json=reply), None, logprobs=True)
    assert [(t.token, t.logprob, t.bytes) for t in generation.logprobs] == [("Par", -0.5, (80, 97, 114)),
                                                                          ("is", -0.1, None)]
    assert generation.logprobs[0].top[0].token == "Lon"
    refusal = httpx.Response(500, text="logprobs is not supported for models created with logits_all=False")
    with pytest.raises(LogprobsUnavailable, match="vLLM or SGLang"):
        engine.generation(refusal, None, logprobs=True)
    engine.close()


def test_gold_rows_write_each_hops_evidence_then_the_closing_phrase():
    paragraphs = [{"id": f"p{i}", "title": doc.title, "text": doc.text, "is_supporting": i < 2}
                  for i, doc in enumerate(DOCS)]
    example = dspy.Example(id="2hop", question=QUESTION, answer="19 June 2013", answers=["19 June 2013"],
                           decomposition=["Hypocrite >> director", "When did #1 die?"],
                           decomposition_answers=["Miguel Morayta", "19 June 2013"],
                           decomposition_support=["p0", "p1"], paragraphs=paragraphs,
                           gold_passage_ids=["p0", "p1"]).with_inputs("question")
    targets = list(gold_targets(FLARE(k=2), [example]))
    generate = [t for t in targets if t.stage == "generate"]
    assert [t.outputs["sentence"] for t in generate] == [
        "Hypocrite is a 1949 Mexican film directed by Miguel Morayta.", "He died on 19 June 2013.",
        "So the answer is 19 June 2013."]
    assert [t.inputs["answer_so_far"] for t in generate] == [
        "", "Hypocrite is a 1949 Mexican film directed by Miguel Morayta.",
        "Hypocrite is a 1949 Mexican film directed by Miguel Morayta. He died on 19 June 2013."]
    assert all(len(t.inputs["passages"]) == 2 for t in generate)  # k documents: the hop's own among distractors
    assert DOCS[0].title in " ".join(generate[0].inputs["passages"])  # the hop's own paragraph
    assert DOCS[1].title in " ".join(generate[1].inputs["passages"])
    reader, = [t for t in targets if t.stage == "answer"]
    assert reader.outputs == {"answer": "19 June 2013"}
    assert reader.inputs["reasoning"].endswith("He died on 19 June 2013.")
    assert not list(gold_targets(FLARE(k=2), [dspy.Example(id="h", question="Q?", answer="A").with_inputs("question")]))


# --- the engines' log-probabilities -------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"sentence": {"type": "string", "maxLength": 40}}, "required": ["sentence"]}


@pytest.mark.slow  # builds a tiny model: 5-10 s
def test_the_transformers_engine_gives_each_reply_tokens_own_log_probability(tmp_path):
    import torch

    from multihop.lm.engines import TransformersEngine

    path = tiny_causal_lm(tmp_path / "tiny", ["The capital of France is Paris. sentence answer question"] * 5)
    engine = TransformersEngine(path)
    format_ = {"type": "json_schema", "schema": SCHEMA, "name": "Out", "strict": True}
    messages = (Message.user("Where is Paris?"),)
    reply = engine.complete(Request(model="m", messages=messages, config=Config(max_tokens=16, logprobs=0,
                                                                                response_format=format_)))
    tokens = reply.logprobs
    assert tokens and "".join(t.token for t in tokens) == reply.text
    tokenizer, model = engine._tokenizer, engine._model
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Where is Paris?"}], add_generation_prompt=True,
                                           return_dict=True)["input_ids"]
    ids = [t.token_id for t in tokens]
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt) + ids])).logits[0]
    own = torch.log_softmax(logits[len(prompt) - 1: len(prompt) - 1 + len(ids)].float(), dim=-1)
    expected = [own[i, token].item() for i, token in enumerate(ids)]
    assert [t.logprob for t in tokens] == pytest.approx(expected, abs=1e-4)
    assert tokens[0].token == "{" and tokens[0].logprob < -0.01  # the model's own, not the grammar's certainty
    unasked = engine.complete(Request(model="m", messages=messages, config=Config(max_tokens=16,
                                                                                  response_format=format_)))
    assert unasked.logprobs is None and unasked.text == reply.text
    with pytest.raises(Exception, match="chosen tokens"):
        engine.complete(Request(model="m", messages=messages, config=Config(max_tokens=4, logprobs=3)))
    # through DSPy: a stage asked per call, its field's tokens read back onto the parsed value
    from multihop.lm.backends import engine_lm

    with dspy.context(lm=engine_lm("local/tiny", engine, cache=False, max_tokens=32), adapter=dspy.JSONAdapter()):
        result = dspy.Predict(NextSentence)(passages=["Paris is in France."], question="Where is Paris?",
                                            answer_so_far="", config={"logprobs": True})
    pieces = field_pieces(result.logprobs, "sentence")
    assert pieces and "".join(p.text for p in pieces) == result.sentence


@pytest.mark.slow
def test_llama_cpp_gives_one_logprob_per_generated_token_under_a_json_schema():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not built in this virtualenv")
    from multihop.lm.backends import make_lm

    lm = make_lm("local:smollm2", engine="llamacpp", cache=False, max_tokens=48)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        result = dspy.Predict(NextSentence)(passages=[DOCS[1].render()], question=QUESTION, answer_so_far="",
                                            config={"logprobs": True})
    tokens = result.logprobs["content"]
    assert len(tokens) == lm.history[-1]["usage"]["completion_tokens"]
    assert all(t["logprob"] <= 0 for t in tokens) and any(t["logprob"] < 0 for t in tokens)
    reply = b"".join(bytes(t["bytes"]) for t in tokens).decode()
    assert json.loads(reply)["sentence"] == result.sentence
    assert "".join(p.text for p in field_pieces(result.logprobs, "sentence")) == result.sentence
    # a decode cut at its cap: its last token, which llama.cpp never evaluates, has its log-probability too
    engine = lm._engine_spec
    cut = engine.complete(Request(model="m", messages=(Message.user("Count to twenty."),),
                                  config=Config(max_tokens=6, logprobs=0)))
    assert cut.finish_reason == "length" and len(cut.logprobs) == cut.usage.output_tokens == 6
