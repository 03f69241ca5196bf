import numpy as np
import pytest
import torch

from multihop.retrievers import RaLa, Retriever
from multihop.retrievers.scoring import maxsim, pad, score_eq3, score_eq4


def t(rows):
    return torch.tensor(rows, dtype=torch.float32)


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


def test_padding_never_changes_a_score():
    q, qm = pad([t([[1, 0], [0, 1]]), t([[0.6, 0.8]])])
    d, dm = pad([t([[1, 0], [0.6, 0.8]]), t([[0, -1]])])
    sim = maxsim(q, qm, d, dm)
    assert sim[0, 0].item() == pytest.approx(0.9)
    assert sim[1, 1].item() == pytest.approx(-0.8)  # one query token, one document token
    assert sim[0, 1].item() == pytest.approx((0 - 1) / 2)


@pytest.mark.parametrize("buckets", [2, 4, 6, 12])
def test_one_candidate_layer_per_bucket_seeded_never_the_last(buckets):
    layers = RaLa(buckets=buckets, seed=3).candidate_layers(12)
    assert layers == RaLa(buckets=buckets, seed=3).candidate_layers(12)
    assert len(layers) == buckets and max(layers) < 12
    width = 12 // buckets
    assert [layer // width for layer in layers] == list(range(buckets))


def test_seeds_draw_different_layers_and_too_many_buckets_is_refused():
    assert len({RaLa(buckets=2, seed=s).candidate_layers(12) for s in range(10)}) > 1
    with pytest.raises(ValueError, match="12 buckets"):
        RaLa(buckets=12).candidate_layers(6)
    with pytest.raises(ValueError, match="scoring"):
        RaLa(scoring="eq5")


@pytest.mark.parametrize("scoring", ["eq4", "eq3"])
def test_cached_and_recomputed_token_states_give_the_same_scores(cached_retriever, musique_dev, scoring):
    reranker = RaLa(scoring=scoring, buckets=2)
    cached = Retriever(cached_retriever, reranker, n=10, k=10)
    recomputed = Retriever(cached_retriever, reranker, n=10, k=10, cache=False)
    for example in musique_dev[:3]:
        a, b = cached(example.question), recomputed(example.question)
        assert a.ids == b.ids and sorted(a.candidates) == sorted(a.ids)
        np.testing.assert_allclose(a.scores, b.scores, atol=2e-3)  # float16 cache


def test_reranking_reorders_the_first_stage_and_saves_with_its_settings(cached_retriever, musique_dev, tmp_path):
    from multihop.retrievers import load_retriever

    retriever = Retriever(cached_retriever, RaLa(), n=20, k=5)
    question = musique_dev[1].question
    first = cached_retriever(question, k=20)
    reranked = retriever(question)
    assert reranked.candidates == first.ids and set(reranked.ids) <= set(first.ids)
    assert reranked.scores == sorted(reranked.scores, reverse=True)
    retriever.save(tmp_path / "r")
    loaded = load_retriever(tmp_path / "r")
    assert isinstance(loaded, Retriever) and loaded.reranker.config() == retriever.reranker.config()
    assert loaded(question).ids == reranked.ids and loaded.first_stage.tokens is not None
    batch = retriever([question, musique_dev[2].question])
    assert [p.ids for p in batch] == [reranked.ids, retriever(musique_dev[2].question).ids]


def test_program_copies_share_the_retriever_and_copy_the_predictors(cached_retriever):
    from multihop.programs import CoopRAG, SingleStepRAG

    reranked = Retriever(cached_retriever, RaLa(buckets=2), n=6, k=3)
    for program in (SingleStepRAG(retriever=reranked), CoopRAG(retriever=reranked)):
        for copied in (program.deepcopy(), program.reset_copy()):
            assert copied.retriever is reranked and copied.retriever.first_stage is cached_retriever
            assert all(a is not b for (_, a), (_, b) in zip(program.named_predictors(), copied.named_predictors(),
                                                            strict=True))
