import dspy

from multihop.programs import SingleStepRAG
from multihop.tracing import record_trace

from scripted import scripted_lm


def test_one_record_per_stage_including_the_retriever(static_retriever):
    lm, engine = scripted_lm(lambda p: {"answer": "text 0"})
    dspy.configure(lm=lm)
    program = SingleStepRAG(retriever=static_retriever, k=2)
    prediction = program(question="Which?")
    retrieval, answer = prediction.trace
    assert retrieval["stage"] == "retriever" and retrieval["kind"] == "retriever"
    assert retrieval["inputs"]["arg0"] == "Which?" and retrieval["outputs"]["ids"] == prediction.passage_ids
    assert answer["stage"] == "answer" and answer["kind"] == "lm" and answer["lm"] == "local/scripted"
    assert answer["inputs"]["question"] == "Which?" and answer["outputs"]["answer"] == "text 0"
    assert answer["prompt_tokens"] == len(engine.requests[0].split())
    assert answer["latency_s"] >= 0


def test_identical_request_is_served_from_cache_with_zero_tokens(static_retriever):
    lm, engine = scripted_lm(lambda p: {"answer": "a"})
    dspy.configure(lm=lm)
    program = SingleStepRAG(retriever=static_retriever)
    first, second = program(question="same"), program(question="same")
    assert len(engine.requests) == 1
    assert first.counts["tokens"] > 0 and second.counts["tokens"] == 0
    assert second.counts["llm_calls"] == 1


def test_record_trace_is_usable_directly_and_nests(static_retriever):
    lm, _ = scripted_lm(lambda p: {"answer": "a"})
    dspy.configure(lm=lm)
    program = SingleStepRAG(retriever=static_retriever)
    with record_trace() as outer:
        program(question="one")
        program(question="two")
    assert outer.counts()["llm_calls"] == 2 and outer.counts()["retrieval_calls"] == 2
    assert outer.counts()["tokens"] > 0


def test_a_failing_retriever_is_recorded_with_its_error():
    class Broken(dspy.Module):
        def forward(self, query, k=5):
            raise RuntimeError("index offline")

    program = SingleStepRAG(retriever=Broken())
    with record_trace(program) as trace:
        try:
            program.forward(question="q")
        except RuntimeError:
            pass
    [record] = trace.records
    assert record["stage"] == "retriever" and record["error"] == "RuntimeError: index offline"


class Reranking(dspy.Module):
    """A retriever that calls another retriever module for its candidates (as ``Retriever`` over BM25 does)."""

    def __init__(self, first_stage):
        super().__init__()
        self.first_stage = first_stage

    def forward(self, query, k=5):
        hits = self.first_stage(query, k=2 * k)
        return dspy.Prediction(passages=hits.passages[::-1][:k], ids=hits.ids[::-1][:k], scores=hits.scores[:k])


def test_a_retriever_inside_a_retriever_is_one_retrieval(static_retriever):
    lm, _ = scripted_lm(lambda p: {"answer": "a"})
    dspy.configure(lm=lm)
    prediction = SingleStepRAG(retriever=Reranking(static_retriever), k=2)(question="q")
    assert static_retriever.calls == [("q", 4)]
    assert prediction.counts["retrieval_calls"] == 1
    expected = [static_retriever.passages[i].id for i in (3, 2)]
    assert prediction.counts["passage_ids"] == prediction.passage_ids == expected
