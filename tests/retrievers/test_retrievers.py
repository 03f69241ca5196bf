import json

import numpy as np
import pytest
import torch

from multihop.data.corpus import Corpus, Passage
from multihop.data.loaders import build_corpus
from multihop.retrievers import (
    BM25Retriever,
    DenseRetriever,
    Encoder,
    FaissIndex,
    Hits,
    HybridRetriever,
    IndexMismatchError,
    MaxSim,
    RaLa,
    RerankedRetriever,
    RetrieverModule,
    load_retriever,
)
from multihop.retrievers.encoder import resolve_encoder
from multihop.retrievers.index import encode_corpus
from multihop.retrievers.module import RETRIEVER_KINDS
from multihop.signatures.cooprag import SPECIAL_TOKENS


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
    real = encoder.passage_states

    def failing_encode(texts, token_layers=None):
        calls.append(len(texts))
        if len(calls) == 2 and crash[0]:
            raise RuntimeError("killed mid-build")
        return real(texts, token_layers)

    encoder.passage_states = failing_encode
    with pytest.raises(RuntimeError, match="killed"):
        encode_corpus(corpus, encoder, tmp_path, shard_size=4)
    assert len(list(tmp_path.glob("shard-*.npz"))) == 1
    calls.clear()
    crash[0] = False
    encoded = encode_corpus(corpus, encoder, tmp_path, shard_size=4)
    assert len(encoded.shards) == 3
    assert calls == [4, 2]  # the first shard was not encoded again
    vectors = encoded.vectors("mean")
    assert vectors.shape == (10, 384)
    np.testing.assert_allclose(vectors, encoder.encode(corpus.texts()), atol=1e-5)


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


def test_bm25_hybrid_and_dense_find_both_gold_passages_of_a_known_question(small_retriever, musique_dev):
    example = musique_dev[1]  # Common Sense / The Age of Reason: both hops share words with the question
    bm25 = BM25Retriever(small_retriever.corpus)
    hybrid = HybridRetriever(small_retriever, bm25)
    for retriever in (small_retriever, bm25, hybrid):
        prediction = retriever(example.question, k=5)
        assert set(example.gold_passage_ids) <= set(prediction.ids), type(retriever).__name__
        assert prediction.scores == sorted(prediction.scores, reverse=True)


def test_bm25_and_hybrid_save_load_and_refuse_another_corpus(small_retriever, musique_dev, tmp_path):
    bm25 = BM25Retriever(small_retriever.corpus)
    hybrid = HybridRetriever(small_retriever, bm25)
    question = musique_dev[3].question
    for name, retriever in (("bm25", bm25), ("hybrid", hybrid)):
        retriever.save(tmp_path / name)
        loaded = load_retriever(tmp_path / name)
        assert type(loaded) is type(retriever) and loaded(question).ids == retriever(question).ids
    with pytest.raises(IndexMismatchError, match="corpus_sha256"):
        BM25Retriever.load(tmp_path / "bm25", corpus=build_corpus(musique_dev[5:6]))
    with pytest.raises(IndexMismatchError, match="same corpus"):
        HybridRetriever(small_retriever, BM25Retriever(build_corpus(musique_dev[5:6])))
    assert bm25("the of and").ids == []  # stop words only: nothing matches
    with pytest.raises(ValueError, match="non-empty"):
        bm25([])


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_indexes_agree_with_exact_search(kind):
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(20, 32))
    vectors = (centers[rng.integers(0, 20, 4000)] + 0.3 * rng.normal(size=(4000, 32))).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    exact = FaissIndex.build(vectors, {}, kind="flat")
    approx = FaissIndex.build(vectors, {}, kind=kind)
    assert approx.kind == kind and approx.manifest["count"] == 4000
    _, truth = exact.search(vectors[:50], 10)
    _, found = approx.search(vectors[:50], 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, found, strict=True)])
    assert recall > 0.9
    assert FaissIndex.build(vectors[:10], {}, kind="auto").kind == "flat"
    with pytest.raises(ValueError, match="neither one of flat, ivf, hnsw nor a FAISS factory string"):
        FaissIndex.build(vectors, {}, kind="lsh")


def test_ivf_index_round_trips_with_its_search_settings(tmp_path):
    vectors = np.random.default_rng(1).normal(size=(2000, 16)).astype(np.float32)
    built = FaissIndex.build(vectors, {"corpus_sha256": "x"}, kind="ivf", nprobe=4)
    built.save(tmp_path)
    loaded = FaissIndex.load(tmp_path, expect={"corpus_sha256": "x"})
    assert loaded.kind == "ivf" and loaded.search_params() == {"nprobe": 4}
    np.testing.assert_array_equal(loaded.search(vectors[:5], 3)[1], built.search(vectors[:5], 3)[1])


def test_encoder_states_match_its_embeddings():
    encoder = Encoder("minilm")
    texts = ["Who directed the film that won the prize?", "word " * 600, "x"]
    states = encoder.states(texts, token_layers=(2,))
    np.testing.assert_allclose(states.pooled, encoder.encode(texts), atol=1e-5)
    assert encoder.truncated == 2  # once by states(), once by encode(): the 600-word text
    assert states.tokens[1].shape == (512, 384) and states.layer_tokens[2][2].shape == states.tokens[2].shape
    assert states.cls.shape == (3, encoder.num_layers + 1, 384)
    np.testing.assert_allclose(states.cls[:, -1], [t[0] for t in states.tokens], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(states.tokens[0], axis=1), 1.0, atol=1e-5)


def test_cls_pooling_embeds_the_last_layers_cls_state_in_search_states_and_training_alike():
    texts = ["Who directed the film that won the prize?", "x"]
    mean, cls = Encoder("minilm"), Encoder("minilm", pooling="cls")
    states = cls.states(texts)
    np.testing.assert_allclose(cls.encode(texts), [t[0] for t in states.tokens], atol=1e-5)  # Eq. 2's d0
    np.testing.assert_allclose(states.pooled, cls.encode(texts), atol=1e-5)
    np.testing.assert_allclose(cls.forward(texts)["pooled"].detach().numpy(), cls.encode(texts), atol=1e-5)
    assert np.abs(mean.encode(texts) - cls.encode(texts)).max() > 0.1  # mean pooling is another embedding
    np.testing.assert_allclose(mean.states(texts).cls, states.cls, atol=1e-6)  # the reranking states are alike
    assert cls.same_as(mean) and cls.config()["pooling"] == "cls"
    with pytest.raises(ValueError, match="pooling must be one of mean, cls"):
        Encoder("minilm", pooling="max")


def test_an_index_records_its_pooling_and_refuses_a_query_encoder_that_pools_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path))
    corpus = Corpus([Passage.make(f"T{i}", f"the passage about topic {i}") for i in range(6)])
    folder = DenseRetriever.build_cached(corpus, encoder="minilm", pooling="cls")
    assert folder != DenseRetriever.build_cached(corpus, encoder="minilm")  # one cached index per pooling
    assert json.loads((folder / "manifest.json").read_text())["pooling"] == "cls"
    loaded = DenseRetriever.load(folder)
    assert loaded.encoder.pooling == "cls" and loaded("the passage about topic 4", k=1).ids == [corpus[4].id]
    with pytest.raises(IndexMismatchError, match="built with cls pooling, the encoder pools by mean"):
        DenseRetriever.load(folder, encoder=Encoder("minilm"))
    # the encoding's shards are removed once its indexes are saved (its lock file, hidden and empty, stays)
    assert not [path for path in (tmp_path / "shards").iterdir() if not path.name.startswith(".")]


UNROLLED = "Who directed <FILL>? [Question] (<UNCERTAIN>, directed, <FILL>) [Passage]"


def test_special_tokens_are_kept_whole_only_when_the_encoder_is_given_them():
    plain, marked = Encoder("minilm"), Encoder("minilm", special_tokens=SPECIAL_TOKENS)
    assert plain.special_tokens == () and marked.special_tokens == SPECIAL_TOKENS
    marked_pieces = marked.model.tokenizer.tokenize(UNROLLED)
    plain_pieces = plain.model.tokenizer.tokenize(UNROLLED)
    assert [p for p in marked_pieces if p in SPECIAL_TOKENS] == ["<FILL>", "[Question]", "<UNCERTAIN>", "<FILL>",
                                                                 "[Passage]"]
    assert not set(SPECIAL_TOKENS) & set(plain_pieces) and len(plain_pieces) > len(marked_pieces)
    assert len(plain.model.tokenizer) + len(SPECIAL_TOKENS) == len(marked.model.tokenizer)
    text = "A sentence without any marker."  # the markers change nothing else
    np.testing.assert_allclose(marked.encode([text]), plain.encode([text]), atol=1e-6)
    assert marked.states([UNROLLED]).tokens[0].shape[0] == len(marked_pieces) + 2  # [CLS] ... [SEP]


def test_an_index_records_its_special_tokens_and_refuses_a_query_encoder_with_others(tmp_path):
    corpus = Corpus([Passage.make(f"T{i}", f"the passage about topic {i}") for i in range(6)])
    marked = Encoder("minilm", special_tokens=SPECIAL_TOKENS)
    DenseRetriever.build(corpus, encoder=marked, work_dir=tmp_path / "shards").save(tmp_path / "idx")
    assert json.loads((tmp_path / "idx" / "manifest.json").read_text())["special_tokens"] == list(SPECIAL_TOKENS)
    assert DenseRetriever.load(tmp_path / "idx").encoder.special_tokens == SPECIAL_TOKENS
    assert DenseRetriever.load(tmp_path / "idx", encoder="minilm").encoder.special_tokens == SPECIAL_TOKENS
    with pytest.raises(IndexMismatchError, match="special tokens"):
        DenseRetriever.load(tmp_path / "idx", encoder=Encoder("minilm"))


def test_unknown_encoder_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="neither a known encoder"):
        resolve_encoder("no-such-encoder")


def test_every_kind_answers_a_list_of_queries_as_it_answers_each_query(small_retriever, cached_retriever,
                                                                        musique_dev):
    bm25 = BM25Retriever(small_retriever.corpus)
    kinds = [small_retriever, bm25, HybridRetriever(small_retriever, bm25),
             RerankedRetriever(cached_retriever, RaLa(buckets=2), n=8, k=3),
             RerankedRetriever(bm25, MaxSim(encoder=cached_retriever.encoder), n=8, k=3)]
    questions = [example.question for example in musique_dev[:3]]
    for retriever in kinds:
        batch, singles = retriever(questions, k=3), [retriever(question, k=3) for question in questions]
        assert isinstance(batch, list) and all(isinstance(hits, Hits) for hits in [*batch, *singles])
        assert [hits.ids for hits in batch] == [hits.ids for hits in singles], type(retriever).__name__
        assert all(len(hits.ids) == 3 for hits in batch)
        np.testing.assert_allclose([hits.scores for hits in batch], [hits.scores for hits in singles], atol=1e-5)
    with pytest.raises(ValueError, match="non-empty"):
        kinds[-1]([questions[0], ""])


class KeywordRetriever(RetrieverModule):
    """A retriever kind defined outside the package: texts ranked by the words they share with the query."""

    kind = "test-keyword"

    def __init__(self, texts: list[str], k: int = 2):
        super().__init__()
        self.texts, self.k = list(texts), k

    def search(self, queries, k):
        hits = []
        for query in queries:
            shared = [len(set(query.split()) & set(text.split())) for text in self.texts]
            order = sorted(range(len(self.texts)), key=lambda i: -shared[i])[:k]
            hits.append(Hits(passages=[self.texts[i] for i in order], ids=[str(i) for i in order],
                             scores=[float(shared[i]) for i in order]))
        return hits

    def save(self, directory):
        directory.mkdir(parents=True)
        (directory / "manifest.json").write_text(json.dumps({"retriever": self.kind, "texts": self.texts}))

    @classmethod
    def load(cls, directory):
        return cls(json.loads((directory / "manifest.json").read_text())["texts"])


def test_a_retriever_kind_registers_itself_and_loads_by_its_manifest(tmp_path):
    assert RETRIEVER_KINDS["test-keyword"] is KeywordRetriever
    KeywordRetriever(["red apple pie", "green pear", "red cherry"]).save(tmp_path / "kw")
    loaded = load_retriever(tmp_path / "kw")
    assert type(loaded) is KeywordRetriever and loaded.texts == ["red apple pie", "green pear", "red cherry"]
    assert loaded("red apple").ids == ["0", "2"] and loaded("red apple").scores == [2.0, 1.0]
    assert [hits.ids for hits in loaded(["green", "cherry"], k=1)] == [["1"], ["2"]]
    with pytest.raises(ValueError, match="taken by"):
        type("Clash", (RetrieverModule,), {"kind": "test-keyword"})
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "manifest.json").write_text('{"retriever": "nope"}')
    with pytest.raises(ValueError, match="unknown retriever kind 'nope'; known: dense, .*test-keyword"):
        load_retriever(tmp_path / "odd")


def test_dspy_retrieve_reads_a_multihop_retriever_set_as_rm(small_retriever, musique_dev):
    import dspy

    dspy.configure(rm=small_retriever)
    question = musique_dev[0].question
    assert dspy.Retrieve(k=3)(question).passages == small_retriever(question, k=3).passages


def test_a_gpu_batch_fills_a_quarter_of_the_free_memory():
    from multihop.retrievers.encoder import batch_for_memory

    assert batch_for_memory(2**30, 768, 12, 4) == 10  # ¼ GiB / ((12+1+4)·512·768·4 B = 26.7 MB a text)
    assert batch_for_memory(80 * 2**30, 768, 12, 2) == 512  # an H100 in fp16: capped
    assert batch_for_memory(2**26, 768, 12, 4) == 8  # at least 8


def test_an_encoder_computes_in_the_precision_asked_and_fp32_on_a_cpu_by_default():
    texts = ["The Eiffel Tower stands in Paris.", "Bananas are a yellow fruit."]
    default, half = Encoder("minilm"), Encoder("minilm", precision="bf16")
    assert (default.precision, default.batch_size, half.precision) == ("fp32", 8, "bf16")
    assert next(half.model.parameters()).dtype == torch.bfloat16
    cosines = (default.encode(texts) * half.encode(texts)).sum(axis=1)
    tokens = half.passage_states(texts, ()).tokens[0]  # computed in bf16, normalised in fp32
    assert cosines.min() > 0.99 and tokens.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(tokens, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="precision must be one of auto, fp32, fp16, bf16, not 'fp8'"):
        Encoder("minilm", precision="fp8")


def test_every_programs_rerank_switch_builds_every_registered_reranker_over_its_first_stage():
    from multihop.programs import PROGRAMS
    from multihop.retrievers.rerankers import MODEL_RERANKERS, RERANKERS

    bm25 = BM25Retriever(Corpus([Passage("p0", "A", "alpha"), Passage("p1", "B", "beta")]), k=2)
    names = [method.name for method in PROGRAMS.declared() if "rerank" in PROGRAMS[method.name].defaults()]
    for name in names:
        for reranker in set(RERANKERS) - set(MODEL_RERANKERS):
            search = PROGRAMS[name](retriever=bm25, rerank=reranker).searcher()
            assert search.reranker.name == reranker and search.first_stage is bm25, (name, reranker)
            kept = search.reranker.config().get("special_tokens", [])
            assert set(PROGRAMS[name].special_tokens) <= set(kept), (name, reranker)
