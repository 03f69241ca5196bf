"""Token states at full-corpus scale: the stored forms (``--token-states``), one encoding pass for every
index of a corpus, one copy on disk, and a reranker that says when it encodes its candidates."""

import json
import logging

import numpy as np
import pytest

from multihop.data.loaders import build_corpus
from multihop.retrievers import (
    DenseRetriever,
    Encoder,
    IndexSpec,
    MaxSim,
    RaLa,
    RerankedRetriever,
    build_retriever,
    remove_build_files,
)
from multihop.retrievers.index import encode_corpus
from multihop.retrievers.token_cache import META, TokenCache
from multihop.retrievers.token_codecs import Int8Codec, ResidualPQCodec, codec


@pytest.fixture(scope="module")
def corpus(musique_dev):
    return build_corpus(musique_dev[:5])


@pytest.fixture(scope="module")
def encoded(corpus, tmp_path_factory):
    """The corpus encoded once by MiniLM, float32 token states of the last layer and of layer 2."""
    return encode_corpus(corpus, Encoder("minilm"), tmp_path_factory.mktemp("shards"), token_layers=(2,),
                         token_dtype="float32")


def test_int8_codes_round_trip_within_one_step_of_each_vectors_own_scale():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    parts = Int8Codec().encode(vectors)
    assert parts["i8"].dtype == np.int8 and np.abs(parts["i8"]).max() == 127
    np.testing.assert_allclose(parts["scale"], np.abs(vectors).max(axis=1) / 127, rtol=1e-6)
    decoded = Int8Codec().decode(parts)
    assert np.abs(np.linalg.norm(decoded, axis=1) - 1).max() < 1e-5
    assert (decoded * vectors).sum(axis=1).min() > 0.999
    assert Int8Codec().bytes_per_vector(768) == 772
    assert codec("fp16").bytes_per_vector(768) == 1536 and codec("full").bytes_per_vector(768) == 3072


def test_the_pq_quantiser_scales_its_centroids_and_bits_with_the_training_tokens():
    assert ResidualPQCodec.factory(768, 100_000) == "IVF256,PQ32x8"  # √100k ≈ 316 → 2^8
    assert ResidualPQCodec.factory(768, 14_000_000) == "IVF4096,PQ32x8"  # MuSiQue's ~140k passages
    assert ResidualPQCodec.factory(768, 10**11) == "IVF65536,PQ32x8"
    assert ResidualPQCodec.factory(384, 2_000) == "IVF32,PQ32x5"  # 39 vectors a centroid, 2^5·39 ≤ 2,000
    assert ResidualPQCodec.factory(100, 100_000) == "IVF256,PQ25x8"  # 32 does not divide 100: 25 sub-vectors
    assert ResidualPQCodec.training_size(768, 14_000_000) == 39 * 4096  # 39 vectors a centroid
    assert ResidualPQCodec.training_size(768, 100_000) == 65_536 and ResidualPQCodec.training_size(768, 900) == 900


@pytest.mark.parametrize("form, bytes_per_token, min_cosine", [
    ("fp16", 768, 0.9995), ("int8", 388, 0.995),
    pytest.param("pq", 34, 0.3, marks=pytest.mark.slow)])  # trains a PQ quantiser: ~20 s
def test_each_form_round_trips_the_token_states_of_a_real_corpus(encoded, tmp_path, form, bytes_per_token,
                                                                  min_cosine):
    full = TokenCache.write(tmp_path / "full", encoded.shards, encoded.num_layers, (2,), form="full")
    cache = TokenCache.write(tmp_path / form, encoded.shards, encoded.num_layers, (2,), form=form)
    cache = TokenCache(tmp_path / form)  # as loaded from disk
    assert cache.form == form and cache.bytes_per_token() <= bytes_per_token
    rows = list(range(0, len(cache), 7))
    (ref, ref_cls, ref_layer), (got, got_cls, got_layer) = full.get(rows, (2,)), cache.get(rows, (2,))
    for expected, decoded in ((ref, got), (ref_layer[2], got_layer[2])):
        cosines = np.concatenate([(a * b).sum(axis=1) for a, b in zip(expected, decoded, strict=True)])
        assert cosines.min() >= min_cosine
        assert cosines.mean() >= {"fp16": 0.9999, "int8": 0.9995, "pq": 0.8}[form]
    np.testing.assert_allclose(got_cls, ref_cls, atol={"fp16": 2e-3, "int8": 1e-2, "pq": 1e-2}[form])  # [CLS] states


@pytest.mark.slow
def test_compact_forms_rank_a_real_question_s_candidates_as_full_does(encoded, corpus, musique_dev, tmp_path):
    encoder = Encoder("minilm")
    retrievers = {}
    for form in ("full", "int8", "pq"):
        dense = DenseRetriever.from_encoding(corpus, encoder, encoded, IndexSpec(token_layers=(), token_states=form),
                                             tmp_path / form)
        retrievers[form] = RerankedRetriever(dense, RaLa(buckets=2), n=20, k=5)
    agree = {"int8": [], "pq": []}
    for example in musique_dev[:5]:
        ref = retrievers["full"](example.question)
        for form in agree:
            hits = retrievers[form](example.question)
            agree[form].append(len(set(hits.ids) & set(ref.ids)) / 5)
            if form == "int8":
                assert hits.ids[0] == ref.ids[0]
                np.testing.assert_allclose(hits.scores, ref.scores, atol=5e-3)
    assert np.mean(agree["int8"]) >= 0.95, agree  # measured 0.96: one near-tie at rank 5 swapped
    assert np.mean(agree["pq"]) >= 0.6, agree


@pytest.mark.slow
def test_none_encodes_the_candidates_and_equals_full_and_says_so_once(encoded, corpus, musique_dev, tmp_path,
                                                                     caplog):
    encoder = Encoder("minilm")
    full = DenseRetriever.from_encoding(corpus, encoder, encoded, IndexSpec(token_layers=(), token_states="full"),
                                        tmp_path / "full")
    bare = DenseRetriever.from_encoding(corpus, encoder, encoded, IndexSpec(token_layers=(), token_states="none"),
                                        tmp_path / "none")
    assert bare.tokens is None and bare.index.manifest["token_states"] == "none"
    for reranker in (RaLa(buckets=2), MaxSim()):
        with caplog.at_level(logging.WARNING, logger="multihop.retrievers.late_interaction"):
            for example in musique_dev[:3]:
                ref = RerankedRetriever(full, reranker, n=10, k=5)(example.question)
                got = RerankedRetriever(bare, reranker, n=10, k=5)(example.question)
                assert got.ids == ref.ids
                np.testing.assert_allclose(got.scores, ref.scores, atol=1e-5)
    told = [r for r in caplog.records if "keeps no token states" in r.getMessage()]
    assert len(told) == 1 and "--token-states" in told[0].getMessage()


@pytest.mark.slow
def test_an_index_keeps_only_the_cls_layers_its_reranker_reads(corpus, musique_dev, tmp_path, monkeypatch):
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    retriever = build_retriever(corpus, encoder="minilm", rerank="rala-eq4", token_states="int8",
                                reranker_options={"buckets": 2}, n=10)
    layers = retriever.reranker.candidate_layers(retriever.first_stage.encoder.num_layers)
    tokens = retriever.first_stage.tokens
    assert tokens.form == "int8" and tokens.cls_layers == tuple(sorted(layers)) and tokens.layers == ()
    retriever.save(tmp_path / "idx")
    loaded = RerankedRetriever.load(tmp_path / "idx")
    encoded = []
    monkeypatch.setattr(Encoder, "states", lambda self, texts, layers=(): encoded.append(len(texts)) or
                        Encoder._states_batch(self, list(texts), tuple(layers)))
    assert loaded(musique_dev[0].question).ids == retriever(musique_dev[0].question).ids
    assert encoded == [1, 1]  # each query alone: the candidates' states came from the cache
    other = RerankedRetriever(loaded.first_stage, RaLa(buckets=4), n=10, k=5)  # other layers: encoded, not misread
    encoded.clear()
    other(musique_dev[0].question)
    assert encoded == [1, 10]


def test_one_encoding_pass_equals_the_two_old_passes_bit_for_bit(corpus):
    texts = corpus.texts()[:24]
    one = Encoder("minilm").passage_states(texts, ())
    np.testing.assert_array_equal(one.pooled_by("mean"), Encoder("minilm").encode(texts))
    old_cls = Encoder("minilm", pooling="cls").states(texts)
    np.testing.assert_array_equal(one.pooled_by("cls"), old_cls.pooled)
    np.testing.assert_array_equal(one.cls, old_cls.cls)
    for a, b in zip(one.tokens, old_cls.tokens, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_build_cached_many_encodes_once_and_keeps_one_copy(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path))
    calls = []
    real = Encoder.passage_states
    monkeypatch.setattr(Encoder, "passage_states", lambda self, texts, layers=None: calls.append(len(texts)) or
                        real(self, texts, layers))
    specs = [IndexSpec(), IndexSpec("cls", token_layers=(), special_tokens=("[Question]",), token_states="int8")]
    plain, marked = DenseRetriever.build_cached_many(corpus, "minilm", specs)
    assert sum(calls) == len(corpus)  # every passage encoded once for both indexes
    assert not [path for path in (tmp_path / "shards").iterdir() if not path.name.startswith(".")]  # removed
    assert [path.relative_to(tmp_path) for path in tmp_path.rglob(META)] == [marked.relative_to(tmp_path) / "tokens" /
                                                                             META]
    assert not (plain / "tokens").exists()
    dense, cls = DenseRetriever.load(plain), DenseRetriever.load(marked)
    assert (dense.encoder.pooling, cls.encoder.pooling, cls.encoder.special_tokens) == ("mean", "cls", ("[Question]",))
    assert cls.tokens.form == "int8" and len(cls.tokens) == len(corpus)
    query = corpus[3].render()
    assert dense(query, k=1).ids == [corpus[3].id] and cls(query, k=1).ids == [corpus[3].id]
    calls.clear()
    assert DenseRetriever.build_cached_many(corpus, "minilm", specs) == [plain, marked] and calls == []


def test_a_cache_written_before_the_forms_loads_as_fp16_with_every_cls_layer(tmp_path):
    old = tmp_path / "old"  # the layout written before the forms, by hand: float16 arrays, every [CLS] layer
    old.mkdir()
    rng = np.random.default_rng(0)
    lengths, dim, layers = [3, 5], 8, 2
    last = rng.normal(size=(8, dim)).astype(np.float16)
    cls = rng.normal(size=(2, layers + 1, dim)).astype(np.float16)
    np.save(old / "offsets.npy", np.array([0, 3, 8], dtype=np.int64))
    np.save(old / "last.npy", last)
    np.save(old / "cls.npy", cls)
    (old / "last.npy").rename(old / "last.f16")
    (old / "cls.npy").rename(old / "cls.f16")
    (old / META).write_text(json.dumps({"count": 2, "dimension": dim, "num_layers": layers, "layers": [],
                                        "tokens": sum(lengths)}))
    cache = TokenCache(old)
    assert cache.form == "fp16" and cache.cls_layers == (0, 1, 2) and len(cache) == 2
    tokens, states, _ = cache.get([1])
    np.testing.assert_array_equal(tokens[0], last[3:].astype(np.float32))
    np.testing.assert_array_equal(states[0], cls[1].astype(np.float32))


@pytest.mark.slow
def test_a_build_links_its_token_cache_into_the_saved_index_and_then_removes_its_shards(corpus, tmp_path,
                                                                                       monkeypatch):
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    retriever = build_retriever(corpus, encoder="minilm", rerank="maxsim", token_states="int8")
    retriever.save(tmp_path / "idx")
    saved = tmp_path / "idx" / "first_stage" / "tokens" / "last.i8"
    assert saved.stat().st_nlink == 2  # one copy on disk: the build's file and the saved one are the same
    remove_build_files(retriever)
    assert saved.stat().st_nlink == 1
    assert not [path for path in (tmp_path / "home" / "shards").iterdir() if not path.name.startswith(".")]
    loaded = RerankedRetriever.load(tmp_path / "idx")
    assert loaded.first_stage.tokens.form == "int8" and loaded(corpus[2].render()).ids[0] == corpus[2].id


def test_an_unknown_form_is_one_clear_error(corpus):
    with pytest.raises(ValueError, match=r"unknown token-state form 'fp8'; choose one of full, fp16, int8, pq, plaid, "
                       r"none \(plaid also as plaid:BITS or plaid:BITS:DIM\)$"):
        build_retriever(corpus, encoder="minilm", rerank="maxsim", token_states="fp8")


@pytest.mark.slow  # trains a plaid codec on the corpus's ~10k tokens: seconds
def test_index_describe_shows_a_plaid_caches_projection_bits_and_centroids(encoded, corpus, tmp_path):
    from typer.testing import CliRunner

    from multihop.cli import app

    spec = IndexSpec(token_layers=(), token_states="plaid:4:64", cls_layers=(3, 6))
    dense = DenseRetriever.from_encoding(corpus, Encoder("minilm"), encoded, spec, tmp_path / "tokens")
    RerankedRetriever(dense, MaxSim(), n=4, k=2).save(tmp_path / "idx")
    shown = CliRunner().invoke(app, ["index", "describe", str(tmp_path / "idx")])
    assert shown.exit_code == 0, shown.output
    described = json.loads(shown.output)
    assert described["token_states"] == "plaid:4:64" and described["reranker"] == "maxsim"
    cache = described["token_cache"]
    assert cache["form"] == "plaid:4:64" and cache["bytes_per_token"] == 2 + 32 and cache["cls_form"] == "pca-int8:64"
    assert cache["codecs"]["last"]["projection"] == {"kind": "pca", "from": 384, "to": 64}
    assert cache["codecs"]["last"]["bits"] == 4 and cache["codecs"]["last"]["centroids"] == len(
        dense.tokens.codecs["last"].centroids)
    assert CliRunner().invoke(app, ["index", "describe", str(tmp_path / "nothing")]).exit_code == 2
