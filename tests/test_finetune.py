import json
import math
import string

import dspy
import pytest
import torch

from multihop import models
from multihop.retrievers import Encoder
from multihop.retrievers import finetune as ft
from multihop.retrievers.finetune import TrainConfig, batch_loss, difficulty_weights
from multihop.retrievers.scoring import OMEGA_FLOOR
from multihop.signatures.cooprag import SPECIAL_TOKENS


def test_batch_loss_equals_a_hand_computed_infonce():
    queries = {"tokens": torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]]), "mask": torch.ones(2, 1, dtype=torch.bool)}
    docs = torch.tensor([[1, 0], [0, 1], [0.6, 0.8], [0.8, 0.6], [-1, 0], [0, -1]], dtype=torch.float32)[:, None]
    documents = {"tokens": docs, "mask": torch.ones(6, 1, dtype=torch.bool), "cls_layers": torch.zeros(6, 1, 2)}
    weights = difficulty_weights([2, 3])
    assert weights.tolist() == pytest.approx([math.log(3), math.log(4)])
    rows = [[1, 0, 0.6, 0.8, -1, 0], [0, 1, 0.8, 0.6, 0, -1]]  # cosines; the positive of question i is document i

    def infonce(row, positive):
        return -(row[positive] / 0.05 - math.log(sum(math.exp(s / 0.05) for s in row)))

    expected = math.log(3) * infonce(rows[0], 0) + math.log(4) * infonce(rows[1], 1)
    loss = batch_loss(queries, documents, weights, tau=0.05, omega=False)
    assert loss.item() == pytest.approx(expected, rel=1e-4)
    # with ω: premature [CLS] states of zeros make ω = <q0, d0^L> - 0, the cosine itself, floored at OMEGA_FLOOR (a
    # document at cosine -1 would otherwise tie with the positive at cosine² = 1)
    omega_rows = [[max(s, OMEGA_FLOOR) * s for s in row] for row in rows]
    expected = math.log(3) * infonce(omega_rows[0], 0) + math.log(4) * infonce(omega_rows[1], 1)
    assert batch_loss(queries, documents, weights).item() == pytest.approx(expected, rel=1e-5)
    unweighted = batch_loss(queries, documents, difficulty_weights([2, 3], alpha=False), omega=False)
    assert unweighted.item() == pytest.approx(infonce(rows[0], 0) + infonce(rows[1], 1), rel=1e-5)


def test_each_question_makes_one_sample_per_epoch_with_a_drawn_positive(musique_dev):
    unrolled = {musique_dev[0].id: {"unrolled": "unrolled form", "fallback": True},
                musique_dev[1].id: {"unrolled": "second", "sub_questions": ["a", "b", "c", "d", "e"],
                                    "reasoning_chain": [["x", "r", "y"], ["y", "r", "<FILL>"]]}}
    questions = ft.training_questions(musique_dev[:4], unrolled=unrolled)
    assert len(questions) == 4  # one per question, whatever its number of supporting paragraphs
    first = musique_dev[0]
    own = {f"{p['title']}: {p['text']}" for p in first.paragraphs}
    supporting = {f"{p['title']}: {p['text']}" for p in first.paragraphs if p["is_supporting"]}
    assert questions[0].query == "unrolled form" and set(questions[0].positives) == supporting
    assert set(questions[0].distractors) == own - supporting and not set(questions[0].negatives) & own
    assert questions[0].sub_questions == 1  # a fallback unrolling wrote no sub-question: one step, never the gold's
    assert questions[1].sub_questions == 5  # |S| from the unrolling (§3.6)
    assert ft.training_questions(musique_dev[:4], unrolled=unrolled, alpha_from="chain")[1].sub_questions == 2
    assert [q.sub_questions for q in ft.training_questions(musique_dev[2:4])] == [1, 1]  # no unrolling: one step
    batches = ft._batches(questions, TrainConfig(batch_size=4, epochs=3))
    assert len(batches) == 3 and all(len({s.query for s in batch}) == 4 for batch in batches)  # once per epoch
    firsts = [s for batch in batches for s in batch if s.query == "unrolled form"]
    assert all(s.positive in supporting and s.gold == questions[0].positives for s in firsts)
    assert ft.training_questions(musique_dev[:4]) == ft.training_questions(musique_dev[:4])  # seeded


def test_a_questions_other_supporting_paragraphs_leave_its_denominator():
    queries = {"tokens": torch.tensor([[[1.0, 0.0]]]), "mask": torch.ones(1, 1, dtype=torch.bool)}
    docs = torch.tensor([[1, 0], [0.8, 0.6], [0.6, 0.8]], dtype=torch.float32)[:, None]  # positive, other gold, other
    documents = {"tokens": docs, "mask": torch.ones(3, 1, dtype=torch.bool), "cls_layers": torch.zeros(3, 1, 2)}
    exclude = torch.tensor([[False, True, False]])
    loss = batch_loss(queries, documents, torch.ones(1), tau=0.05, omega=False, exclude=exclude)
    expected = -(1 / 0.05 - math.log(math.exp(1 / 0.05) + math.exp(0.6 / 0.05)))  # the other gold is not counted
    assert loss.item() == pytest.approx(expected, rel=1e-4)


def test_eq3_as_the_training_score_is_the_token_level_gap_on_a_hand_computed_batch():
    queries = {"tokens": torch.tensor([[[1.0, 0.0]]]), "mask": torch.ones(1, 1, dtype=torch.bool)}
    documents = {"tokens": torch.tensor([[[1.0, 0.0]], [[0.6, 0.8]]]), "mask": torch.ones(2, 1, dtype=torch.bool),
                 "cls_layers": torch.zeros(2, 1, 2),
                 "layer_tokens": torch.tensor([[[[0.0, 1.0]]], [[[0.8, 0.6]]]])}  # [m, |C|, T, d]
    # g = <q, d^L> − <q, d^l>: 1 − 0 = 1 for the positive, 0.6 − 0.8 = −0.2 for the other (Eq. 3; no ω)
    expected = -(1 - math.log(math.exp(1) + math.exp(-0.2)))  # τ = 1
    assert batch_loss(queries, documents, torch.ones(1), tau=1, score="eq3").item() == pytest.approx(expected, rel=1e-4)
    eq4 = -(1 - math.log(math.exp(1) + math.exp(0.6 * 0.6)))  # Eq. 4: ω = the cosine against zero premature states
    assert batch_loss(queries, documents, torch.ones(1), tau=1).item() == pytest.approx(eq4, rel=1e-4)
    with pytest.raises(ValueError, match="score must be one of eq4, eq3"):
        batch_loss(queries, documents, torch.ones(1), score="eq5")
    with pytest.raises(ValueError, match="score must be one of eq4, eq3, not 'eq5'"):
        TrainConfig(score="eq5")  # refused before any model loads


def test_training_without_unrollings_warns_that_alpha_is_constant(musique_dev, caplog):
    unrolled = {musique_dev[0].id: {"unrolled": "unrolled form", "sub_questions": ["a", "b"]},
                musique_dev[1].id: {"unrolled": musique_dev[1].question, "fallback": True}}
    with caplog.at_level("WARNING", logger="multihop.retrievers.finetune"):
        ft.training_questions(musique_dev[:3], unrolled=unrolled)
    assert "2 of 3 training questions have no unrolling" in caplog.text and "α = log 2" in caplog.text
    caplog.clear()
    everything = {e.id: {"unrolled": e.question, "sub_questions": ["a"]} for e in musique_dev[:3]}
    with caplog.at_level("WARNING", logger="multihop.retrievers.finetune"):
        ft.training_questions(musique_dev[:3], unrolled=everything)
    assert caplog.text == ""


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> str:
    """A random 4-layer BERT (hidden size 32, a character vocabulary) saved as a sentence-transformers folder: the
    training code on a real transformer, in a fraction of MiniLM's time."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-encoder")
    chars = string.ascii_lowercase + string.digits + string.punctuation
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *(f"##{c}" for c in chars)]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(folder / "hf")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128)  # texts are cut at 128 characters
    BertModel(config).save_pretrained(folder / "hf")
    SentenceTransformer(modules=[Transformer(str(folder / "hf")), Pooling(32, "mean")]).save(str(folder / "st"))
    return str(folder / "st")


def _samples(musique_dev, n=3):
    return ft._batches(ft.training_questions(musique_dev[:3]), TrainConfig(batch_size=n, epochs=1))[0]


@pytest.mark.parametrize(("omega", "score"), [(True, "eq4"), (False, "eq4"), (True, "eq3")])
def test_grad_cache_step_gives_the_full_batch_gradient(musique_dev, tiny_encoder, omega, score):
    encoder = Encoder(tiny_encoder)
    encoder.model.eval()  # no dropout, so both passes see the same network
    batch, layers = _samples(musique_dev), [1, 4]
    encoder.model.zero_grad()
    loss = ft.grad_cache_step(encoder, batch, layers, TrainConfig(micro_batch=3, omega=omega, score=score))
    cached = {n: p.grad.clone() for n, p in encoder.model.named_parameters() if p.grad is not None}
    encoder.model.zero_grad()
    q = encoder.forward([s.query for s in batch])
    d = encoder.forward([s.positive for s in batch] + [s.distractor for s in batch] + [s.negative for s in batch],
                        token_layers=tuple(layers))
    d = {**d, "cls_layers": d["cls"][:, layers], "layer_tokens": torch.stack([d["layer_tokens"][i] for i in layers], 1)}
    full = batch_loss(q, d, difficulty_weights([s.sub_questions for s in batch]), omega=omega, score=score)
    full.backward()
    assert loss == pytest.approx(full.item(), rel=1e-5)
    for name, param in encoder.model.named_parameters():
        if param.grad is not None:
            torch.testing.assert_close(cached[name], param.grad, atol=1e-4, rtol=1e-3)


def test_one_real_training_step_lowers_the_loss(musique_dev, tiny_encoder):
    encoder = Encoder(tiny_encoder)
    model = encoder.model
    batch, layers, config = _samples(musique_dev), [1, 4], TrainConfig(micro_batch=4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    model.eval()
    before = ft.grad_cache_step(encoder, batch, layers, config)
    optimizer.step()
    optimizer.zero_grad()
    after = ft.grad_cache_step(encoder, batch, layers, config)
    assert after < before


def test_training_resumes_and_writes_a_folder_the_registry_checks(musique_dev, tiny_encoder, tmp_path, monkeypatch,
                                                                  caplog):
    samples = ft.training_questions(musique_dev[:6])
    config = TrainConfig(encoder=tiny_encoder, batch_size=4, micro_batch=4, max_steps=2, checkpoint_every=1, buckets=3,
                         special_tokens=SPECIAL_TOKENS)
    real, calls = ft.grad_cache_step, []

    def crash_on_second(*args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("killed")
        return real(*args)

    monkeypatch.setattr(ft, "grad_cache_step", crash_on_second)
    with pytest.raises(RuntimeError, match="killed"):
        ft.train(samples, tmp_path, config)
    assert (tmp_path / ft.CHECKPOINT).exists()
    calls.clear()
    monkeypatch.setattr(ft, "grad_cache_step", lambda *args: calls.append(1) or real(*args))
    ft.train(samples, tmp_path, config)
    assert len(calls) == 1  # the first step came from the checkpoint
    stamp = json.loads((tmp_path / models.FINETUNED_STAMP).read_text())
    assert len(stamp["loss"]) == 2 and not (tmp_path / ft.CHECKPOINT).exists()
    assert models.resolve_encoder(str(tmp_path)) == tmp_path
    tuned = Encoder(str(tmp_path))  # keeps the special tokens it was trained with, without being asked
    assert tuned.encode(["a question"]).shape == (1, 32)
    assert stamp["special_tokens"] == list(SPECIAL_TOKENS) and tuned.special_tokens == SPECIAL_TOKENS
    assert [p for p in tuned.model.tokenizer.tokenize("(<UNCERTAIN>, founded, <FILL>)") if p in SPECIAL_TOKENS] == [
        "<UNCERTAIN>", "<FILL>"]
    identity = {"config": ft.asdict(config), "samples": "checksum of the samples"}
    other_config = {**identity, "config": ft.asdict(TrainConfig(encoder=tiny_encoder, lr=1.0))}
    other_samples = {**identity, "samples": "checksum of other samples"}
    for other in (other_config, other_samples):
        with pytest.raises(ValueError, match="another training config or other training samples"):
            ft._resume(_checkpoint(tmp_path, identity), other, None, None, [])
    from multihop.retrievers import RaLa

    same = RaLa(encoder=str(tmp_path), buckets=3, seed=0)  # what training drew: accepted
    assert list(same.layers(tuned.num_layers)) == stamp["layers"]
    stamped = RaLa(encoder=str(tmp_path))  # buckets and seed left out: the training's
    assert stamped.settings() == (3, 0) and list(stamped.layers(tuned.num_layers)) == stamp["layers"]
    assert "fine-tuned with score" not in caplog.text  # the training's score: no warning
    RaLa("eq3", encoder=str(tmp_path)).layers(tuned.num_layers)
    assert "fine-tuned with score eq4 (ω True); this reranker scores with eq3" in caplog.text
    with pytest.raises(ValueError, match=r"fine-tuned contrasting layers .* \(buckets 3, seed 0\)"):
        RaLa(encoder=str(tmp_path), buckets=2, seed=0).layers(tuned.num_layers)
    (tmp_path / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(models.ChecksumMismatchError):
        models.resolve_encoder(str(tmp_path))


def _checkpoint(folder, identity):
    path = folder / "other.pt"
    torch.save({"identity": identity}, path)
    return path


def test_unrolling_file_errors_name_the_line(tmp_path):
    path = tmp_path / "unrolled.jsonl"
    path.write_text('{"id": "q1", "unrolled": "U"}\n{"id": "q2"}\n')
    with pytest.raises(ValueError, match="unrolled.jsonl:2"):
        ft.read_unrolled(path)
    with pytest.raises(ValueError, match="two questions"):
        ft.training_questions([])


def test_questions_without_both_kinds_of_paragraph_are_refused():
    only_gold = [dspy.Example(id=f"g{i}", question="q", paragraphs=[{"title": "G", "text": "g", "is_supporting": True}])
                 for i in range(2)]
    with pytest.raises(ValueError, match="both a supporting and a non-supporting"):
        ft.training_questions(only_gold)
    with pytest.raises(ValueError, match="alpha_from"):
        ft.training_questions(only_gold, alpha_from="hops")


def test_the_cross_entropy_variant_is_a_weighted_mean_of_pairwise_decisions():
    queries = {"tokens": torch.tensor([[[1.0, 0.0]]]), "mask": torch.ones(1, 1, dtype=torch.bool)}
    docs = torch.tensor([[1, 0], [0.8, 0.6], [0.6, 0.8]], dtype=torch.float32)[:, None]  # cosines 1, 0.8, 0.6
    documents = {"tokens": docs, "mask": torch.ones(3, 1, dtype=torch.bool), "cls_layers": torch.zeros(3, 1, 2)}

    def bce(score, label):
        p = 1 / (1 + math.exp(-score / 0.05))
        return -(label * math.log(p) + (1 - label) * math.log(1 - p))

    loss = batch_loss(queries, documents, torch.tensor([2.0]), tau=0.05, omega=False, loss="bce")
    assert loss.item() == pytest.approx(2.0 * (bce(1, 1) + bce(0.8, 0) + bce(0.6, 0)) / 3, rel=1e-4)
    excluded = batch_loss(queries, documents, torch.tensor([2.0]), tau=0.05, omega=False, loss="bce",
                          exclude=torch.tensor([[False, True, False]]))
    assert excluded.item() == pytest.approx(2.0 * (bce(1, 1) + bce(0.6, 0)) / 2, rel=1e-4)
    with pytest.raises(ValueError, match="loss must be"):
        batch_loss(queries, documents, torch.ones(1), loss="mse")
