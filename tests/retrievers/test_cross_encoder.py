"""The cross-encoder reranker (``rerank="cross-encoder:MODEL"``) on a tiny sequence-pair classifier built here (a
one-layer BERT over a character vocabulary): it orders candidates by the model's own scores, is written with its model
in one place, rebuilds from its config (a Hub model at the commit it resolved to, through a fake hub), and reranks
inside a program (a traced step), a saved program and a saved retriever alike."""

from __future__ import annotations

import threading

import dspy
import huggingface_hub
import pytest
from dspy.utils.dummies import DummyLM

from multihop.data.corpus import Corpus, Passage
from multihop.lm.models import HubModelError
from multihop.retrievers import (
    BM25Retriever,
    CrossEncoderReranker,
    RerankedRetriever,
    build_retriever,
    checked_reranker,
    load_reranker,
    load_retriever,
    make_reranker,
    parse_rerank,
)

from helpers import tiny_cross_encoder as tiny

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUB_ID = "org/tiny-reranker"
QUERY = "which river runs through the city?"


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    return tiny(tmp_path_factory.mktemp("cross-encoder") / "model")


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus([Passage.make(f"Title {i}", f"Passage {i}: the river {i % 3} runs by city {i}.") for i in range(8)])


def candidates(corpus: Corpus, n: int = 6) -> dspy.Prediction:
    passages = [corpus[i] for i in range(n)]
    return dspy.Prediction(passages=[p.render() for p in passages], ids=[p.id for p in passages])


def model_scores(folder, texts: list[str]) -> list[float]:
    import torch
    from sentence_transformers import CrossEncoder

    scores = CrossEncoder(str(folder)).predict([(QUERY, text) for text in texts], activation_fn=torch.nn.Identity())
    return [float(score) for score in scores]


def test_reranking_orders_candidates_by_the_models_scores(tiny_cross_encoder, corpus):
    found = candidates(corpus)
    hits = CrossEncoderReranker(str(tiny_cross_encoder), batch_size=2).rerank(QUERY, found, k=4)
    theirs = model_scores(tiny_cross_encoder, list(found.passages))
    best = sorted(range(len(theirs)), key=lambda i: -theirs[i])[:4]
    assert hits.ids == [found.ids[i] for i in best]
    assert hits.scores == pytest.approx([theirs[i] for i in best], abs=1e-5)
    assert hits.candidates == found.ids and len(set(hits.scores)) == 4  # the logits: no tie at a sigmoid's 1.0


def test_threads_share_one_model_and_get_the_same_ranking(tiny_cross_encoder, corpus):
    reranker = make_reranker(f"cross-encoder:{tiny_cross_encoder}")
    expected = reranker.rerank(QUERY, candidates(corpus), k=3).ids
    got = []
    threads = [threading.Thread(target=lambda: got.append(reranker.rerank(QUERY, candidates(corpus), k=3).ids))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == [expected] * 4
    assert make_reranker(f"cross-encoder:{tiny_cross_encoder}").loaded()[0] is reranker.loaded()[0]


def test_a_cross_encoder_is_named_with_its_model_and_rebuilds_from_its_config(tiny_cross_encoder, monkeypatch):
    name = f"cross-encoder:{tiny_cross_encoder}"
    assert parse_rerank(name) == ("cross-encoder", {"model": str(tiny_cross_encoder)})
    assert parse_rerank("maxsim") == ("maxsim", {})
    assert checked_reranker(name) == name
    with pytest.raises(ValueError, match=r"needs a model .*cross-encoder:BAAI/bge-reranker-v2-m3") as caught:
        checked_reranker("cross-encoder")
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="names no model"):
        checked_reranker("cross-encoder: ")
    with pytest.raises(ValueError, match="needs a model"):
        make_reranker("cross-encoder")
    with pytest.raises(ValueError, match="unknown rerank 'bge'; choose one of .*cross-encoder:MODEL"):
        checked_reranker("bge")
    # what a first stage hands every reranker (its encoder, the query markers) means nothing to a cross-encoder
    reranker = make_reranker(name, encoder="minilm", special_tokens=["<FILL>"], max_length=64)
    assert reranker.config() == {"reranker": "cross-encoder", "model": str(tiny_cross_encoder), "revision": None,
                                 "max_length": 64, "batch_size": 32}
    assert load_reranker(reranker.config()).config() == reranker.config()
    monkeypatch.chdir(tiny_cross_encoder.parent)  # a folder given relative is recorded whole: loads from anywhere
    assert make_reranker(f"cross-encoder:{tiny_cross_encoder.name}").config()["model"] == str(tiny_cross_encoder)
    with pytest.raises(FileNotFoundError, match="neither a model folder"):
        make_reranker(f"cross-encoder:{tiny_cross_encoder.parent / 'absent'}")


def test_a_hub_cross_encoder_records_the_commit_it_resolved_to_and_loads_it_again(tiny_cross_encoder, tmp_path,
                                                                                 monkeypatch):
    calls = []

    def snapshot_download(repo_id, revision=None, **kwargs):  # a fake hub: one repository, in a cache laid out so
        calls.append((repo_id, revision))
        if repo_id != HUB_ID:
            raise huggingface_hub.errors.LocalEntryNotFoundError(f"{repo_id} is not cached")
        snapshot = tmp_path / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots" / (revision or COMMIT)
        if not snapshot.exists():
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            snapshot.symlink_to(tiny_cross_encoder, target_is_directory=True)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.chdir(tmp_path)  # where no folder org/tiny-reranker exists
    reranker = make_reranker(f"cross-encoder:{HUB_ID}")
    assert reranker.config()["model"] == HUB_ID and reranker.config()["revision"] == COMMIT
    again = load_reranker(reranker.config())
    assert calls[-1] == (HUB_ID, COMMIT) and again.config() == reranker.config()
    assert make_reranker(f"cross-encoder:{HUB_ID}@{COMMIT}").config()["model"] == HUB_ID
    with pytest.raises(HubModelError, match="cannot be reached"):
        make_reranker("cross-encoder:org/absent")


def test_single_step_rag_reranks_with_a_cross_encoder_traced_and_saved(tiny_cross_encoder, corpus, tmp_path):
    import multihop
    from multihop.programs import SingleStepRAG

    bm25 = BM25Retriever(corpus, k=6)
    rerank = f"cross-encoder:{tiny_cross_encoder}"
    program = SingleStepRAG(retriever=bm25, rerank=rerank, n=6, k=2)
    dspy.configure(lm=DummyLM([{"answer": "river 1"}] * 2))
    prediction = program(question=QUERY)
    first = bm25(QUERY, k=6)
    expected = CrossEncoderReranker(str(tiny_cross_encoder)).rerank(QUERY, first, k=2).ids
    assert prediction.answer == "river 1" and prediction.passage_ids == expected
    ranked = [record for record in prediction.stage_trace if record["kind"] == "rerank"]
    assert len(ranked) == 1 and ranked[0]["outputs"]["ids"] == expected
    assert ranked[0]["inputs"]["candidates"] == first.ids

    multihop.save(program, tmp_path / "saved")
    loaded = multihop.load(tmp_path / "saved", retriever=bm25)
    assert loaded.config()["rerank"] == rerank
    assert loaded(question=QUERY).passage_ids == expected


def test_a_saved_retriever_keeps_its_cross_encoder(tiny_cross_encoder, corpus, tmp_path):
    retriever = build_retriever(corpus, first_stage="bm25", encoder="minilm",
                                rerank=f"cross-encoder:{tiny_cross_encoder}", n=6, k=3)
    assert isinstance(retriever, RerankedRetriever)
    hits = retriever(QUERY)
    retriever.save(tmp_path / "index")
    loaded = load_retriever(tmp_path / "index")
    assert loaded.reranker.config() == retriever.reranker.config()
    again = loaded(QUERY)
    assert again.ids == hits.ids and again.scores == pytest.approx(hits.scores, abs=1e-5)


def test_every_programs_rerank_switch_builds_the_cross_encoder_over_its_first_stage(tiny_cross_encoder, corpus):
    from multihop.programs import PROGRAMS

    bm25 = BM25Retriever(corpus, k=6)
    names = [method.name for method in PROGRAMS.declared() if "rerank" in PROGRAMS[method.name].defaults()]
    assert {"CoopRAG", "DualRAG", "SingleStepRAG", "IRCoT"} <= set(names)
    for name in names:
        search = PROGRAMS[name](retriever=bm25, rerank=f"cross-encoder:{tiny_cross_encoder}").searcher()
        assert isinstance(search.reranker, CrossEncoderReranker) and search.first_stage is bm25, name
