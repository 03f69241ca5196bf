import contextvars
from concurrent.futures import ThreadPoolExecutor

import dspy
import pytest

from multihop.programs import PROGRAMS, MultihopProgram, SingleStepRAG
from multihop.runtime.tracing import count, module_paths, record_trace

from helpers import declared_program, scripted_lm


def test_one_record_per_stage_including_the_retriever(static_retriever):
    lm, engine = scripted_lm(lambda p: {"answer": "text 0"})
    dspy.configure(lm=lm)
    program = SingleStepRAG(retriever=static_retriever, k=2)
    prediction = program(question="Which?")
    retrieval, answer = prediction.stage_trace
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
    with record_trace(program) as trace, pytest.raises(RuntimeError, match="index offline"):
        program.forward(question="q")
    [record] = trace.records
    assert record["stage"] == "retriever" and record["error"] == "RuntimeError: index offline"


class Reranking(dspy.Module):
    """A retriever that calls another retriever module for its candidates (as ``RerankedRetriever`` over BM25 does)."""

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


class FanOut(MultihopProgram):
    """Answers three sub-questions concurrently, through ``dspy.Parallel`` or a thread pool."""

    def __init__(self, how: str = "parallel"):
        super().__init__()
        self.how = how
        self.answer = dspy.Predict("question -> answer")

    def forward(self, question):
        questions = [f"{question} part {i}" for i in range(3)]
        if self.how == "parallel":
            results = dspy.Parallel(num_threads=3)([(self.answer, {"question": q}) for q in questions])
        else:
            with ThreadPoolExecutor(max_workers=3) as pool:  # each task in a copy of this context, as DSPy needs
                futures = [pool.submit(contextvars.copy_context().run, self.answer, question=q) for q in questions]
                results = [future.result() for future in futures]
        count("fanned_out", len(results))
        return dspy.Prediction(answer=" | ".join(r.answer for r in results))


@pytest.mark.parametrize("how", ["parallel", "thread pool"])
def test_calls_fanned_out_inside_a_program_are_answered_and_counted(how):
    lm, engine = scripted_lm(lambda p: {"answer": "part " + p.rsplit("part ", 1)[1].split()[0]}, cache=False)
    dspy.configure(lm=lm)
    prediction = FanOut(how)(question="q")
    assert prediction.answer == "part 0 | part 1 | part 2"
    assert prediction.counts["llm_calls"] == 3 and len(engine.requests) == 3
    assert prediction.counts["fanned_out"] == 3
    assert prediction.counts["prompt_tokens"] == sum(len(r.split()) for r in engine.requests)
    assert sorted(r["inputs"]["question"] for r in prediction.stage_trace) == [f"q part {i}" for i in range(3)]


def test_lm_usage_is_reported_to_dspy_and_the_trace_is_only_stage_trace(static_retriever):
    lm, engine = scripted_lm(lambda p: {"answer": "a"})
    dspy.configure(lm=lm, track_usage=True)
    prediction = SingleStepRAG(retriever=static_retriever)(question="q")
    usage = prediction.get_lm_usage()
    assert usage["local/scripted"]["prompt_tokens"] == len(engine.requests[0].split())
    assert usage["local/scripted"]["prompt_tokens"] == prediction.counts["prompt_tokens"]
    assert prediction.stage_trace and "trace" not in prediction.keys()  # DSPy's name, never ours
    with pytest.raises(AttributeError):
        prediction.trace  # noqa: B018


def test_counted_events_reach_every_trace_recorded_and_nothing_outside_one():
    count("outside")  # no trace here: nothing to count into, and no error
    with record_trace() as outer:
        count("repaired")
        with record_trace() as inner:
            count("repaired", 2)
            count("never", 0)
    assert outer.counts()["repaired"] == 3 and inner.counts()["repaired"] == 2
    assert inner.counts()["never"] == 0 and "outside" not in outer.counts()


def test_dspy_retrieve_inside_a_traced_program_is_one_retrieval(static_retriever, caplog):
    class WithRetrieve(MultihopProgram):
        def __init__(self):
            super().__init__()
            self.search = dspy.Retrieve(k=2)

        def forward(self, question):
            return dspy.Prediction(answer="", passages=self.search(question).passages)

    dspy.configure(rm=static_retriever)
    prediction = WithRetrieve()(question="q")
    assert prediction.passages == [p.render() for p in static_retriever.passages[:2]]
    assert prediction.counts["retrieval_calls"] == 1 and "callback" not in caplog.text
    # dspy.Retrieve keeps only the texts; the record keeps the ids its rm found, under its path in the program
    (record,) = prediction.stage_trace
    assert record["stage"] == "search" and record["kind"] == "retriever"
    assert record["outputs"]["ids"] == prediction.counts["passage_ids"] == [p.id for p in static_retriever.passages[:2]]


def test_dspy_retrieve_over_a_bare_rm_records_its_passages_content_hashes():
    from multihop.data.corpus import passage_id

    def rm(query, k=3):  # an rm as DSPy's own are: items with long_text, no module
        return [dspy.dsp.utils.dotdict(long_text=f"passage {i}") for i in range(k)]

    class Retrieving(dspy.Module):
        def forward(self, question):
            return dspy.Prediction(answer="", context=dspy.Retrieve(k=2)(question).passages)

    program = Retrieving()
    with dspy.context(rm=rm), record_trace(program) as trace:
        program(question="q")
    (record,) = trace.to_list()
    assert record["stage"] == "rm" and record["outputs"]["passages"] == ["passage 0", "passage 1"]
    assert trace.counts()["passage_ids"] == [passage_id("", "passage 0"), passage_id("", "passage 1")]


def test_module_paths_are_dspys_sub_module_paths_without_walking_the_growing_histories():
    for name in sorted(method.name for method in PROGRAMS.declared()):
        program = declared_program(name)
        expected = {}
        for path, module in program.named_sub_modules():
            expected.setdefault(id(module), path.removeprefix("self."))
        assert module_paths(program) == expected, name
    program = declared_program("SingleStepRAG")
    stray = dspy.Predict("question -> answer")
    program.history.extend({"messages": [{"role": "user"}], "module": stray} for _ in range(1000))  # DSPy's entries
    assert id(stray) in {id(module) for _, module in program.named_sub_modules()}
    assert id(stray) not in module_paths(program)
