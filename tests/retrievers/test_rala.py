import numpy as np
import pytest
import torch

from multihop.retrievers import (
    RERANKERS,
    BM25Retriever,
    Hits,
    MaxSim,
    RaLa,
    RerankedRetriever,
    Reranker,
    load_reranker,
    make_reranker,
)
from multihop.retrievers.scoring import (
    OMEGA_FLOOR,
    RELEASED_PADDING,
    maxsim,
    pad,
    released_omega,
    score_eq3,
    score_eq4,
    zero_tokens,
)
from multihop.signatures.cooprag import SPECIAL_TOKENS


def t(rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_a_negative_gap_never_reverses_the_maxsim_ranking():
    q, qm = pad([[[1.0, 0.0]]])
    d, dm = pad([[[0.9, 0.436]], [[0.5, 0.866]]])  # MaxSim 0.9 and 0.5
    worse_last_layer = torch.tensor([[[1.0, 0.0]], [[1.0, 0.0]]])  # premature [CLS] closer to the query: ω < 0
    scores = score_eq4(q, qm, d, dm, worse_last_layer)[0]
    assert scores[0] > scores[1]  # the better MaxSim stays first (a raw ω would flip them)
    assert scores.tolist() == pytest.approx([OMEGA_FLOOR * 0.9, OMEGA_FLOOR * 0.5], rel=1e-3)
    real_gap = torch.tensor([[[0.0, 1.0]], [[0.0, 1.0]]])  # ω = <q0, d0^L> − 0 > 0
    assert (score_eq4(q, qm, d, dm, real_gap)[0] > scores.max()).all()  # a real gap ranks above a floored one
    same_negative_gap = torch.tensor([[[1.0, 0.0]], [[0.6, 0.8]]])  # ω = −0.1 for both
    assert score_eq4(q, qm, d, dm, same_negative_gap, floor=None)[0].tolist() == pytest.approx([-0.09, -0.05],
                                                                                             abs=1e-3)
    floored = score_eq4(q, qm, d, dm, same_negative_gap)[0]  # the paper's bare product above ranks MaxSim 0.5 first
    assert floored[0] > floored[1]


def test_the_floor_is_straight_through_so_training_can_raise_a_floored_omega():
    q, qm = pad([[[1.0, 0.0]]])
    d, dm = pad([[[0.9, 0.436]]])
    premature = torch.tensor([[[1.0, 0.0]]], requires_grad=True)  # ω = 0.9 − 1 < floor
    score = score_eq4(q, qm, d, dm, premature)
    assert score.item() == pytest.approx(OMEGA_FLOOR * 0.9, rel=1e-3)
    score.sum().backward()
    # d score / d premature[CLS] = −MaxSim · q0 = (−0.9, 0): the gradient ω has, where a clamp would give zero
    assert premature.grad[0, 0].tolist() == pytest.approx([-0.9, 0.0], abs=1e-4)


def test_eq4_is_omega_times_maxsim_on_a_hand_computed_example():
    q, qm = pad([t([[1, 0], [0, 1]])])
    d, dm = pad([t([[1, 0], [0.6, 0.8]])])
    # MaxSim: q0 -> max(1, .6) = 1; q1 -> max(0, .8) = .8; average .9
    assert maxsim(q, qm, d, dm).item() == pytest.approx(0.9)
    # ω = max_l <q0, d0^L> - <q0, d0^l> = max(1 - .8, 1 - .6) = .4
    cls_layers = t([[[0.8, 0.6], [0.6, 0.8]]])
    assert score_eq4(q, qm, d, dm, cls_layers).item() == pytest.approx(0.36)
    assert score_eq4(q, qm, d, dm, cls_layers, omega=False).item() == pytest.approx(0.9)


def test_eq3_takes_the_largest_gap_over_layers_and_tokens():
    q, qm = pad([t([[1, 0], [0, 1]])])
    d, dm = pad([t([[1, 0], [0, 1]])])
    one_layer = t([[[[0.6, 0.8], [0.8, 0.6]]]])  # [m, |C|, Td, d]
    # g(q0,d0) = 1-.6 = .4, g(q0,d1) = 0-.8; g(q1,d0) = 0-.8, g(q1,d1) = 1-.6 = .4 -> avg .4
    assert score_eq3(q, qm, d, dm, one_layer).item() == pytest.approx(0.4)
    two_layers = t([[[[0.6, 0.8], [0.8, 0.6]], [[0, 1], [1, 0]]]])
    # the second layer widens g(q0,d0) and g(q1,d1) to 1 -> avg 1
    assert score_eq3(q, qm, d, dm, two_layers).item() == pytest.approx(1.0)


def test_the_released_pieces_on_hand_computed_examples():
    # ω = (<q^11, d^11> − min over the other layers of <q^11, d^l>) / 2, no floor: (0.6 − min(0.8, 1.0)) / 2 = −0.1
    q_cls, d_last, d_layers = t([[1, 0]]), t([[0.6, 0.8]]), t([[[0.8, 0.6], [1, 0]]])
    assert released_omega(q_cls, d_last, d_layers).item() == pytest.approx(-0.1)
    # the padding floor: a query token whose every match is negative scores RELEASED_PADDING, not its best match
    q, qm = pad([t([[1, 0]])])
    d, dm = pad([t([[-1, 0], [-0.6, -0.8]])])
    assert maxsim(q, qm, d, dm).item() == pytest.approx(-0.6)
    assert maxsim(q, qm, d, dm, floor=RELEASED_PADDING).item() == pytest.approx(RELEASED_PADDING)
    # zeroed tokens score 0, they are not masked out: q0 = (1, 0)'s best match drops from 1 to 0.8; q1 = (0, 1)'s is 0.8
    q, qm = pad([t([[1, 0], [0, 1]])])
    d, dm = pad([t([[1, 0], [0.6, 0.8], [0.8, 0.6]])])
    dropped = zero_tokens(d, torch.tensor([[True, False, False]]))
    assert dropped[0].tolist() == [[0, 0], pytest.approx([0.6, 0.8]), pytest.approx([0.8, 0.6])]
    assert maxsim(q, qm, dropped, dm).item() == pytest.approx((0.8 + 0.8) / 2)


def test_padding_never_changes_a_score():
    q, qm = pad([t([[1, 0], [0, 1]]), t([[0.6, 0.8]])])
    d, dm = pad([t([[1, 0], [0.6, 0.8]]), t([[0, -1]])])
    sim = maxsim(q, qm, d, dm)
    assert sim[0, 0].item() == pytest.approx(0.9)
    assert sim[1, 1].item() == pytest.approx(-0.8)  # one query token, one document token
    assert sim[0, 1].item() == pytest.approx((0 - 1) / 2)


@pytest.mark.parametrize("buckets", [2, 4, 6, 11])
def test_one_candidate_layer_per_bucket_seeded_never_the_embeddings_or_the_last(buckets):
    layers = RaLa(buckets=buckets, seed=3).candidate_layers(12)
    assert layers == RaLa(buckets=buckets, seed=3).candidate_layers(12)
    assert len(layers) == buckets and min(layers) >= 1 and max(layers) < 12  # 1 <= l < L (Eq. 7, App. G.1)
    edges = [bucket[0] for bucket in np.array_split(np.arange(1, 12), buckets)] + [12]
    assert all(edges[i] <= layer < edges[i + 1] for i, layer in enumerate(layers))  # one from each bucket, in order
    assert all(0 not in RaLa(buckets=buckets, seed=seed).candidate_layers(12) for seed in range(20))


def test_seeds_draw_different_layers_and_more_buckets_than_layers_take_every_premature_layer():
    assert len({RaLa(buckets=2, seed=s).candidate_layers(12) for s in range(10)}) > 1
    assert RaLa(buckets=12).candidate_layers(12) == tuple(range(1, 12))  # Table 23's "all layers" over MPNet
    assert RaLa(buckets=12).candidate_layers(6) == (1, 2, 3, 4, 5)
    assert RaLa().settings() == (4, 0)
    with pytest.raises(ValueError, match="no premature layer"):
        RaLa().candidate_layers(1)
    with pytest.raises(ValueError, match="buckets must be at least 1"):
        RaLa(buckets=0)
    with pytest.raises(ValueError, match="scoring"):
        RaLa(scoring="eq5")


@pytest.mark.parametrize("scoring", ["eq4", "eq3"])
def test_cached_and_recomputed_token_states_give_the_same_scores(cached_retriever, musique_dev, scoring):
    cached = RerankedRetriever(cached_retriever, RaLa(scoring=scoring, buckets=2), n=10, k=10)
    recomputed = RerankedRetriever(cached_retriever, RaLa(scoring=scoring, buckets=2, cache=False), n=10, k=10)
    assert cached.reranker.tokens is cached_retriever.tokens and recomputed.reranker.tokens is None
    for example in musique_dev[:3]:
        a, b = cached(example.question), recomputed(example.question)
        assert a.ids == b.ids and sorted(a.candidates) == sorted(a.ids)
        np.testing.assert_allclose(a.scores, b.scores, atol=2e-3)  # float16 cache


def test_reranking_reorders_the_first_stage_and_saves_with_its_settings(cached_retriever, musique_dev, tmp_path):
    from multihop.retrievers import load_retriever

    retriever = RerankedRetriever(cached_retriever, RaLa(), n=20, k=5)
    question = musique_dev[1].question
    first = cached_retriever(question, k=20)
    reranked = retriever(question)
    assert reranked.candidates == first.ids and set(reranked.ids) <= set(first.ids)
    assert reranked.scores == sorted(reranked.scores, reverse=True)
    retriever.save(tmp_path / "r")
    loaded = load_retriever(tmp_path / "r")
    assert isinstance(loaded, RerankedRetriever) and loaded.reranker.config() == retriever.reranker.config()
    assert loaded(question).ids == reranked.ids and loaded.first_stage.tokens is not None
    assert loaded.reranker.encoder is loaded.first_stage.encoder and loaded.reranker.tokens is loaded.first_stage.tokens
    batch = retriever([question, musique_dev[2].question])
    assert [p.ids for p in batch] == [reranked.ids, retriever(musique_dev[2].question).ids]


def test_program_copies_share_the_retriever_and_copy_the_predictors(cached_retriever):
    from multihop.programs import CoopRAG, SingleStepRAG

    reranked = RerankedRetriever(cached_retriever, RaLa(buckets=2), n=6, k=3)
    for program in (SingleStepRAG(retriever=reranked), CoopRAG(retriever=reranked)):
        for copied in (program.deepcopy(), program.reset_copy()):
            assert copied.retriever is reranked and copied.retriever.first_stage is cached_retriever
            assert all(a is not b for (_, a), (_, b) in zip(program.named_predictors(), copied.named_predictors(),
                                                            strict=True))


def test_every_registered_name_builds_its_reranker_and_rebuilds_it_from_its_config():
    assert list(RERANKERS) == ["maxsim", "rala-eq4", "rala-eq3", "cosine", "cross-encoder"]
    built = {name: make_reranker(name) for name in RERANKERS if name != "cross-encoder"}  # named with its model:
    # tests/retrievers/test_cross_encoder.py
    assert type(built["maxsim"]) is MaxSim and built["cosine"].config() == {"reranker": "cosine", "encoder": "mpnet",
                                                                                   "special_tokens": []}
    assert (built["rala-eq4"].scoring, built["rala-eq3"].scoring) == ("eq4", "eq3")
    for name, reranker in built.items():
        assert isinstance(reranker, Reranker) and reranker.config()["reranker"] == name
        assert load_reranker(reranker.config()).config() == reranker.config()
    tuned = make_reranker("rala-eq3", buckets=2, omega=False, seed=5, cache=False)
    assert load_reranker(tuned.config()).config() == tuned.config() == {
        "reranker": "rala-eq3", "buckets": 2, "omega": False, "seed": 5, "omega_floor": OMEGA_FLOOR, "cache": False,
        "special_tokens": [], "encoder": None}
    with pytest.raises(ValueError) as unknown:
        make_reranker("colbert")
    assert str(unknown.value) == ("unknown reranker 'colbert'; choose one of maxsim, rala-eq4, rala-eq3, cosine, "
                                  "cross-encoder:MODEL")
    with pytest.raises(ValueError, match="'maxsim': got an unexpected keyword argument 'buckets'"):
        make_reranker("maxsim", buckets=2)


TEXTS = ["The Eiffel Tower stands in Paris.", "Bananas are a yellow fruit.", "Paris is the capital of France."]
MADE_UP = Hits(passages=TEXTS, ids=["t0", "t1", "t2"], scores=[0.0, 0.0, 0.0])
QUESTION = "Which city is the capital of France?"


def test_a_reranker_ranks_texts_that_are_not_corpus_rows_by_its_own_score(cached_retriever):
    encoder = cached_retriever.encoder
    query = encoder.states([QUESTION]).tokens[0]
    texts = encoder.states(TEXTS)
    maxsims = [float((query @ tokens.T).max(axis=1).mean()) for tokens in texts.tokens]
    rala = RaLa(buckets=2).bind(cached_retriever)
    layers = list(rala.candidate_layers(encoder.num_layers))
    omegas = [max(float(np.max(query[0] @ cls[-1] - cls[layers] @ query[0])), OMEGA_FLOOR) for cls in texts.cls]
    for reranker, expected in ((MaxSim().bind(cached_retriever), maxsims),
                               (rala, [w * s for w, s in zip(omegas, maxsims, strict=True)])):
        assert reranker.corpus_rows(MADE_UP) is None  # not rows of the cached corpus: encoded from the texts
        hits = reranker.rerank(QUESTION, MADE_UP, k=2)
        best = sorted(range(3), key=lambda i: -expected[i])[:2]
        assert hits.ids == [f"t{i}" for i in best] and hits.passages == [TEXTS[i] for i in best]
        np.testing.assert_allclose(hits.scores, [expected[i] for i in best], atol=1e-5)
        assert hits.candidates == ["t0", "t1", "t2"]
    assert MaxSim().bind(cached_retriever).rerank(QUESTION, MADE_UP, k=3).ids == ["t2", "t0", "t1"]


def test_the_token_cache_serves_only_candidates_that_are_rows_of_its_corpus(cached_retriever, musique_dev):
    reranker = RaLa(buckets=2).bind(cached_retriever)
    first = cached_retriever(musique_dev[0].question, k=5)
    assert reranker.corpus_rows(first) == [cached_retriever.corpus.row(pid) for pid in first.ids]
    edited = Hits(passages=[first.passages[0] + " (edited)", *first.passages[1:]], ids=first.ids, scores=first.scores)
    assert reranker.corpus_rows(edited) is None
    assert RaLa(buckets=2, cache=False).bind(cached_retriever).corpus_rows(first) is None


def test_a_reranker_shares_the_first_stage_encoder_only_when_it_encodes_alike(cached_retriever):
    shared = RerankedRetriever(cached_retriever, RaLa(buckets=2), n=10, k=3)
    by_name = RerankedRetriever(cached_retriever, MaxSim(encoder="minilm"), n=10, k=3)
    for retriever in (shared, by_name):
        assert retriever.reranker.encoder is cached_retriever.encoder and retriever.encodes_once
        assert retriever.reranker.tokens is cached_retriever.tokens
    marked = RerankedRetriever(cached_retriever, RaLa(buckets=2, special_tokens=SPECIAL_TOKENS), n=10, k=3)
    assert marked.reranker.encoder.name == "minilm" and marked.reranker.encoder.special_tokens == SPECIAL_TOKENS
    assert marked.reranker.tokens is None and not marked.encodes_once
    bm25 = RerankedRetriever(BM25Retriever(cached_retriever.corpus), MaxSim(encoder=cached_retriever.encoder), n=10,
                             k=3)
    assert not bm25.encodes_once and bm25.reranker.tokens is None
    with pytest.raises(ValueError, match="lacks the special tokens"):
        MaxSim(encoder=cached_retriever.encoder, special_tokens=SPECIAL_TOKENS)


def test_a_shared_encoder_encodes_the_query_once_and_reads_the_candidates_from_the_cache(cached_retriever,
                                                                                         musique_dev, monkeypatch):
    encoder, calls = cached_retriever.encoder, []
    for method in ("states", "encode"):
        real = getattr(encoder, method)
        monkeypatch.setattr(encoder, method, lambda texts, *args, _real=real, _name=method, **kwargs:
                            calls.append((_name, list(texts))) or _real(texts, *args, **kwargs))
    questions = [example.question for example in musique_dev[:2]]
    RerankedRetriever(cached_retriever, RaLa(buckets=2), n=10, k=3)(questions)
    assert calls == [("states", questions)]
    calls.clear()
    RerankedRetriever(cached_retriever, RaLa(buckets=2, cache=False), n=10, k=3)(questions[0])
    assert [name for name, _ in calls] == ["states", "states"] and calls[0][1] == questions[:1]
    assert len(calls[1][1]) == 10  # the candidates, encoded


def test_a_retriever_reranks_any_retriever_module_not_only_a_multihop_index(static_retriever, cached_retriever):
    reranker = MaxSim(encoder=cached_retriever.encoder)
    # a plain dspy.Module first stage: no corpus, no batch
    retriever = RerankedRetriever(static_retriever, reranker, n=6, k=3)
    hits = retriever("text 4")
    assert static_retriever.calls == [("text 4", 6)]
    assert hits.candidates == [p.id for p in static_retriever.passages[:6]]
    assert hits.ids[0] == static_retriever.passages[4].id and hits.scores == sorted(hits.scores, reverse=True)
    assert [h.ids for h in retriever(["text 1", "text 2"])] == [retriever("text 1").ids, retriever("text 2").ids]
