"""FAISS indexes by factory string: the old kinds as aliases, any ``faiss.index_factory`` string
trained on a sample, search parameters recorded and settable at query time, memory-mapped loading, and indexes saved
before factory strings still loading with their parameters."""

import json

import faiss
import numpy as np
import pytest

from multihop.retrievers import FaissIndex
from multihop.retrievers.index import checked_factory, factory_string


def clustered(count: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(16, dim))
    vectors = centers[rng.integers(0, 16, count)] + 0.3 * rng.normal(size=(count, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :k]


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)]))


def test_the_old_kinds_are_aliases_of_factory_strings():
    assert factory_string("flat", 1000) == ("Flat", {})
    assert factory_string("ivf", 10_000) == ("IVF256,Flat", {"nprobe": 32})  # 4·√N lists, ≥ 39 vectors a list
    assert factory_string("ivf", 1000) == ("IVF25,Flat", {"nprobe": 25})  # 1000 // 39 lists; nprobe ≤ lists
    assert factory_string("hnsw", 10) == ("HNSW32,Flat", {"efSearch": 512})
    vectors, queries = clustered(2000), clustered(20, seed=1)
    flat = FaissIndex.build(vectors, {}, kind="flat")
    np.testing.assert_array_equal(flat.search(queries, 5)[1], exact_top(vectors, queries, 5))
    assert flat.manifest["factory"] == "Flat" and flat.manifest["kind"] == "flat"


def test_a_factory_string_is_trained_on_a_sample_and_its_search_parameters_are_recorded_and_settable():
    vectors, queries = clustered(4000), clustered(50, seed=1)
    truth = exact_top(vectors, queries, 10)
    index = FaissIndex.build(vectors, {"corpus_sha256": "x"}, kind="IVF64,PQ8x4", nprobe=2, train_size=3000)
    assert index.manifest["factory"] == "IVF64,PQ8x4" and index.manifest["search"] == {"nprobe": 2}  # no efSearch
    assert index.manifest["count"] == 4000 and index.manifest["corpus_sha256"] == "x"
    narrow = recall(index.search(queries, 10)[1], truth)
    index.set_search(nprobe=64)
    wide = recall(index.search(queries, 10)[1], truth)
    assert index.manifest["search"] == {"nprobe": 64} and wide > narrow
    with pytest.raises(ValueError, match="has no search parameter efSearch"):
        index.set_search(efSearch=64)
    hnsw = FaissIndex.build(vectors, {}, kind="HNSW16")
    assert hnsw.manifest["search"] == {"efSearch": 512} and recall(hnsw.search(queries, 10)[1], truth) > 0.9


def test_a_string_faiss_does_not_know_is_one_line():
    with pytest.raises(ValueError, match="neither one of flat, ivf, hnsw nor a FAISS factory string"):
        FaissIndex.build(clustered(100), {}, kind="IVF-nonsense")


def test_a_saved_index_loads_memory_mapped_with_the_same_answers(tmp_path):
    vectors, queries = clustered(3000), clustered(20, seed=2)
    index = FaissIndex.build(vectors, {}, kind="IVF32,Flat", nprobe=4)
    index.save(tmp_path)
    for mmap in (False, True):
        loaded = FaissIndex.load(tmp_path, expect={"count": 3000}, mmap=mmap)
        assert loaded.search_params() == {"nprobe": 4}
        np.testing.assert_array_equal(loaded.search(queries, 5)[1], index.search(queries, 5)[1])


def test_an_index_saved_before_factory_strings_keeps_its_search_parameters(tmp_path):
    vectors, queries = clustered(3000), clustered(20, seed=3)
    legacy = faiss.IndexIVFFlat(faiss.IndexFlatIP(32), 32, 40, faiss.METRIC_INNER_PRODUCT)
    legacy.train(vectors)
    legacy.add(vectors)
    faiss.write_index(legacy, str(tmp_path / "index.faiss"))
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "ivf", "nlist": 40, "nprobe": 40, "count": 3000}))
    loaded = FaissIndex.load(tmp_path)
    assert loaded.search_params() == {"nprobe": 40} and faiss.extract_index_ivf(loaded.index).nprobe == 40
    np.testing.assert_array_equal(loaded.search(queries, 5)[1], exact_top(vectors, queries, 5))  # every list probed


def test_what_a_corpus_cannot_train_is_refused_saying_what_fits():
    with pytest.raises(ValueError, match="IVF with 4096 lists trains on at least 159744 vectors and this corpus gives "
                                         "100; use at most IVF2 for these 100 passages, or --index auto"):
        checked_factory("IVF4096,Flat", 100, 32)
    with pytest.raises(ValueError, match="use no IVF at all"):
        checked_factory("IVF8,Flat", 30, 32)
    with pytest.raises(ValueError, match=r"learns 256 centroids a sub-quantiser from 100 vectors; use at most 6 bits "
                                         r"\(PQ8x6\)"):
        checked_factory("PQ8", 100, 32)
    assert checked_factory("IVF2,Flat", 100, 32).ntotal == 0 and checked_factory("PQ8x6", 100, 32).is_trained is False


def test_a_kind_that_cannot_be_built_is_refused_before_any_passage_is_encoded(musique_dev, monkeypatch, tmp_path):
    from multihop.data.loaders import build_corpus
    from multihop.retrievers import DenseRetriever, IndexSpec, dense

    def no_encoding(*args, **kwargs):
        raise AssertionError("encoded before the index kind was checked")

    monkeypatch.setattr(dense, "encode_corpus", no_encoding)
    corpus = build_corpus(musique_dev[:5])
    for kind, message in (("Garbage", "nor a FAISS factory string"), ("IVF4096,Flat", "use at most IVF")):
        with pytest.raises(ValueError, match=message):
            DenseRetriever.build(corpus, encoder="minilm", kind=kind, work_dir=tmp_path)
        with pytest.raises(ValueError, match=message):
            DenseRetriever.build_cached(corpus, encoder="minilm", kind=kind)
    # the encoding's shards are keyed by what the encoding depends on, not the FAISS kind: a rerun under a kind that
    # fits resumes them
    names = {IndexSpec("mean", (), (), kind).encoding_name("minilm", corpus) for kind in ("Garbage", "flat", "HNSW32")}
    assert len(names) == 1 and "Garbage" not in names.pop()
