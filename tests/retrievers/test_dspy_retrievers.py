"""DSPy's retrievers and any callable returning passages as a program's retriever (retrievers/dspy_retrievers.py):
each answer shape becomes ``Hits`` with ids (the source's own, a corpus's, or content hashes), ``dspy.retrievers.
Embeddings`` and ``dspy.ColBERTv2`` (against a loopback stub of its HTTP API) each drive SingleStepRAG, and the
wrapped retriever serves ``dspy.Retrieve`` as DSPy's rm."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import dspy
import numpy as np
import pytest
from dspy.dsp.utils import dotdict

from multihop.data.corpus import Corpus, Passage, passage_id
from multihop.programs import SingleStepRAG
from multihop.retrievers import BM25Retriever, DSPyRetriever, Hits, as_retriever

from helpers import scripted_lm

PASSAGES = [Passage.make("France", "Paris is the capital of France."),
            Passage.make("Italy", "Rome is the capital of Italy."),
            Passage.make("Spain", "Madrid is the capital of Spain."),
            Passage.make("Peru", "Lima is the capital of Peru.")]
WORDS = sorted({word.strip(".?:").lower() for p in PASSAGES for word in p.render().split()} | {"what"})


def embedder(texts: list[str]) -> np.ndarray:
    """A bag of words over the passages' vocabulary: a query shares its words with the passage that answers it."""
    vectors = np.zeros((len(texts), len(WORDS)), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.split():
            word = word.strip(".?:").lower()
            if word in WORDS:
                vectors[row, WORDS.index(word)] += 1.0
    return vectors


def reader_lm():
    """Answers with the first passage's first word, as a reader of its passages would."""
    def respond(prompt: str) -> dict:
        passages = prompt.rsplit("[[ ## passages ## ]]", 1)[1]
        first = json.loads(passages.split("[[ ##", 1)[0].strip())[0]
        return {"answer": first.split(": ", 1)[-1].split()[0]}

    return scripted_lm(respond)[0]


@pytest.mark.parametrize(("answer", "ids", "scores"), [
    (["a", "b"], [passage_id("", "a"), passage_id("", "b")], [1.0, 0.5]),
    ([dotdict(long_text="a", pid=7, score=3.0), {"text": "b", "id": "x", "score": 2}], ["7", "x"], [3.0, 2.0]),
    (dspy.Prediction(passages=["a", "b"], indices=[4, 9]), [passage_id("", "a"), passage_id("", "b")], [1.0, 0.5]),
    (dspy.Prediction(passages=["a", "b"], ids=["i", "j"], scores=[0.9, 0.1]), ["i", "j"], [0.9, 0.1]),
    ("a", [passage_id("", "a")], [1.0]),
])
def test_every_answer_shape_becomes_hits_with_ids(answer, ids, scores):
    hits = DSPyRetriever(lambda query, k: answer)("q", k=5)
    assert isinstance(hits, Hits) and hits.ids == ids and hits.scores == scores
    assert hits.passages == ["a", "b"][:len(ids)]


def test_a_titled_item_is_rendered_and_hashed_as_a_multihop_passage():
    france = PASSAGES[0]
    hits = DSPyRetriever(lambda query, k: [{"title": france.title, "text": france.text}])("q")
    assert hits.passages == [france.render()] and hits.ids == [france.id]
    assert hits.titles == [france.title] and hits.texts == [france.text]


def test_a_corpus_gives_its_ids_to_the_passages_it_holds():
    corpus = Corpus(PASSAGES)
    source = [PASSAGES[1].render(), PASSAGES[2].text, "not in the corpus"]
    hits = DSPyRetriever(lambda query, k: source, corpus=corpus)("q")
    assert hits.ids == [PASSAGES[1].id, PASSAGES[2].id, passage_id("", "not in the corpus")]


def test_a_source_without_k_answers_its_own_cut_to_k_and_a_bad_answer_is_one_line():
    asked = []

    def fixed(query):  # takes no k: answers its own number
        asked.append(query)
        return ["a", "b", "c"]

    assert DSPyRetriever(fixed)("q", k=2).passages == ["a", "b"] and asked == ["q"]
    with pytest.raises(TypeError, match="answered a int"):
        DSPyRetriever(lambda query, k: 3)("q")
    with pytest.raises(TypeError, match="no text"):
        DSPyRetriever(lambda query, k: [{"pid": 1}])("q")
    with pytest.raises(TypeError, match="callable"):
        DSPyRetriever("not a retriever")


def test_a_multihop_retriever_is_not_wrapped_and_a_wrapped_one_serves_dspy_retrieve():
    bm25 = BM25Retriever(Corpus(PASSAGES))
    assert as_retriever(bm25) is bm25 and as_retriever(None) is None
    wrapped = as_retriever(lambda query, k: [p.render() for p in PASSAGES][:k])
    assert as_retriever(wrapped) is wrapped
    with dspy.context(rm=wrapped):
        assert dspy.Retrieve(k=2)("q").passages == [p.render() for p in PASSAGES[:2]]


def test_dspy_embeddings_drive_single_step_rag():
    embeddings = dspy.retrievers.Embeddings(corpus=[p.render() for p in PASSAGES], embedder=embedder, k=3)
    dspy.configure(lm=reader_lm())
    program = SingleStepRAG(retriever=embeddings, k=2)
    prediction = program(question="What is the capital of Italy?")
    assert prediction.answer == "Rome" and len(prediction.passages) == 2
    assert prediction.passages[0] == PASSAGES[1].render()
    assert prediction.passage_ids[0] == passage_id("", PASSAGES[1].render())  # untitled texts: content hashes
    retrieval = prediction.stage_trace[0]
    assert retrieval["stage"] == "retriever" and retrieval["outputs"]["ids"] == prediction.passage_ids
    assert prediction.counts["retrieval_calls"] == 1


class ColBERTv2Stub(BaseHTTPRequestHandler):
    """ColBERTv2's server as ``dspy.ColBERTv2`` asks it: ``GET ?query=&k=`` → ``{"topk": [{text, pid, rank, score,
    prob}]}``, best first (here: the passages sharing most words with the query)."""

    asked: list[tuple[str, int]] = []

    def do_GET(self):
        params = parse_qs(urlparse(self.path).query)
        query, k = params["query"][0], int(params["k"][0])
        self.asked.append((query, k))
        scores = embedder([query]) @ embedder([p.render() for p in PASSAGES]).T
        order = np.argsort(-scores[0], kind="stable")[:k]
        topk = [{"text": PASSAGES[i].render(), "pid": int(i), "rank": rank, "score": float(scores[0, i]),
                 "prob": 1.0 / k} for rank, i in enumerate(order, start=1)]
        body = json.dumps({"query": query, "topk": topk}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def colbert_server():
    ColBERTv2Stub.asked = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), ColBERTv2Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_dspy_colbertv2_drives_single_step_rag(colbert_server):
    dspy.configure(lm=reader_lm())
    program = SingleStepRAG(retriever=dspy.ColBERTv2(url=colbert_server), k=2)
    prediction = program(question="What is the capital of Spain?")
    assert ColBERTv2Stub.asked == [("What is the capital of Spain?", 2)]
    assert prediction.answer == "Madrid" and prediction.passages[0] == PASSAGES[2].render()
    assert prediction.passage_ids[0] == "2" and len(prediction.passage_ids) == 2  # the server's pids
    retrieval = prediction.stage_trace[0]
    assert retrieval["kind"] == "retriever" and retrieval["outputs"]["ids"] == prediction.passage_ids


def test_a_dspy_retriever_set_as_dspy_settings_rm_is_searched_through_the_adapter(colbert_server):
    dspy.configure(lm=reader_lm(), rm=dspy.ColBERTv2(url=colbert_server))
    prediction = SingleStepRAG(k=1)(question="What is the capital of Peru?")
    assert prediction.answer == "Lima" and prediction.passage_ids == ["3"]
    assert prediction.stage_trace[0]["stage"] == "rm"
