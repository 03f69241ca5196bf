import json

import numpy as np
import pytest

from multihop.corpus import Corpus, Passage
from multihop.data import build_corpus
from multihop.retrievers import DenseRetriever, Encoder, IndexMismatchError
from multihop.retrievers.index import encode_corpus


def test_gold_passages_rank_in_the_top5(small_retriever, musique_dev):
    hits = 0
    for example in musique_dev[:5]:
        prediction = small_retriever(example.question, k=5)
        assert len(prediction.ids) == len(prediction.passages) == len(prediction.scores) == 5
        assert prediction.scores == sorted(prediction.scores, reverse=True)
        hits += bool(set(prediction.ids) & set(example.gold_passage_ids))
    assert hits >= 4  # measured: a gold passage is in the top-5 of all but at most one of these raw 2-4 hop questions


def test_exact_passage_text_is_the_top_hit(small_retriever):
    passage = small_retriever.corpus[17]
    assert small_retriever(passage.render(), k=1).ids == [passage.id]


def test_save_load_round_trip_and_mismatch_refused(small_retriever, musique_dev, tmp_path):
    small_retriever.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["count"] == len(small_retriever.corpus) and manifest["encoder"] == "minilm"
    loaded = DenseRetriever.load(tmp_path / "idx")
    question = musique_dev[0].question
    assert loaded(question).ids == small_retriever(question).ids
    other = build_corpus(musique_dev[5:7])
    with pytest.raises(IndexMismatchError, match="corpus_sha256"):
        DenseRetriever.load(tmp_path / "idx", corpus=other)


def test_interrupted_encoding_resumes_from_its_shards(tmp_path):
    corpus = Corpus([Passage.make(f"T{i}", f"passage number {i} about topic {i % 3}") for i in range(10)])
    encoder = Encoder("minilm")
    calls, crash = [], [True]
    real = encoder.encode

    def failing_encode(texts, progress=False):
        calls.append(len(texts))
        if len(calls) == 2 and crash[0]:
            raise RuntimeError("killed mid-build")
        return real(texts)

    encoder.encode = failing_encode
    with pytest.raises(RuntimeError, match="killed"):
        encode_corpus(corpus, encoder, tmp_path, shard_size=4)
    assert len(list(tmp_path.glob("shard-*.npy"))) == 1
    calls.clear()
    crash[0] = False
    vectors = encode_corpus(corpus, encoder, tmp_path, shard_size=4)
    assert calls == [4, 2]  # the first shard was not encoded again
    assert vectors.shape == (10, 384)
    np.testing.assert_allclose(vectors, real(corpus.texts()), atol=1e-5)


def test_empty_corpus_and_empty_query_are_clear_errors(small_retriever):
    with pytest.raises(ValueError, match="empty corpus"):
        DenseRetriever.build(Corpus(), encoder="minilm")
    with pytest.raises(ValueError, match="non-empty"):
        small_retriever("  ")


def test_build_cached_builds_once(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path))
    corpus = Corpus([Passage.make(f"T{i}", f"cached passage {i}") for i in range(3)])
    folder = DenseRetriever.build_cached(corpus, encoder="minilm")
    stamp = (folder / "index.faiss").stat().st_mtime_ns
    assert DenseRetriever.build_cached(corpus, encoder="minilm") == folder
    assert (folder / "index.faiss").stat().st_mtime_ns == stamp
    assert DenseRetriever.load(folder)("cached passage 2", k=1).ids == [corpus[2].id]
