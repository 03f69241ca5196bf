"""The ``plaid`` token-state form: a learned projection and ColBERTv2's residual codec (retrievers/plaid_codec.py),
as a token cache keeps it."""

import numpy as np
import pytest

from multihop.retrievers.dense import IndexSpec
from multihop.retrievers.plaid_codec import (
    PlaidCodec,
    ProjectedInt8Codec,
    bucket_cutoffs_and_weights,
    centroid_count,
    pack_codes,
    parse_plaid,
    unpack_codes,
)
from multihop.retrievers.token_cache import META, TokenCache, describe_cache
from multihop.retrievers.token_codecs import canonical_form, check_form, codec


def low_rank(rng, n: int, d: int, rank: int = 12, noise: float = 0.02) -> np.ndarray:
    """``n`` unit vectors of ``d`` dimensions near a ``rank``-dimensional subspace."""
    vectors = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d)) + noise * rng.normal(size=(n, d))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_codes_pack_the_first_dimension_into_the_high_bits_and_unpack_back():
    assert pack_codes(np.array([[0, 1, 2, 3]], dtype=np.uint8), 2).tolist() == [[0b00011011]]
    assert pack_codes(np.array([[1, 15, 0, 2]], dtype=np.uint8), 4).tolist() == [[0x1F, 0x02]]
    rng = np.random.default_rng(0)
    for bits in (2, 4):
        codes = rng.integers(0, 2**bits, size=(5, 128), dtype=np.uint8)
        packed = pack_codes(codes, bits)
        assert packed.shape == (5, 128 * bits // 8) and packed.dtype == np.uint8
        np.testing.assert_array_equal(unpack_codes(packed, bits, 128), codes)


def test_bucket_cutoffs_are_the_residuals_quantiles_and_weights_the_buckets_means_per_dimension():
    residuals = np.stack([np.arange(8.0), 10 * np.arange(8.0)], axis=1)  # [8, 2]
    cutoffs, weights = bucket_cutoffs_and_weights(residuals, 2)
    np.testing.assert_allclose(cutoffs, [[1.75, 3.5, 5.25], [17.5, 35, 52.5]])  # quantiles 1/4, 2/4, 3/4
    np.testing.assert_allclose(weights, [[0.5, 2.5, 4.5, 6.5], [5, 25, 45, 65]])  # {0,1}, {2,3}, {4,5}, {6,7}
    _, weights = bucket_cutoffs_and_weights(np.zeros((4, 1)), 2)  # every bucket but the first empty
    np.testing.assert_allclose(weights, [[0, 0, 0, 0]])


def test_a_token_takes_a_centroid_id_and_dim_bits_over_8_bytes():
    sizes = {}
    for form in ("plaid", "plaid:4", "plaid:2:64", "plaid:4:96"):
        kind = codec(form)
        kind.centroids = np.zeros((4096, 1))
        sizes[form] = kind.bytes_per_vector(768)
    assert sizes == {"plaid": 2 + 32, "plaid:4": 2 + 64, "plaid:2:64": 2 + 16, "plaid:4:96": 2 + 48}
    kind.centroids = np.zeros((65_537, 1))
    assert kind.centroid_dtype == np.uint32 and kind.bytes_per_vector(768) == 4 + 48


def test_k_is_colbertv2s_power_of_two_capped_by_the_sample():
    assert centroid_count(211_726) == 4096  # 16·√211,726 ≈ 7,362 → 2^12
    assert centroid_count(14_000_000) == 32_768  # 16·√14M ≈ 59,867 → 2^15
    assert centroid_count(211_726, sample=3_900) == 64  # 100 sample tokens a centroid → 2^6
    assert centroid_count(1) == 1


def test_the_form_parses_with_defaults_and_refuses_other_bits_or_dimensions_in_one_line():
    assert (parse_plaid("plaid"), parse_plaid("plaid:4"), parse_plaid("plaid:2:64")) == (
        parse_plaid("plaid:2:128"), parse_plaid("plaid:4:128"), parse_plaid("plaid:2:64"))
    assert parse_plaid("plaid:4").bits == 4 and parse_plaid("plaid:2:64").dim == 64 and parse_plaid("pq") is None
    assert canonical_form("plaid") == "plaid:2:128" and canonical_form("int8") == "int8"
    assert IndexSpec(token_layers=(), token_states="plaid:4").token_states == "plaid:4:128"
    assert parse_plaid("plaid:2:128:trained").projection == "trained" and parse_plaid("plaid").projection == "pca"
    assert canonical_form("plaid:2:128:trained") == "plaid:2:128:trained"
    assert canonical_form("plaid:2:128:pca") == "plaid:2:128" and parse_plaid("plaid:2:256").dim == 256
    for form, message in (("plaid:3", "bits must be one of 2, 4"), ("plaid:2:100", "dim must be one of 64, 96, 128"),
                          ("plaid:two", "write plaid[:bits[:dim[:pca|trained]]]"),
                          ("plaid:2:64:1", "write plaid[:bits[:dim[:pca|trained]]]"),
                          ("plaid-2", "unknown token-state form")):
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")) as caught:
            check_form(form)
        assert "\n" not in str(caught.value)


def test_states_of_no_more_dimensions_than_dim_are_not_projected():
    vectors = low_rank(np.random.default_rng(1), 400, 64)
    kind = PlaidCodec(bits=4, dim=128)
    kind.train(vectors, tokens=len(vectors))
    assert kind.dim == 64 and kind.describe()["projection"] == {"kind": "identity", "from": 64, "to": 64}
    np.testing.assert_array_equal(kind.components, np.eye(64))
    np.testing.assert_allclose(kind.project(vectors), vectors, atol=1e-6)
    assert kind.bytes_per_vector(64) == 2 + 32


def write_shards(folder, rng, passages: int, d: int, layers: int = 3) -> list:
    """Encoding shards as :func:`~multihop.retrievers.index.encode_corpus` writes them: token counts, last-layer
    tokens, every layer's ``[CLS]`` state."""
    shards = []
    for shard in range(3):
        lengths = rng.integers(5, 15, size=passages)
        cls = low_rank(rng, passages * (layers + 1), d).reshape(passages, layers + 1, d)
        shards.append(folder / f"shard-{shard:06d}.npz")
        np.savez(shards[-1], lengths=lengths, tokens=low_rank(rng, int(lengths.sum()), d), cls=cls)
    return shards


@pytest.mark.slow  # k-means, PCA and FAISS searches through BLAS/OpenMP threads: 1–2 s on 2 shared cores
def test_a_plaid_token_cache_round_trips_through_write_and_load_and_records_its_codec(tmp_path):
    shards = write_shards(tmp_path, np.random.default_rng(2), passages=40, d=192)
    full = TokenCache.write(tmp_path / "full", shards, 3, (), form="full", cls_layers=(1, 3))
    TokenCache.write(tmp_path / "plaid", shards, 3, (), form="plaid:4:64", cls_layers=(1, 3))
    cache = TokenCache(tmp_path / "plaid")  # loaded from disk
    meta = cache.meta
    centroids = len(cache.codecs["last"].centroids)
    assert meta["form"] == cache.form == "plaid:4:64" and meta["bytes_per_token"] == 2 + 32
    assert meta["codecs"] == {"last": {"codec": "colbertv2-residual", "bits": 4, "centroids": centroids,
                                       "projection": {"kind": "pca", "from": 192, "to": 64}}}
    assert meta["cls_form"] == "pca-int8:64" and describe_cache(tmp_path / "plaid")["codecs"] == meta["codecs"]
    assert {path.name for path in (tmp_path / "plaid").iterdir()} == {
        META, "offsets.npy", "last.centroid", "last.residual", "last.plaid.npz", "cls.i8", "cls.scale", "cls.pca.npz"}
    stored = cache._tokens["last"]
    assert isinstance(stored["centroid"], np.memmap) and stored["centroid"].dtype == np.uint16
    assert stored["residual"].shape == (cache.offsets[-1], 32)
    rows = [0, 17, 41, 119]
    (ref, ref_cls, _), (got, got_cls, _) = full.get(rows), cache.get(rows)
    cosines = np.concatenate([(a * b).sum(axis=1) for a, b in zip(ref, got, strict=True)])
    assert all(a.shape == b.shape for a, b in zip(ref, got, strict=True))
    assert cosines.min() > 0.9 and cosines.mean() > 0.97
    assert np.isnan(got_cls[:, [0, 2]]).all() and np.abs(got_cls[:, [1, 3]] - ref_cls[:, [1, 3]]).max() < 0.05
    projected = cache.codecs["last"].decode_projected({part: array[:5] for part, array in stored.items()})
    assert projected.shape == (5, 64) and np.allclose(np.linalg.norm(projected, axis=1), 1, atol=1e-5)
    int8_cls = TokenCache.write(tmp_path / "int8-cls", shards, 3, (), form="plaid:4:64", cls_layers=(1, 3),
                                cls_states="int8")
    assert int8_cls.cls_form == "int8" and int8_cls.bytes_per_token() == 34
    assert isinstance(ProjectedInt8Codec.load(tmp_path / "plaid", "cls"), ProjectedInt8Codec)


@pytest.mark.slow  # a 768-d PCA and k-means: 1–6 s on 2 shared cores (0.4 s on one quiet thread)
def test_768_d_low_rank_tokens_keep_their_maxsim_order_at_4_bits():
    rng = np.random.default_rng(3)
    basis = rng.normal(size=(24, 768))  # tokens near one 24-d subspace, as a corpus's are near a few directions

    def unit(coefficients: np.ndarray) -> np.ndarray:
        vectors = coefficients @ basis + 0.05 * rng.normal(size=(len(coefficients), 768))
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

    queries = [rng.normal(size=(8, 24)) for _ in range(3)]
    documents = [unit(np.concatenate([query + spread * rng.normal(size=(8, 24)), rng.normal(size=(40, 24))]))
                 for query in queries for spread in (0.2, 0.5, 0.9, 1.5, 3.0)]  # ever farther from the query
    kind = codec("plaid:4")
    kind.train(np.concatenate(documents), tokens=sum(len(tokens) for tokens in documents))
    decoded = [kind.decode(kind.encode(tokens)) for tokens in documents]
    for number, query in enumerate(queries):
        q, candidates = unit(query), slice(5 * number, 5 * number + 5)  # the documents made from this query
        exact = [float((q @ tokens.T).max(axis=1).mean()) for tokens in documents[candidates]]
        coded = [float((q @ tokens.T).max(axis=1).mean()) for tokens in decoded[candidates]]
        assert np.argsort(exact).tolist() == [4, 3, 2, 1, 0]
        assert np.argsort(coded).tolist() == np.argsort(exact).tolist()


def synthetic_codec(rng, d: int = 96, dim: int = 32, bits: int = 2, trained: bool = False) -> PlaidCodec:
    """A codec with a made-up state (no k-means): a mean, orthonormal components or a trained pair of maps,
    centroids, cutoffs and weights."""
    mean = 0.3 * rng.normal(size=d) / np.sqrt(d)
    components = np.linalg.qr(rng.normal(size=(d, dim)))[0].T
    state = {"mean": mean, "components": components, "scale": np.float32(0.8),
             "centroids": low_rank(rng, 64, dim, rank=dim), "cutoffs": np.sort(rng.normal(size=(dim, 2**bits - 1))),
             "weights": np.sort(0.1 * rng.normal(size=(dim, 2**bits))), "bits": np.int32(bits)}
    if trained:
        state["components"] = components + 0.1 * rng.normal(size=components.shape)
        state["back"] = 0.8 * components + 0.1 * rng.normal(size=components.shape)
    return PlaidCodec(bits, dim, {key: np.asarray(value, dtype=np.float32) for key, value in state.items()})


@pytest.mark.parametrize("trained", [False, True])
def test_scores_in_the_projected_space_equal_the_back_projected_cosines(trained):
    rng = np.random.default_rng(4)
    kind = synthetic_codec(rng, trained=trained)
    assert kind.describe()["projection"]["kind"] == ("trained" if trained else "pca")
    parts = kind.encode(low_rank(rng, 50, 96))
    queries = low_rank(rng, 7, 96)
    exact = queries @ kind.decode(parts).T
    lifted = kind.lift_query(queries) @ kind.decode_scorable(parts).T
    assert lifted.shape == (7, 50) and kind.decode_scorable(parts).shape == (50, 33)
    np.testing.assert_allclose(lifted, exact, atol=1e-5)


def test_a_trained_codec_saves_and_loads_its_maps_and_refuses_to_train_without_them(tmp_path):
    rng = np.random.default_rng(5)
    kind = synthetic_codec(rng, trained=True)
    kind.save(tmp_path, "last")
    loaded = PlaidCodec.load(tmp_path, "last")
    assert loaded.projection == "trained" and loaded.describe() == kind.describe()
    np.testing.assert_array_equal(loaded.state()["back"], kind.state()["back"])
    np.testing.assert_array_equal(loaded.components, kind.components)
    assert "back" not in synthetic_codec(rng).state()
    with pytest.raises(ValueError, match="needs a trained projection") as caught:
        codec("plaid:2:64:trained").train(low_rank(rng, 100, 96))
    assert "\n" not in str(caught.value)


@pytest.mark.slow  # the rerankers' imports (torch, transformers) and a cache's k-means: 6 s on 2 shared cores
def test_maxsim_and_rala_eq4_score_a_plaid_cache_in_its_projected_space_as_on_the_decoded_tokens(tmp_path):
    from types import SimpleNamespace

    from multihop.retrievers import MaxSim, RaLa
    from multihop.retrievers.scoring import pad

    rng = np.random.default_rng(6)
    shards = write_shards(tmp_path, rng, passages=8, d=96, layers=3)
    cache = TokenCache.write(tmp_path / "plaid", shards, 3, (), form="plaid:2:64", cls_layers=(1, 2))
    rows, query = [0, 5, 9, 23], low_rank(rng, 6, 96)
    decoded, cls, _ = cache.get(rows)
    scorable, projected_cls, heads = cache.get_projected(rows)
    np.testing.assert_array_equal(projected_cls, cls)
    np.testing.assert_allclose(heads, np.stack([tokens[0] for tokens in decoded]), atol=1e-6)
    q, qm, d, dm = *pad([query]), *pad(decoded)
    lq, lqm, sd, sdm = *pad([cache.projected.lift_query(query)]), *pad(scorable)
    head = pad([query[:1]])[0][0]
    rala = RaLa(buckets=2, seed=0)
    rala._encoder = SimpleNamespace(num_layers=3, path=tmp_path)  # no fine-tuning stamp: layers (1, 2)
    for reranker in (MaxSim(), rala):
        exact = reranker.score(q, qm, d, dm, cls, {})
        fast = reranker.score_projected(lq, lqm, sd, sdm, cls, head, pad([heads])[0][0])
        np.testing.assert_allclose(fast.numpy(), exact.numpy(), atol=1e-5)
