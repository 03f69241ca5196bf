import json
import math
import random
import shutil

import dspy
import pytest
import torch

from multihop.lm import models
from multihop.programs.cooprag import training as coop
from multihop.retrievers import Encoder, scoring
from multihop.retrievers import finetune as ft
from multihop.retrievers.encoder import FINETUNED_STAMP, resolve_encoder
from multihop.retrievers.finetune import TrainConfig, TrainingSample
from multihop.retrievers.rala_loss import (
    RaLaLoss,
    difficulty_weights,
    exclusions,
    label_row,
    paper_loss,
    punctuation_ids,
    symmetric_loss,
)
from multihop.retrievers.scoring import OMEGA_FLOOR, score_eq3, score_eq4
from multihop.signatures.cooprag import SPECIAL_TOKENS

from helpers import tiny


def ones(n):
    return torch.ones(n, 1, dtype=torch.bool)


def infonce(row, positive, tau=0.05):
    return -(row[positive] / tau - math.log(sum(math.exp(s / tau) for s in row)))


def test_the_paper_loss_equals_a_hand_computed_infonce():
    q = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    d = torch.tensor([[1, 0], [0, 1], [0.6, 0.8], [0.8, 0.6], [-1, 0], [0, -1]], dtype=torch.float32)[:, None]
    weights = difficulty_weights([2, 3])
    assert weights.tolist() == pytest.approx([math.log(3), math.log(4)])
    rows = [[1, 0, 0.6, 0.8, -1, 0], [0, 1, 0.8, 0.6, 0, -1]]  # cosines; the positive of question i is document i
    plain = score_eq4(q, ones(2), d, ones(6), torch.zeros(6, 1, 2), omega=False)
    expected = math.log(3) * infonce(rows[0], 0) + math.log(4) * infonce(rows[1], 1)
    assert paper_loss(plain, weights, tau=0.05).item() == pytest.approx(expected, rel=1e-4)
    # with ω: premature [CLS] states of zeros make ω = <q0, d0^L> - 0, the cosine itself, floored at OMEGA_FLOOR (a
    # document at cosine -1 would otherwise tie with the positive at cosine² = 1)
    omega_rows = [[max(s, OMEGA_FLOOR) * s for s in row] for row in rows]
    expected = math.log(3) * infonce(omega_rows[0], 0) + math.log(4) * infonce(omega_rows[1], 1)
    with_omega = score_eq4(q, ones(2), d, ones(6), torch.zeros(6, 1, 2))
    assert paper_loss(with_omega, weights).item() == pytest.approx(expected, rel=1e-5)
    unweighted = paper_loss(plain, difficulty_weights([2, 3], alpha=False))
    assert unweighted.item() == pytest.approx(infonce(rows[0], 0) + infonce(rows[1], 1), rel=1e-5)


def test_a_questions_other_supporting_paragraphs_leave_its_denominator():
    scores = torch.tensor([[1.0, 0.8, 0.6]])  # positive, other gold, other
    loss = paper_loss(scores, torch.ones(1), tau=0.05, exclude=torch.tensor([[False, True, False]]))
    expected = -(1 / 0.05 - math.log(math.exp(1 / 0.05) + math.exp(0.6 / 0.05)))  # the other gold is not counted
    assert loss.item() == pytest.approx(expected, rel=1e-4)
    # the labels carry it: sample 0 (gold texts 0 and 5) has document 5 as sample 1's distractor; its own positive
    # (text 0, j = i) stays; sample 1 excludes nothing
    labels = torch.tensor([label_row(2, [0, 5], 2, [0, 1]), label_row(1, [], 2, [2, 5])])
    assert labels.tolist()[1] == [1, -1, -1, 2, 5]
    assert exclusions(labels, columns=2).tolist() == [[False, False, False, True], [False, False, False, False]]


def test_eq3_as_the_training_score_is_the_token_level_gap_on_a_hand_computed_batch():
    q = torch.tensor([[[1.0, 0.0]]])
    d = torch.tensor([[[1.0, 0.0]], [[0.6, 0.8]]])
    layer_tokens = torch.tensor([[[[0.0, 1.0]]], [[[0.8, 0.6]]]])  # [m, |C|, T, d]
    # g = <q, d^L> − <q, d^l>: 1 − 0 = 1 for the positive, 0.6 − 0.8 = −0.2 for the other (Eq. 3; no ω)
    expected = -(1 - math.log(math.exp(1) + math.exp(-0.2)))  # τ = 1
    scores = score_eq3(q, ones(1), d, ones(2), layer_tokens)
    assert paper_loss(scores, torch.ones(1), tau=1).item() == pytest.approx(expected, rel=1e-4)
    eq4 = -(1 - math.log(math.exp(1) + math.exp(0.6 * 0.6)))  # Eq. 4: ω = the cosine against zero premature states
    assert paper_loss(score_eq4(q, ones(1), d, ones(2), torch.zeros(2, 1, 2)), torch.ones(1), tau=1).item() == \
        pytest.approx(eq4, rel=1e-4)
    with pytest.raises(ValueError, match=r"score \(--score\) must be one of eq4, eq3, not 'eq5'"):
        TrainConfig(score="eq5")  # refused before any model loads


def test_the_cross_entropy_variant_is_a_weighted_mean_of_pairwise_decisions():
    scores = torch.tensor([[1.0, 0.8, 0.6]])

    def bce(score, label):
        p = 1 / (1 + math.exp(-score / 0.05))
        return -(label * math.log(p) + (1 - label) * math.log(1 - p))

    loss = paper_loss(scores, torch.tensor([2.0]), tau=0.05, loss="bce")
    assert loss.item() == pytest.approx(2.0 * (bce(1, 1) + bce(0.8, 0) + bce(0.6, 0)) / 3, rel=1e-4)
    exclude = torch.tensor([[False, True, False]])
    excluded = paper_loss(scores, torch.tensor([2.0]), tau=0.05, loss="bce", exclude=exclude)
    assert excluded.item() == pytest.approx(2.0 * (bce(1, 1) + bce(0.6, 0)) / 2, rel=1e-4)
    with pytest.raises(ValueError, match="loss must be"):
        paper_loss(scores, torch.ones(1), loss="mse")


def test_the_released_loss_is_the_weighted_forward_mean_plus_the_backward_mean_over_positives():
    logits = torch.tensor([[2.0, 0.0, 1.0, -1.0], [0.5, 1.5, 0.0, 2.0]])  # 2 queries, 2 positives then 2 negatives
    weights = torch.tensor([math.log(3), math.log(2)])

    def ce(row, target):
        return -(row[target] - math.log(sum(math.exp(x) for x in row)))

    rows = logits.tolist()
    forward = (math.log(3) * ce(rows[0], 0) + math.log(2) * ce(rows[1], 1)) / 2  # over all 2B documents
    backward = (ce([rows[0][0], rows[1][0]], 0) + ce([rows[0][1], rows[1][1]], 1)) / 2  # positive j over the queries
    assert symmetric_loss(logits, weights).item() == pytest.approx(forward + backward, rel=1e-6)


def test_each_question_makes_one_sample_per_epoch_with_a_drawn_positive(musique_dev):
    unrolled = {musique_dev[0].id: {"unrolled": "unrolled form", "fallback": True},
                musique_dev[1].id: {"unrolled": "second", "sub_questions": ["a", "b", "c", "d", "e"],
                                    "reasoning_chain": [["x", "r", "y"], ["y", "r", "<FILL>"]]}}
    questions = coop.training_questions(musique_dev[:4], unrolled=unrolled)
    assert len(questions) == 4  # one per question, whatever its number of supporting paragraphs
    first = musique_dev[0]
    own = {f"{p['title']}: {p['text']}" for p in first.paragraphs}
    supporting = {f"{p['title']}: {p['text']}" for p in first.paragraphs if p["is_supporting"]}
    assert questions[0].query == "unrolled form" and set(questions[0].positives) == supporting
    assert set(questions[0].distractors) == own - supporting and not set(questions[0].negatives) & own
    assert questions[0].sub_questions == 1  # a fallback unrolling wrote no sub-question: one step, never the gold's
    assert questions[1].sub_questions == 5  # |S| from the unrolling (§3.6)
    assert coop.training_questions(musique_dev[:4], unrolled=unrolled, alpha_from="chain")[1].sub_questions == 2
    assert [q.sub_questions for q in coop.training_questions(musique_dev[2:4])] == [1, 1]  # no unrolling: one step
    batches = coop.training_batches(questions, TrainConfig(batch_size=4, epochs=3))
    assert len(batches) == 3 and all(len({s.query for s in batch}) == 4 for batch in batches)  # once per epoch
    firsts = [s for batch in batches for s in batch if s.query == "unrolled form"]
    assert all(s.documents[0] in supporting and s.gold == questions[0].positives for s in firsts)
    assert all(s.documents[1] in own - supporting and s.documents[2] not in own for s in firsts)
    assert coop.training_questions(musique_dev[:4]) == coop.training_questions(musique_dev[:4])  # seeded
    assert len(coop.training_batches(questions, TrainConfig(batch_size=3, epochs=2))) == 2  # the ragged 4th dropped


def test_the_released_samples_pair_each_supporting_paragraph_with_a_hard_negative(musique_dev):
    questions = coop.training_questions(musique_dev[:10], recipe="released")
    assert len(questions) == 10 and not any(q.negatives for q in questions)  # no random negative
    samples = coop._released_epoch(questions, ["elsewhere"], random.Random(0))
    assert len(samples) == sum(len(q.positives) for q in questions)  # one per (question, supporting paragraph)
    for q in questions:
        mine = [s for s in samples if s.query == q.query]
        assert sorted(s.documents[0] for s in mine) == sorted(q.positives) and not any(s.gold for s in mine)
        negatives = [s.documents[1] for s in mine]  # hard negatives, drawn without replacement
        assert len(set(negatives)) == len(negatives) and set(negatives) <= set(q.distractors)
    lacking = coop.TrainingQuestion("q", ("g1", "g2"), ("d1",), (), 2)  # fewer distractors than supporting ones
    drawn = {s.documents[1] for s in coop._released_epoch([lacking], ["p1", "p2", "p3"], random.Random(0))}
    assert len(drawn) == 2 and drawn <= {"p1", "p2", "p3"}  # from all the training paragraphs
    config = TrainConfig.for_recipe("released", batch_size=4, epochs=2)
    assert len(coop.training_batches(questions, config)) == 10 // 4 * 2  # the released schedule's horizon


def test_training_without_unrollings_warns_that_alpha_is_constant(musique_dev, caplog):
    unrolled = {musique_dev[0].id: {"unrolled": "unrolled form", "sub_questions": ["a", "b"]},
                musique_dev[1].id: {"unrolled": musique_dev[1].question, "fallback": True}}
    with caplog.at_level("WARNING", logger="multihop.programs.cooprag.training"):
        coop.training_questions(musique_dev[:3], unrolled=unrolled)
    assert "2 of 3 training questions have no unrolling" in caplog.text and "α = log 2" in caplog.text
    caplog.clear()
    everything = {e.id: {"unrolled": e.question, "sub_questions": ["a"]} for e in musique_dev[:3]}
    with caplog.at_level("WARNING", logger="multihop.programs.cooprag.training"):
        coop.training_questions(musique_dev[:3], unrolled=everything)
    assert caplog.text == ""


def test_the_released_recipe_sets_its_defaults_and_refuses_what_contradicts_it():
    released = TrainConfig.for_recipe("released", lr=None, epochs=6)
    settings = ("lr", "epochs", "weight_decay", "schedule", "warmup_steps", "max_grad_norm", "fp16", "batch_size")
    assert [getattr(released, name) for name in settings] == [1e-6, 6, 1e-5, "linear", 400, 10.0, True, 40]
    assert TrainConfig.for_recipe("paper") == TrainConfig()
    assert TrainConfig(recipe="released") == TrainConfig.for_recipe("released")  # built directly: the same defaults
    mine = TrainConfig(recipe="released", lr=3e-6)
    assert (mine.lr, mine.weight_decay, mine.schedule) == (3e-6, 1e-5, "linear")  # a given setting overrides
    assert released.layers(12) == (0, 4, 7, 11) and TrainConfig().layers(12) == (2, 5, 7, 11)  # drawn per bucket
    for given, flag in (({"loss": "bce"}, "--loss"), ({"score": "eq3"}, "--score"), ({"buckets": 4}, "--buckets")):
        with pytest.raises(ValueError, match=f"drop {flag} or use --recipe paper"):
            TrainConfig.for_recipe("released", **given)
    assert TrainConfig.for_recipe("released", loss="infonce", score="eq4").loss == "infonce"
    with pytest.raises(ValueError, match="has 6 layers: fine-tune an encoder of 11 or more"):
        released.layers(6)
    with pytest.raises(ValueError, match=r"recipe \(--recipe\) must be one of paper, released"):
        TrainConfig.for_recipe("authors")


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> str:
    """A 4-layer tiny encoder (:func:`tiny`)."""
    return tiny(tmp_path_factory.mktemp("tiny-encoder"), 4)


@pytest.fixture(scope="module")
def tiny_encoder_12(tmp_path_factory) -> str:
    """A 12-layer tiny encoder (:func:`tiny`): the released recipe reads hidden states up to 11."""
    return tiny(tmp_path_factory.mktemp("tiny-encoder-12"), 12)


def _batch(musique_dev, recipe="paper", n=3):
    questions = coop.training_questions(musique_dev[:6], recipe=recipe)
    return coop.training_batches(questions, TrainConfig.for_recipe(recipe, batch_size=n, epochs=1))[0]


def _features(encoder, batch):
    """The tokenised columns of ``batch`` (queries, then each document column) and its labels, as the trainer's
    collator and dataset give them."""
    texts: dict[str, int] = {}

    def ids(items):
        return [texts.setdefault(text, len(texts)) for text in items]

    columns = [[s.query for s in batch], *([s.documents[c] for s in batch] for c in range(len(batch[0].documents)))]
    width = max(len(s.gold) for s in batch)
    labels = torch.tensor([label_row(s.difficulty, ids(s.gold), width, ids(s.documents)) for s in batch])
    return [encoder.model.preprocess(column) for column in columns], labels


def _full_batch_loss(encoder, batch, layers, recipe, omega, score, loss_module):
    """The loss of ``batch`` from one forward pass over all its texts (no caching): the reference."""
    q = encoder.forward([s.query for s in batch])
    docs = [text for c in range(len(batch[0].documents)) for text in (s.documents[c] for s in batch)]
    d = encoder.forward(docs, token_layers=tuple(layers) if score == "eq3" else ())
    weights = difficulty_weights([s.difficulty for s in batch])
    if recipe == "released":
        drop = torch.isin(encoder.model.preprocess(docs)["input_ids"], punctuation_ids(encoder.model.tokenizer))
        sim = scoring.maxsim(q["tokens"], q["mask"], scoring.zero_tokens(d["tokens"], drop), d["mask"],
                             floor=scoring.RELEASED_PADDING)
        scores = scoring.released_omega(q["cls"][:, 11], d["cls"][:, 11], d["cls"][:, [0, 4, 7]]) * sim if omega \
            else sim
        return symmetric_loss(scores * loss_module.log_inv_t.exp(), weights)
    exclude = torch.tensor([[j != i and text in s.gold for j, text in enumerate(docs)] for i, s in enumerate(batch)])
    if score == "eq3":
        scores = score_eq3(q["tokens"], q["mask"], d["tokens"], d["mask"],
                           torch.stack([d["layer_tokens"][layer] for layer in layers], dim=1))
    else:
        scores = score_eq4(q["tokens"], q["mask"], d["tokens"], d["mask"], d["cls"][:, list(layers)], omega=omega)
    return paper_loss(scores, weights, exclude=exclude)


@pytest.mark.parametrize(("recipe", "omega", "score"), [("paper", True, "eq4"), ("paper", False, "eq4"),
                                                        ("paper", True, "eq3"), ("released", True, "eq4"),
                                                        ("released", False, "eq4")])
def test_the_cached_loss_gives_the_full_batch_loss_and_gradient(musique_dev, tiny_encoder, tiny_encoder_12, recipe,
                                                                omega, score):
    encoder = Encoder(tiny_encoder_12 if recipe == "released" else tiny_encoder)
    encoder.model.eval()  # no dropout, so both passes see the same network
    batch = _batch(musique_dev, recipe)
    layers = (0, 4, 7, 11) if recipe == "released" else (1, 4)
    module = RaLaLoss(encoder.model, layers, recipe=recipe, omega=omega, score=score, mini_batch_size=2)
    features, labels = _features(encoder, batch)
    cached = module(features, labels)
    cached.backward()
    grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    assert len(grads) > 10
    module.zero_grad()
    full = _full_batch_loss(encoder, batch, layers, recipe, omega, score, module)
    full.backward()
    assert cached.item() == pytest.approx(full.item(), rel=1e-5)
    for name, param in module.named_parameters():
        if param.grad is not None:
            torch.testing.assert_close(grads[name], param.grad, atol=1e-5, rtol=1e-4)
    assert set(grads) == {n for n, p in module.named_parameters() if p.grad is not None}
    assert ("log_inv_t" in grads) == (recipe == "released")


def test_one_real_step_lowers_the_loss_and_trains_the_released_temperature(musique_dev, tiny_encoder, tiny_encoder_12):
    for path, recipe, layers in ((tiny_encoder, "paper", (1, 4)), (tiny_encoder_12, "released", (0, 4, 7, 11))):
        encoder = Encoder(path)
        encoder.model.eval()
        module = RaLaLoss(encoder.model, layers, recipe=recipe, mini_batch_size=4)
        features, labels = _features(encoder, _batch(musique_dev, recipe))
        optimizer = torch.optim.AdamW(module.parameters(), lr=2e-5)
        before = module(features, labels)
        before.backward()
        if recipe == "released":
            assert module.log_inv_t.grad.abs().item() > 0  # a trained parameter
            assert module.temperature == pytest.approx(0.05)
        optimizer.step()
        optimizer.zero_grad()
        assert module(features, labels).item() < before.item()
        if recipe == "released":
            assert module.temperature != pytest.approx(0.05, abs=1e-7)  # learnt with the encoder


def _hidden(texts: int, seed: int) -> list[torch.Tensor]:
    """Made-up hidden states 0..12 of ``texts`` texts of 3 tokens, width 2."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(texts, 3, 2, generator=generator) for _ in range(13)]


def test_the_released_omega_reads_the_fixed_layers_only(tiny_encoder_12):
    module = RaLaLoss(Encoder(tiny_encoder_12).model, (0, 4, 7, 11), recipe="released")
    letters = module.model.tokenizer.convert_tokens_to_ids(["[CLS]", "a", "b"])

    def scores(q_hidden, d_hidden):
        q = module.unpack([module.pack(q_hidden, torch.ones(1, 3), torch.tensor([letters]))])
        d = module.unpack([module.pack(d_hidden, torch.ones(2, 3), torch.tensor([letters, letters]))])
        return module.scores(q, d)

    q_hidden, d_hidden = _hidden(1, 0), _hidden(2, 1)
    base = scores(q_hidden, d_hidden)
    for layer, reads in ((5, False), (1, False), (10, False), (4, True), (0, True), (7, True), (11, True)):
        changed = [h.clone() for h in d_hidden]
        changed[layer][:, 0] = torch.tensor([0.3, -0.9])  # the documents' [CLS] state at hidden state ``layer``
        assert torch.equal(scores(q_hidden, changed), base) != reads, layer
    # ω by hand: (⟨q11, d11⟩ − min over 0, 4, 7 of ⟨q11, d_l⟩) / 2, on normalised [CLS] states
    unit = [torch.nn.functional.normalize(h[:, 0], dim=-1) for h in d_hidden]
    q11 = torch.nn.functional.normalize(q_hidden[11][0, 0], dim=-1)
    omega = (unit[11] @ q11 - torch.stack([unit[layer] @ q11 for layer in (0, 4, 7)]).min(dim=0).values) / 2
    plain = RaLaLoss(module.model, (0, 4, 7, 11), recipe="released", omega=False)
    q = plain.unpack([plain.pack(q_hidden, torch.ones(1, 3), torch.tensor([letters]))])
    d = plain.unpack([plain.pack(d_hidden, torch.ones(2, 3), torch.tensor([letters, letters]))])
    torch.testing.assert_close(base[0], omega * plain.scores(q, d)[0])


def test_the_released_maxsim_zeroes_exactly_the_documents_punctuation(tiny_encoder_12):
    module = RaLaLoss(Encoder(tiny_encoder_12).model, (0, 4, 7, 11), recipe="released", omega=False)
    cls, dot, comma, a = module.model.tokenizer.convert_tokens_to_ids(["[CLS]", ".", ",", "a"])
    states = {cls: [0.6, 0.8], dot: [1.0, 0.0], comma: [0.0, 1.0], a: [0.8, 0.6]}

    def packed(rows):
        hidden = [torch.tensor([[states[i] for i in row] for row in rows])] * 13
        return module.unpack([module.pack(hidden, torch.ones(len(rows), len(rows[0])), torch.tensor(rows))])

    # query [CLS] (0.6, 0.8) and "." (1, 0) (a query's punctuation is kept); documents [CLS] "." "a" and [CLS] "," "a"
    q, d = packed([[cls, dot]]), packed([[cls, dot, a], [cls, comma, a]])
    # [CLS]: best 1 (the [CLS]) in both; ".": its twin in document 1 scores 0, so the best is "a" at 0.8 (else 1)
    assert module.scores(q, d)[0].tolist() == pytest.approx([(1 + 0.8) / 2, (1 + 0.8) / 2])
    assert scoring.maxsim(q["tokens"], q["mask"], d["tokens"], d["mask"])[0].tolist() == \
        pytest.approx([(1 + 1) / 2, (1 + 0.8) / 2])  # unfiltered
    assert punctuation_ids(module.model.tokenizer).tolist() == module.model.tokenizer.convert_tokens_to_ids(
        list(scoring.PUNCTUATION))


def test_the_released_maxsim_zeroes_punctuation_rather_than_masking_it(tiny_encoder_12):
    module = RaLaLoss(Encoder(tiny_encoder_12).model, (0, 4, 7, 11), recipe="released", omega=False)
    cls, dot, a = module.model.tokenizer.convert_tokens_to_ids(["[CLS]", ".", "a"])
    states = {cls: [-0.6, 0.8], dot: [1.0, 0.0], a: [-0.8, 0.6]}  # against the query's (1, 0): −0.6, 1, −0.8

    def packed(rows):
        hidden = [torch.tensor([[states[i] for i in row] for row in rows])] * 13
        return module.unpack([module.pack(hidden, torch.ones(len(rows), len(rows[0])), torch.tensor(rows))])

    q, d = packed([[dot]]), packed([[cls, dot, a]])
    assert module.scores(q, d).item() == pytest.approx(0.0)  # the zeroed "." wins the max over −0.6 and −0.8
    masked = scoring.maxsim(q["tokens"], q["mask"], d["tokens"], d["mask"] & ~d["punctuation"])
    assert masked.item() == pytest.approx(-0.6)  # what masking it would give


def test_the_released_trainer_decays_schedules_and_clips_the_temperature(musique_dev, tiny_encoder_12, tmp_path):
    from multihop.data.checkpoints import TrainingRecord

    config = TrainConfig(recipe="released", encoder=tiny_encoder_12, batch_size=4, micro_batch=4, warmup_steps=2)
    encoder = Encoder(tiny_encoder_12)
    dataset, _ = ft._dataset(coop.training_batches(coop.training_questions(musique_dev[:8], recipe="released"),
                                                   config)[:1])
    loss = RaLaLoss(encoder.model, (0, 4, 7, 11), recipe="released", mini_batch_size=4)
    trainer = ft._trainer(encoder, dataset, loss, config, tmp_path, 3, 6, TrainingRecord({}))
    trainer.create_optimizer_and_scheduler(num_training_steps=3)
    decayed = [p for group in trainer.optimizer.param_groups if group["weight_decay"] == 1e-5 for p in group["params"]]
    assert len(decayed) == len(list(loss.parameters())) and any(p is loss.log_inv_t for p in decayed)  # all decay
    rates = []
    for _ in range(7):  # 2 warm-up steps, then linear to 0 over the horizon of 6, though max_steps is 3
        rates.append(trainer.lr_scheduler.get_last_lr()[0])
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
    assert rates == pytest.approx([0, 0.5e-6, 1e-6, 0.75e-6, 0.5e-6, 0.25e-6, 0])
    default = ft._trainer(encoder, dataset, loss, TrainConfig(recipe="released", encoder=tiny_encoder_12,
                                                                batch_size=4), tmp_path, 3, 6, TrainingRecord({}))
    assert default.args.warmup_steps == 6  # min(400, horizon)
    for param in loss.parameters():
        param.grad = torch.zeros_like(param)
    loss.log_inv_t.grad = torch.tensor(1e6)
    assert trainer._clip_grad_norm(trainer.model).item() == pytest.approx(1e6)
    assert loss.log_inv_t.grad.item() == pytest.approx(10.0, rel=1e-4)  # clipped with the weights, to 10 overall


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["paper", "released"])
def test_training_resumes_as_if_uninterrupted(musique_dev, tiny_encoder, tiny_encoder_12, tmp_path, monkeypatch,
                                              recipe):
    encoder = tiny_encoder_12 if recipe == "released" else tiny_encoder
    config = TrainConfig.for_recipe(recipe, encoder=encoder, batch_size=4, micro_batch=4, epochs=2, max_steps=3,
                                    checkpoint_every=1, lr=1e-3)
    batches = coop.training_batches(coop.training_questions(musique_dev[:8], recipe=recipe), config)
    real, calls, crash = RaLaLoss.forward, [], [True]

    def counted(self, *args):
        calls.append(1)
        if crash[0] and len(calls) == 3:
            raise RuntimeError("killed")
        return real(self, *args)

    monkeypatch.setattr(RaLaLoss, "forward", counted)
    with pytest.raises(RuntimeError, match="killed"):
        ft.train(batches, tmp_path / "a", config)
    saved = list((tmp_path / "a" / ft.CHECKPOINTS).glob("checkpoint-*"))
    assert [p.name for p in saved] == ["checkpoint-2"]  # the last one kept
    assert (saved[0] / ft.LOSS_WEIGHTS).exists() == (recipe == "released")  # the learnt temperature
    if recipe == "released":  # a checkpoint without it would restart the temperature at 1/τ: refused
        shutil.copytree(tmp_path / "a" / ft.CHECKPOINTS, tmp_path / "c" / ft.CHECKPOINTS)
        (tmp_path / "c" / ft.CHECKPOINTS / saved[0].name / ft.LOSS_WEIGHTS).unlink()
        with pytest.raises(ValueError, match=f"checkpoint-2 lacks {ft.LOSS_WEIGHTS} .*: remove .*checkpoints"):
            ft.train(batches, tmp_path / "c", config)
    with pytest.raises(ValueError, match="another training config or other training samples"):
        ft.train(batches, tmp_path / "a", TrainConfig(**{**vars(config), "lr": 1.0}))
    with pytest.raises(ValueError, match="another training config or other training samples"):
        ft.train(batches[1:], tmp_path / "a", config)
    calls.clear()
    crash[0] = False
    ft.train(batches, tmp_path / "a", TrainConfig(**{**vars(config), "checkpoint_every": 2}), questions=8)
    assert len(calls) == 1  # the first two steps came from the checkpoint (another interval resumes it too)
    ft.train(batches, tmp_path / "b", config, questions=8)  # uninterrupted
    resumed, uninterrupted = (json.loads((tmp_path / run / FINETUNED_STAMP).read_text()) for run in "ab")
    assert resumed["sha256"] == uninterrupted["sha256"] and resumed["loss"] == uninterrupted["loss"]
    assert resumed["temperature"] == uninterrupted["temperature"]
    assert len(resumed["loss"]) == 3 and resumed["steps"] == 3 and resumed["questions"] == 8
    assert not (tmp_path / "a" / ft.CHECKPOINTS).exists()


def test_a_trained_folder_is_checked_and_keeps_its_markers_and_layers(musique_dev, tiny_encoder, tmp_path, caplog):
    config = TrainConfig(encoder=tiny_encoder, batch_size=4, micro_batch=4, epochs=1, max_steps=1, buckets=3,
                         special_tokens=SPECIAL_TOKENS)
    folder = coop.fine_tune(coop.training_questions(musique_dev[:8]), tmp_path, config)
    stamp = json.loads((folder / FINETUNED_STAMP).read_text())
    assert stamp["temperature"] == 0.05 and stamp["config"]["recipe"] == "paper" and stamp["questions"] == 8
    assert resolve_encoder(str(folder)) == folder
    tuned = Encoder(str(folder))  # keeps the special tokens it was trained with, without being asked
    assert tuned.encode(["a question"]).shape == (1, 32)
    assert stamp["special_tokens"] == list(SPECIAL_TOKENS) and tuned.special_tokens == SPECIAL_TOKENS
    assert [p for p in tuned.model.tokenizer.tokenize("(<UNCERTAIN>, founded, <FILL>)") if p in SPECIAL_TOKENS] == [
        "<UNCERTAIN>", "<FILL>"]
    from multihop.retrievers import RaLa

    same = RaLa(encoder=str(folder), buckets=3, seed=0)  # what training drew: accepted
    assert list(same.layers(tuned.num_layers)) == stamp["layers"]
    stamped = RaLa(encoder=str(folder))  # buckets and seed left out: the training's
    assert stamped.settings() == (3, 0) and list(stamped.layers(tuned.num_layers)) == stamp["layers"]
    assert "fine-tuned with score" not in caplog.text  # the training's score: no warning
    RaLa("eq3", encoder=str(folder)).layers(tuned.num_layers)
    assert "fine-tuned with score eq4 (ω True); this reranker scores with eq3" in caplog.text
    with pytest.raises(ValueError, match=r"fine-tuned contrasting layers .* \(buckets 3, seed 0\)"):
        RaLa(encoder=str(folder), buckets=2, seed=0).layers(tuned.num_layers)
    (folder / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(models.ChecksumMismatchError):
        resolve_encoder(str(folder))


@pytest.mark.slow
def test_a_released_training_learns_its_temperature_and_reranks_as_the_released_code(musique_dev, tiny_encoder_12,
                                                                                    tmp_path, caplog):
    from multihop.retrievers import Hits, MaxSim, RaLa

    config = TrainConfig.for_recipe("released", encoder=tiny_encoder_12, batch_size=4, micro_batch=4, epochs=2,
                                    lr=1e-3)
    questions = coop.training_questions(musique_dev[:8], recipe="released")
    coop.fine_tune(questions, tmp_path, config)
    stamp = json.loads((tmp_path / FINETUNED_STAMP).read_text())
    assert stamp["layers"] == [0, 4, 7, 11] and stamp["config"]["recipe"] == "released"
    assert stamp["steps"] == len(questions) // 4 * 2 and stamp["temperature"] != pytest.approx(0.05, abs=1e-6)
    candidates = Hits(passages=["a tower in paris.", "bananas, yellow", "paris is in france"], ids=["0", "1", "2"],
                      scores=[0.0] * 3)
    rala, maxsim = RaLa(encoder=str(tmp_path)), MaxSim(encoder=str(tmp_path))
    assert rala.layers(12) == () and rala.cls_layers(12) == ()  # not refused, no layer drawn
    ranked = rala.rerank("where is paris?", candidates, k=3)
    assert ranked.scores == maxsim.rerank("where is paris?", candidates, k=3).scores  # the released inference
    assert "released recipe, whose code reranks by MaxSim alone" in caplog.text
    with pytest.raises(ValueError, match="whose code has no Eq. 3; rerank it with rala-eq4"):
        RaLa("eq3", encoder=str(tmp_path)).layers(12)


@pytest.mark.slow
def test_the_command_trains_either_recipe_and_refuses_what_contradicts_it(tiny_encoder_12, tmp_path, capsys):
    from multihop.cli import app
    from multihop.cli.errors import run

    from helpers import data_root

    data = str(data_root() / "musique/dev/musique_qa_100.json")
    base = ["cooprag", "train", data, "--limit", "8", "--encoder", tiny_encoder_12, "--batch-size", "4",
            "--micro-batch", "4", "--max-steps", "1"]
    for extra, wrong in ((["--loss", "bce"], "--loss"), (["--buckets", "3"], "--buckets"),
                         (["--score", "eq3"], "--score"), (["--alpha-from", "chain"], "--alpha-from")):
        assert run(app, [*base, "--out", str(tmp_path / "x"), "--recipe", "released", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err and f"drop {wrong} or use --recipe paper" in err
    assert run(app, [*base, "--out", str(tmp_path / "r"), "--recipe", "released"]) == 0
    assert "8 training questions of 8 (released recipe)" in capsys.readouterr().out
    stamp = json.loads((tmp_path / "r" / FINETUNED_STAMP).read_text())
    assert stamp["config"]["recipe"] == "released" and stamp["config"]["lr"] == 1e-6 and stamp["steps"] == 1
    assert run(app, [*base, "--out", str(tmp_path / "p"), "--epochs", "3"]) == 0
    config = json.loads((tmp_path / "p" / FINETUNED_STAMP).read_text())["config"]
    assert (config["recipe"], config["lr"], config["epochs"], config["buckets"]) == ("paper", 2e-5, 3, 4)


def test_unrolling_file_errors_name_the_line(tmp_path):
    path = tmp_path / "unrolled.jsonl"
    path.write_text('{"id": "q1", "unrolled": "U"}\n{"id": "q2"}\n')
    with pytest.raises(ValueError, match="unrolled.jsonl:2"):
        coop.read_unrolled(path)
    with pytest.raises(ValueError, match="two questions"):
        coop.training_questions([])


def test_questions_without_both_kinds_of_paragraph_are_refused():
    only_gold = [dspy.Example(id=f"g{i}", question="q", paragraphs=[{"title": "G", "text": "g", "is_supporting": True}])
                 for i in range(2)]
    with pytest.raises(ValueError, match="both a supporting and a non-supporting"):
        coop.training_questions(only_gold)
    with pytest.raises(ValueError, match="alpha_from"):
        coop.training_questions(only_gold, alpha_from="hops")
    with pytest.raises(ValueError, match="questions make no batch of 40"):
        coop.training_batches(coop.training_questions(only_gold, recipe="released"), TrainConfig.for_recipe("released"))
    assert TrainingSample("q", ("d",)).difficulty == 1
