"""DSPy's own saving: every declared program's state (``program.save("p.json")`` / ``program.load``) and the whole
program with its retriever (``program.save(folder, save_program=True)`` / ``dspy.load(folder, allow_pickle=True)``)
round-trip and answer the same afterwards; ``multihop.save`` leaves the program it saves unchanged."""

from __future__ import annotations

import logging

import dspy
import pytest

from multihop.data.corpus import Corpus, Passage
from multihop.programs import PROGRAMS
from multihop.programs.base import takes_retriever

from helpers import TypedScript

NAMES = [method.name for method in PROGRAMS.declared()]
QUESTION = "Who directed the film set on the river 2?"


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus([Passage.make(f"Title {i}", f"Passage {i} tells of the river {i % 3} and film {i}.")
                   for i in range(12)])


@pytest.fixture(scope="module")
def bm25(corpus):
    from multihop.retrievers import BM25Retriever

    return BM25Retriever(corpus, k=3)


@pytest.fixture(scope="module")
def dense(corpus, tmp_path_factory):
    from multihop.retrievers import DenseRetriever

    return DenseRetriever.build(corpus, encoder="minilm", work_dir=tmp_path_factory.mktemp("dense"), k=3,
                                token_layers=(1,))


def build(name: str, retriever):
    cls = PROGRAMS[name]
    quiet = logging.getLogger("multihop").level
    logging.getLogger("multihop").setLevel(logging.ERROR)
    try:
        return cls(retriever=retriever) if takes_retriever(cls) else cls()
    finally:
        logging.getLogger("multihop").setLevel(quiet)


def with_demo(program):
    """``program`` with one demo (extra fields included) on its first stage, so the state carries something."""
    _, predictor = program.named_predictors()[0]
    fields = {name: f"demo {name}" for name in predictor.signature.fields}
    predictor.demos = [dspy.Example(**fields, paragraphs=["a whole paragraph"])]
    return program


def answer(program, script: TypedScript):
    with dspy.context(lm=script.lm):
        prediction = program(question=QUESTION)
    return prediction.answer


def demos(program):
    return [[dict(demo) for demo in predictor.demos] for _, predictor in program.named_predictors()]


@pytest.mark.parametrize("name", NAMES)
def test_state_and_whole_program_round_trip(name, bm25, tmp_path):
    program = with_demo(build(name, bm25))
    script = TypedScript(program, garbled=0.0)
    expected = answer(program, script)

    program.save(str(tmp_path / "p.json"))
    fresh = build(name, bm25)
    fresh.load(str(tmp_path / "p.json"))
    assert demos(fresh) == demos(program)
    assert answer(fresh, script) == expected

    program.save(str(tmp_path / "whole"), save_program=True)
    loaded = dspy.load(str(tmp_path / "whole"), allow_pickle=True)
    assert type(loaded).__name__ == name and loaded.config() == program.config()
    assert demos(loaded) == demos(program)
    assert answer(loaded, script) == expected


@pytest.mark.parametrize("rerank", [None, "maxsim", "rala-eq4"])
def test_dense_retriever_pickles_with_index_token_states_and_reranker(rerank, dense, tmp_path):
    from multihop.retrievers.reranked import RerankedRetriever
    from multihop.retrievers.rerankers import make_reranker

    retriever = dense if rerank is None else RerankedRetriever(dense, make_reranker(rerank), n=8, k=3)
    program = build("SingleStepRAG", retriever)
    script = TypedScript(program, garbled=0.0)
    expected, hits = answer(program, script), retriever("river 2 film")

    program.save(str(tmp_path / "whole"), save_program=True)
    loaded = dspy.load(str(tmp_path / "whole"), allow_pickle=True)
    again = loaded.retriever("river 2 film")
    assert again.ids == hits.ids and again.scores == pytest.approx(hits.scores, abs=1e-5)
    assert answer(loaded, script) == expected
    first = loaded.retriever if rerank is None else loaded.retriever.first_stage
    assert first.index.index.ntotal == len(dense.corpus)


def test_multihop_save_leaves_the_program_unchanged(bm25, tmp_path):
    import multihop

    program = with_demo(build("SingleStepRAG", bm25))
    before = demos(program)
    assert "paragraphs" in before[0][0]
    multihop.save(program, tmp_path / "saved")
    assert demos(program) == before  # the extra field is still there in memory
    loaded = multihop.load(tmp_path / "saved", retriever=bm25)
    assert "paragraphs" not in demos(loaded)[0][0]
    assert demos(loaded)[0][0].keys() == before[0][0].keys() - {"paragraphs"}


def test_a_stage_lm_on_a_multihop_engine_pickles_as_its_state(tmp_path):
    """A program whose stage runs on a ``multihop.make_lm`` LM (a local engine, with its weights, lock and KV state)
    pickles with ``save_program=True``: the engine travels as its ``dump_state()`` and is rebuilt on load."""
    import multihop

    from helpers import tiny_causal_lm

    tiny = tiny_causal_lm(tmp_path / "tiny", ["Paris is the capital of France. answer question"] * 5)
    lm = multihop.make_lm(f"local:{tiny}", engine="transformers", max_tokens=16, cache=False)
    program = build("NoRetrieval", None)
    stage = program.named_predictors()[0][0].split(".")[0]
    program.set_stage_lm(stage, lm)
    with dspy.context(adapter=dspy.JSONAdapter()):
        expected = program(question="What is the capital of France?").answer
    program.save(str(tmp_path / "whole"), save_program=True)
    loaded = dspy.load(str(tmp_path / "whole"), allow_pickle=True)
    restored = loaded.named_predictors()[0][1].lm
    assert restored.model == lm.model and type(restored.engine) is type(lm.engine) and restored.engine is not lm.engine
    with dspy.context(adapter=dspy.JSONAdapter()):
        assert loaded(question="What is the capital of France?").answer == expected


def test_a_saved_state_is_trusted_when_every_lm_it_holds_is_multihops():
    from multihop.programs.saved import only_our_engines

    ours = {"model": "openai/qwen", "engine": {"class": "multihop.lm.engines.served:ServedEngine",
                                               "state": {"api_base": "http://127.0.0.1:8000/v1"}}}
    theirs = {"model": "x", "engine": {"class": "evil.module:Engine", "state": {}}}
    redirected = {"_dspy_lm_class": "dspy.clients.lm.LM", "model": "openai/gpt-4o-mini", "api_base": "https://elsewhere"}
    custom = {"_dspy_lm_class": "somepkg:Evil", **ours}
    assert only_our_engines({"reason.predict": {"lm": ours}})
    assert not only_our_engines({"reason.predict": {"lm": ours}, "answer": {"lm": theirs}})
    assert not only_our_engines({"reason.predict": {"lm": ours}, "answer": {"lm": redirected}})  # its own endpoint
    assert not only_our_engines({"reason.predict": {"lm": custom}})
    assert not only_our_engines({"reason.predict": {"lm": None, "demos": []}})  # no stage LM: DSPy's defaults
