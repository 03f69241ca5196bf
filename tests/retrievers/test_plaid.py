"""PLAID's search as a first stage (:mod:`multihop.retrievers.plaid`): its inverted lists, its four stages against an
exhaustive MaxSim, its index built, saved, loaded and refused with another encoder, and a program over it end to end
(a tiny ColBERT checkpoint, ``multihop index build --first-stage plaid``, SingleStepRAG, multihop.save/load)."""

import numpy as np
import pytest

from multihop.data.corpus import Corpus, Passage
from multihop.retrievers import IndexMismatchError, describe_index, load_retriever
from multihop.retrievers.colbert_encoder import ColBERTEncoder
from multihop.retrievers.plaid import (
    InvertedLists,
    PlaidRetriever,
    PlaidSettings,
    exhaustive_maxsim,
    maxsim_by_passage,
    plaid_search,
    token_rows,
)

from helpers import PASSAGES, tiny, tiny_colbert

TOPICS = ["volcano", "violin", "glacier", "penguin", "saffron", "lighthouse", "chess", "comet", "bamboo", "tulip"]
CORPUS = Corpus([*PASSAGES, *(Passage(f"t{i}", topic.title(), f"An article about the {topic}, and {topic}s.")
                              for i, topic in enumerate(TOPICS))])
QUERIES = ["Who directed Inception?", "Which river flows through London?", "the comet", "a violin and a tulip"]
EVERYTHING = PlaidSettings(nprobe=1 << 20, centroid_threshold=-np.inf, ndocs=1 << 20)


def test_the_settings_default_by_k_as_the_authors_release_sets_them():
    assert PlaidSettings().for_k(10).as_tuple() == (1, 0.5, 256)
    assert PlaidSettings().for_k(100).as_tuple() == (2, 0.45, 1024)
    assert PlaidSettings().for_k(1000).as_tuple() == (4, 0.4, 4096)
    assert PlaidSettings(nprobe=8).for_k(5).as_tuple() == (8, 0.5, 256)


@pytest.mark.parametrize("chunk", [3, 1 << 22])
def test_the_inverted_lists_hold_each_passage_of_a_centroid_once_in_order(chunk, monkeypatch):
    monkeypatch.setattr("multihop.retrievers.plaid.CHUNK_TOKENS", chunk)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 6, size=12)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    codes = rng.integers(0, 5, size=int(offsets[-1])).astype(np.uint16)
    lists = InvertedLists.build(codes, offsets, 6)
    for cell in range(6):
        expected = [p for p in range(12) if cell in codes[offsets[p] : offsets[p + 1]]]
        assert lists.pids[lists.starts[cell] : lists.starts[cell + 1]].tolist() == expected
    assert lists.lookup(np.array([5, 5])).tolist() == []  # a centroid no token has
    rows, counts = token_rows(offsets, np.array([3, 1]))
    assert rows.tolist() == [*range(offsets[3], offsets[4]), *range(offsets[1], offsets[2])]
    assert counts.tolist() == [lengths[3], lengths[1]]


def test_the_four_stages_at_generous_settings_are_an_exhaustive_maxsim():
    rng = np.random.default_rng(1)
    centroids = rng.normal(size=(8, 6)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    lengths = rng.integers(2, 7, size=40)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    codes = rng.integers(0, 8, size=int(offsets[-1]))
    vectors = centroids[codes] + 0.3 * rng.normal(size=(len(codes), 6)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    lists = InvertedLists.build(codes, offsets, 8)
    query = rng.normal(size=(5, 6)).astype(np.float32)
    exhaustive = maxsim_by_passage(vectors @ query.T, lengths)
    rows, scores = plaid_search(query, centroids, codes, offsets, lists, lambda r: vectors[r], 10, EVERYTHING)
    assert rows.tolist() == np.argsort(-exhaustive, kind="stable")[:10].tolist()
    np.testing.assert_allclose(scores, np.sort(exhaustive)[::-1][:10], rtol=1e-6)
    pruned, _ = plaid_search(query, centroids, codes, offsets, lists, lambda r: vectors[r], 10,
                             PlaidSettings(nprobe=1, centroid_threshold=0.5, ndocs=12))
    assert 0 < len(pruned) <= 10 and set(pruned) <= set(range(40))  # PLAID's approximation: a top of its own


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    folder = tmp_path_factory.mktemp("colbert")
    return tiny_colbert(folder / "one", seed=0), tiny_colbert(folder / "other", seed=1)


@pytest.fixture(scope="module")
def colbert_index(checkpoints, tmp_path_factory):
    built = PlaidRetriever.build(CORPUS, str(checkpoints[0]), k=3, work_dir=tmp_path_factory.mktemp("shards"),
                                 progress=False)
    folder = tmp_path_factory.mktemp("indexes") / "plaid"
    built.save(folder)
    return built, folder


@pytest.mark.slow  # a tiny BERT encodes the corpus and the codec trains: seconds on 2 cores
def test_a_colbert_index_at_generous_settings_ranks_as_exhaustive_maxsim_over_its_states(colbert_index):
    retriever, _ = colbert_index
    assert isinstance(retriever.encoder, ColBERTEncoder) and retriever.tokens.form.startswith("plaid")
    retriever.set_search(**EVERYTHING.record())
    try:
        for query, hits in zip(QUERIES, retriever(QUERIES, k=len(CORPUS)), strict=True):
            projected = retriever.codec.project(retriever.encoder.states([query]).tokens[0])
            rows, scores = exhaustive_maxsim(projected, retriever.tokens, len(CORPUS))
            assert hits.ids == [CORPUS[int(row)].id for row in rows]
            np.testing.assert_allclose(hits.scores, scores, rtol=1e-5)
    finally:
        retriever.set_search(**PlaidSettings().record())


@pytest.mark.slow  # a tiny BERT encodes the corpus and the codec trains: seconds on 2 cores
def test_a_saved_index_loads_the_same_and_refuses_another_encoder(colbert_index, checkpoints):
    retriever, folder = colbert_index
    loaded = load_retriever(folder)
    assert isinstance(loaded, PlaidRetriever) and loaded.k == 3
    assert loaded(QUERIES).__class__ is list
    assert [hits.ids for hits in loaded(QUERIES)] == [hits.ids for hits in retriever(QUERIES)]
    described = describe_index(folder)
    assert described["first_stage"] == "plaid" and described["encoder"] == str(checkpoints[0])
    assert described["token_states"].startswith("plaid")
    with pytest.raises(IndexMismatchError, match="not .*other"):
        PlaidRetriever.load(folder, encoder=str(checkpoints[1]))


@pytest.mark.slow  # a tiny BERT encodes the corpus and the codec trains: seconds on 2 cores
def test_a_sentence_encoders_last_layer_serves_as_well(tmp_path):
    retriever = PlaidRetriever.build(CORPUS, tiny(tmp_path, 1), k=3, token_states="plaid:4:64",
                                     work_dir=tmp_path / "shards", settings=EVERYTHING, progress=False)
    assert not isinstance(retriever.encoder, ColBERTEncoder)
    projected = retriever.codec.project(retriever.encoder.states([QUERIES[0]]).tokens[0])
    rows, _ = exhaustive_maxsim(projected, retriever.tokens, 3)
    assert retriever(QUERIES[0]).ids == [CORPUS[int(row)].id for row in rows]


def test_a_plaid_index_refuses_another_token_form():
    with pytest.raises(ValueError, match="plaid form, not 'int8'"):
        PlaidRetriever.build(CORPUS, "mpnet", token_states="int8")


@pytest.mark.slow  # a tiny ColBERT indexes the corpus through the command line, twice through program_index
def test_single_step_rag_over_a_plaid_index_answers_the_same_after_save_and_load(checkpoints, tmp_path, monkeypatch):
    import dspy

    import multihop
    from multihop.cli import app
    from multihop.cli.errors import run
    from multihop.experiments.program_indexes import program_retriever
    from multihop.programs import SingleStepRAG

    from helpers import scripted_lm

    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "corpus.jsonl"
    CORPUS.save(corpus)
    index = tmp_path / "index"
    argv = ["index", "build", str(corpus), "--out", str(index), "--first-stage", "plaid", "--encoder",
            str(checkpoints[0]), "--token-states", "plaid:2", "--k", "3", "--nprobe", "2"]
    assert run(app, argv) == 0
    retriever = load_retriever(index)
    assert isinstance(retriever, PlaidRetriever) and retriever.settings.nprobe == 2
    lm, engine = scripted_lm(lambda prompt: {"answer": "Christopher Nolan"})
    dspy.configure(lm=lm)
    question = "Who directed Inception?"
    program = SingleStepRAG(retriever=retriever, k=3)
    prediction = program(question=question)
    expected = retriever(question, k=3).ids
    assert prediction.answer == "Christopher Nolan" and prediction.passage_ids == expected and len(expected) == 3
    retrieval = prediction.stage_trace[0]
    assert retrieval["stage"] == "retriever" and retrieval["outputs"]["ids"] == expected
    assert CORPUS[CORPUS.row(expected[0])].render() in engine.requests[0]
    multihop.save(program, tmp_path / "program", retriever=str(index))
    loaded = multihop.load(tmp_path / "program")
    assert isinstance(loaded.retriever, PlaidRetriever)
    again = loaded(question=question)
    assert (again.answer, again.passage_ids) == (prediction.answer, prediction.passage_ids)
    cached, folder = program_retriever("SingleStepRAG", corpus, str(checkpoints[0]), first_stage="plaid",
                                       progress=False)
    assert isinstance(cached, PlaidRetriever) and cached.tokens.form == retriever.tokens.form
    assert program_retriever("SingleStepRAG", corpus, str(checkpoints[0]), first_stage="plaid",
                             progress=False)[1] == folder
