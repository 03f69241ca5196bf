"""Difficulty-aware fine-tuning of the encoder (CoopRAG §3.6, App. A, E.7, E.8, F.1–F.2).

Each training question (or its unrolled form, when an unrolling file gives one) is paired with a positive (a
supporting paragraph), a distractor (a non-supporting paragraph of the same question: the hard negative of §3.6)
and a random negative (a paragraph of another question). A mini-batch of ``b`` questions scores every question
against all ``3b`` documents with score_o (Eq. 4), and the loss is Eq. 5 with the weight of Eq. 6:

    L_B = Σ_i α_i · −log( exp(score_o(U_i, D_i)/τ) / Σ_{D ∈ batch} exp(score_o(U_i, D)/τ) ),  α_i = log(1 + |S_i|)

with ``|S_i|`` the number of sub-questions the unrolling stage wrote (§3.6; from ``multihop cooprag unroll``; one for
a question without an unrolling — our reading), τ = 0.05, b = 40 (App. F) and 5 epochs (App. A). ``alpha=False`` and
``omega=False`` are the "w/o α" and "w/o ω" ablations (App. E.7, §4.4); ``alpha_from="chain"`` counts the chain's
triples instead (Table 19); ``loss="bce"`` is Table 20's cross-entropy baseline; ``score="eq3"`` trains with Eq. 3,
the token-level gap, in place of Eq. 4 (Table 17; it reads the token states of the candidate layers, so a step holds
|C| more token tensors, and the encoder is then reranked with ``rala-eq3``). Without an unrolling file every question
counts one step, α is the constant log 2 and the difficulty weighting does nothing: :func:`training_questions` warns.

Each question makes one sample per epoch, with a positive drawn from its supporting paragraphs (so every question
weighs the same, whatever its number of hops), and its other supporting paragraphs are left out of its denominator:
they are no negatives of it. Both are our reading: Eq. 5 writes one positive D_i per question and sums over the batch
without saying what a question with several supporting paragraphs contributes. The paper gives neither learning rate
nor schedule; AdamW at 2e-5 (constant) is the usual choice for MPNet.

A batch of 40 questions and 120 documents does not fit a CPU's memory with gradients, so a step runs as GradCache
(Gao et al., 2021): states of the whole batch are computed without gradients in micro-batches, the exact batch loss
is back-propagated to those states, and each micro-batch is re-run with gradients (and the same dropout masks)
to carry them into the weights. The loss and gradients are those of the full batch; only memory changes.
Checkpoints (weights, optimizer, step) are written atomically every ``checkpoint_every`` steps and resumed.

``special_tokens`` (CoopRAG's: its unrolling markers, which the unrolled queries carry) are added to the encoder
before training, so their embeddings are trained; the folder records them in ``multihop-encoder.json`` and keeps them
wherever it is loaded (:class:`~.encoder.Encoder`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import dspy
import torch
from tqdm.auto import tqdm

from multihop.checkpoints import load_checkpoint
from multihop.corpus import Passage
from multihop.folders import locked, write_inventory
from multihop.models import FINETUNED_STAMP, sha256_file
from multihop.paths import atomic_write_text

from . import scoring
from .encoder import Encoder
from .rala import SCORINGS, RaLa

CHECKPOINT = "checkpoint.pt"
logger = logging.getLogger(__name__)


ALPHA_FROM = ("sub_questions", "chain")  # what |S| counts in α = log(1 + |S|): Eq. 6, or Table 19's chain length
NEGATIVES = 16  # random negatives kept per question, one drawn each epoch


@dataclass(frozen=True)
class TrainingQuestion:
    """One training question: its query (the question, or its unrolled form U), its supporting paragraphs, its other
    paragraphs (distractors), paragraphs of other questions (random negatives) and |S| for α."""

    query: str
    positives: tuple[str, ...]
    distractors: tuple[str, ...]
    negatives: tuple[str, ...]
    sub_questions: int


@dataclass(frozen=True)
class TrainingSample:
    """What one question contributes to one epoch: a positive drawn from its supporting paragraphs, a distractor, a
    random negative, |S|, and all its supporting paragraphs (``gold``: never negatives in its denominator)."""

    query: str
    positive: str
    distractor: str
    negative: str
    sub_questions: int
    gold: tuple[str, ...] = ()


def training_questions(examples: Iterable[dspy.Example], unrolled: dict[str, dict] | None = None,
                     seed: int = 0, alpha_from: str = "sub_questions") -> list[TrainingQuestion]:
    """The training questions of ``examples`` with paragraphs marked ``is_supporting`` (MuSiQue, HotpotQA and 2Wiki
    train files). ``unrolled`` maps a question id to its unrolling record (:func:`read_unrolled`): its query replaces
    the question, and |S| is the number of sub-questions it wrote (``alpha_from="chain"``: of its chain's triples,
    Table 19). |S| comes from the unrolling only (§3.6): a question without one, or whose unrolling fell back, counts
    one step (our reading: α = log 2, the weight of the simplest question, so no question drops out). Questions
    without a supporting and a non-supporting paragraph, and repeated question ids, are skipped."""
    if alpha_from not in ALPHA_FROM:
        raise ValueError(f"alpha_from must be one of {', '.join(ALPHA_FROM)}, not {alpha_from!r}")
    rng = random.Random(seed)
    examples = list({e.id: e for e in examples if e.get("paragraphs")}.values())
    pool = [(i, _render(p)) for i, e in enumerate(examples) for p in e.paragraphs]
    if len({i for i, _ in pool}) < 2:
        raise ValueError("fine-tuning needs at least two questions with paragraphs")
    questions, without = [], 0
    for i, example in enumerate(examples):
        gold = tuple(_render(p) for p in example.paragraphs if p.get("is_supporting"))
        others = tuple(_render(p) for p in example.paragraphs if not p.get("is_supporting"))
        if not gold or not others:
            continue
        record = (unrolled or {}).get(example.id, {})
        without += not record or bool(record.get("fallback"))
        steps = record.get("sub_questions" if alpha_from == "sub_questions" else "reasoning_chain") or []
        negatives = tuple(_draw_other(rng, pool, i, gold) for _ in range(NEGATIVES))
        questions.append(TrainingQuestion(record.get("unrolled", example.question), gold, others, negatives,
                                          max(1, len(steps))))
    if not questions:
        raise ValueError("no question has both a supporting and a non-supporting paragraph")
    if without:
        logger.warning("%d of %d training questions have no unrolling (or one that fell back): each counts one step "
                       "(α = log 2), so they train with no difficulty weighting; unroll them first (`multihop cooprag "
                       "unroll`, then --unrolled)", without, len(questions))
    return questions


def read_unrolled(path: str | Path) -> dict[str, dict]:
    """An unrolling file: JSON lines ``{"id": ..., "unrolled": ..., "sub_questions": [...]}`` (as ``multihop cooprag
    unroll`` writes; ``sub_questions`` is optional), by question id."""
    out = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                record = json.loads(line)
                if not isinstance(record["unrolled"], str):
                    raise TypeError("unrolled must be a string")
                out[str(record["id"])] = record
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: expected {{\"id\", \"unrolled\"}} JSON, got {line[:80]!r}") from exc
    return out


def difficulty_weights(sub_questions: list[int], alpha: bool = True) -> torch.Tensor:
    """Eq. 6: α = log(1 + |S|); all ones without α."""
    counts = torch.tensor(sub_questions, dtype=torch.float32)
    return torch.log1p(counts) if alpha else torch.ones_like(counts)


LOSSES = ("infonce", "bce")  # Eq. 5, or Table 20's cross-entropy variant


def batch_loss(queries: dict, documents: dict, weights: torch.Tensor, tau: float = 0.05,
               omega: bool = True, exclude: torch.Tensor | None = None, loss: str = "infonce",
               score: str = "eq4") -> torch.Tensor:
    """Eq. 5 over one mini-batch: ``queries`` (``tokens``, ``mask``) of ``b`` questions, ``documents`` (``tokens``,
    ``mask``, and ``cls_layers`` ``[3b, |C|, d]`` for Eq. 4 or ``layer_tokens`` ``[3b, |C|, T, d]`` for ``score="eq3"``)
    ordered positives, distractors, random negatives; question ``i``'s positive is document ``i``. ``exclude``
    (``[b, 3b]``) leaves documents out of a question's denominator: its other supporting paragraphs, which are no
    negatives of it.

    ``loss="bce"`` is Table 20's cross-entropy baseline, in our reading (the paper names the loss only): each
    question–document pair a binary decision, σ(score/τ) against 1 for the question's positive and 0 for every other
    document of the batch (the excluded ones aside), averaged over the pairs and weighted by α."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, not {loss!r}")
    if score not in SCORINGS:
        raise ValueError(f"score must be one of {', '.join(SCORINGS)}, not {score!r}")
    q, qm, d, dm = queries["tokens"], queries["mask"], documents["tokens"], documents["mask"]
    if score == "eq3":
        scores = scoring.score_eq3(q, qm, d, dm, documents["layer_tokens"])
    else:
        scores = scoring.score_eq4(q, qm, d, dm, documents["cls_layers"], omega=omega)
    weights = weights.to(scores.device)
    positives = torch.arange(scores.shape[0], device=scores.device)
    if loss == "bce":
        labels = torch.zeros_like(scores)
        labels[positives, positives] = 1.0
        pairs = torch.nn.functional.binary_cross_entropy_with_logits(scores / tau, labels, reduction="none")
        keep = torch.ones_like(scores) if exclude is None else (~exclude.to(scores.device)).float()
        return (weights * (pairs * keep).sum(dim=1) / keep.sum(dim=1)).sum()
    if exclude is not None:
        scores = scores.masked_fill(exclude.to(scores.device), scoring.NEG)
    log_probs = torch.log_softmax(scores / tau, dim=1)
    return -(weights * log_probs[positives, positives]).sum()


@dataclass
class TrainConfig:
    encoder: str = "mpnet"
    batch_size: int = 40
    micro_batch: int = 8
    epochs: int = 5  # App. A
    max_steps: int | None = None
    lr: float = 2e-5
    tau: float = 0.05
    alpha: bool = True
    omega: bool = True
    loss: str = "infonce"  # or "bce": Table 20
    score: str = "eq4"  # or "eq3": Table 17
    buckets: int = 4
    seed: int = 0
    checkpoint_every: int = 50
    special_tokens: tuple[str, ...] = ()

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, not {self.loss!r}")
        if self.score not in SCORINGS:
            raise ValueError(f"score must be one of {', '.join(SCORINGS)}, not {self.score!r}")


def train(questions: list[TrainingQuestion], out_dir: str | Path, config: TrainConfig | None = None) -> Path:
    """Fine-tune ``config.encoder`` on ``questions`` and save a sentence-transformers folder in ``out_dir`` (with
    ``multihop-encoder.json``: the weights' sha256, the config and the loss per step). Resumes from
    ``out_dir/checkpoint.pt`` when it was written with the same config."""
    config = config or TrainConfig()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with locked(out_dir):
        encoder = Encoder(config.encoder, batch_size=config.micro_batch, special_tokens=config.special_tokens,
                          precision="fp32")  # trained weights and optimizer states in fp32, whatever the device
        model = encoder.model
        layers = list(RaLa(buckets=config.buckets, seed=config.seed).candidate_layers(encoder.num_layers))
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
        batches = _batches(questions, config)
        history: list[float] = []
        identity = {"config": asdict(config), "samples": hashlib.sha256(
            json.dumps([asdict(question) for question in questions]).encode()).hexdigest()}  # what a checkpoint resumes
        start = _resume(out_dir / CHECKPOINT, identity, model, optimizer, history)
        model.train()
        steps = tqdm(range(start, len(batches)), desc="fine-tuning", unit="step", initial=start, total=len(batches))
        for step in steps:
            optimizer.zero_grad()
            loss = grad_cache_step(encoder, batches[step], layers, config)
            optimizer.step()
            history.append(loss)
            if (step + 1) % config.checkpoint_every == 0 and step + 1 < len(batches):
                _save_checkpoint(out_dir / CHECKPOINT, identity, model, optimizer, step + 1, history)
        model.eval()
        model.save(str(out_dir))
        stamp = {"sha256": sha256_file(out_dir / "model.safetensors"), "config": asdict(config), "layers": layers,
                 "special_tokens": list(encoder.special_tokens), "questions": len(questions), "steps": len(batches),
                 "loss": history}
        atomic_write_text(out_dir / FINETUNED_STAMP, json.dumps(stamp, indent=2))
        (out_dir / CHECKPOINT).unlink(missing_ok=True)
        write_inventory(out_dir)
        return out_dir


def grad_cache_step(encoder: Encoder, batch: list[TrainingSample], layers: list[int], config: TrainConfig) -> float:
    """Accumulate the exact gradient of :func:`batch_loss` for ``batch`` into the encoder; returns the loss."""
    queries = [s.query for s in batch]
    documents = [s.positive for s in batch] + [s.distractor for s in batch] + [s.negative for s in batch]
    q_chunks = _chunks(queries, config.micro_batch)
    d_chunks = _chunks(documents, config.micro_batch)
    rng_states, q_reps, d_reps = [], [], []
    with torch.no_grad():
        for chunk in q_chunks:
            rng_states.append(_rng_state())
            q_reps.append(_leaf(_query_rep(encoder.forward(chunk))))
        for chunk in d_chunks:
            rng_states.append(_rng_state())
            d_reps.append(_leaf(_document_rep(encoder.forward(chunk, _token_layers(layers, config)), layers)))
    weights = difficulty_weights([s.sub_questions for s in batch], config.alpha)
    exclude = torch.tensor([[j != i and text in sample.gold for j, text in enumerate(documents)]
                            for i, sample in enumerate(batch)])
    loss = batch_loss(_concat(q_reps), _concat(d_reps), weights, config.tau, config.omega, exclude, config.loss,
                      config.score)
    loss.backward()
    reps = [(chunk, rep, _query_rep, ()) for chunk, rep in zip(q_chunks, q_reps, strict=True)]
    reps += [(chunk, rep, _document_rep, (layers,)) for chunk, rep in zip(d_chunks, d_reps, strict=True)]
    for (chunk, rep, make, extra), state in zip(reps, rng_states, strict=True):
        _set_rng_state(state)
        fresh = make(encoder.forward(chunk, _token_layers(layers, config) if extra else ()), *extra)
        surrogate = sum((fresh[key] * rep[key].grad).sum() for key in fresh if rep[key].grad is not None)
        surrogate.backward()
    return float(loss.detach())


def _rng_state() -> tuple:
    """CPU and CUDA generator states: dropout masks on either device are replayed in the second pass."""
    return torch.get_rng_state(), torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None


def _set_rng_state(state: tuple) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state_all(state[1])


def _query_rep(out: dict) -> dict:
    return {"tokens": out["tokens"], "mask": out["mask"]}


def _token_layers(layers: list[int], config: TrainConfig) -> tuple[int, ...]:
    """The premature layers whose token states a document's score reads: Eq. 3's only."""
    return tuple(layers) if config.score == "eq3" else ()


def _document_rep(out: dict, layers: list[int]) -> dict:
    rep = {"tokens": out["tokens"], "mask": out["mask"], "cls_layers": out["cls"][:, layers]}
    if out["layer_tokens"]:
        rep["layer_tokens"] = torch.stack([out["layer_tokens"][layer] for layer in layers], dim=1)
    return rep


def _leaf(rep: dict) -> dict:
    return {key: value if key == "mask" else value.detach().requires_grad_() for key, value in rep.items()}


def _concat(reps: list[dict]) -> dict:
    """Join micro-batch states padded to different lengths into one batch (padding masked out)."""
    longest = max(rep["tokens"].shape[1] for rep in reps)

    def widen(x, value=0.0):  # the token axis: the last of a mask, the one before the features otherwise
        pads = (0, longest - x.shape[1]) if x.dim() == 2 else (0, 0, 0, longest - x.shape[-2])
        return torch.nn.functional.pad(x, pads, value=value)

    out = {"tokens": torch.cat([widen(r["tokens"]) for r in reps]),
           "mask": torch.cat([widen(r["mask"], False) for r in reps])}
    if "cls_layers" in reps[0]:
        out["cls_layers"] = torch.cat([r["cls_layers"] for r in reps])
    if "layer_tokens" in reps[0]:  # [m, |C|, T, d]
        out["layer_tokens"] = torch.cat([widen(r["layer_tokens"]) for r in reps])
    return out


def _chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _batches(questions: list[TrainingQuestion], config: TrainConfig) -> list[list[TrainingSample]]:
    """Per epoch, one sample per question — a positive, a distractor and a random negative drawn for it — in a seeded
    shuffle cut into full mini-batches (a ragged last batch is dropped)."""
    rng = random.Random(config.seed)
    batches = []
    for _ in range(config.epochs):
        order = list(questions)
        rng.shuffle(order)
        samples = [TrainingSample(q.query, rng.choice(q.positives), rng.choice(q.distractors), rng.choice(q.negatives),
                                  q.sub_questions, q.positives) for q in order]
        batches += [samples[i : i + config.batch_size]
                    for i in range(0, len(samples) - config.batch_size + 1, config.batch_size)]
    if not batches:
        raise ValueError(f"{len(questions)} questions make no batch of {config.batch_size}")
    return batches[: config.max_steps] if config.max_steps else batches


def _save_checkpoint(path: Path, identity: dict, model, optimizer, step: int, history: list[float]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({"identity": identity, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "step": step, "history": history, "rng": torch.get_rng_state()}, tmp)
    os.replace(tmp, path)


def _resume(path: Path, identity: dict, model, optimizer, history: list[float]) -> int:
    if not path.exists():
        return 0
    state = load_checkpoint(path)
    if state.get("identity") != identity:
        raise ValueError(f"{path} was written with another training config or other training samples; remove it to "
                         "start over")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])
    history.extend(state["history"])
    return int(state["step"])


def _render(paragraph: dict) -> str:
    return Passage.make(paragraph["title"], paragraph["text"]).render()


def _draw_other(rng: random.Random, pool: list[tuple[int, str]], question: int, gold: tuple[str, ...]) -> str:
    while True:
        owner, text = rng.choice(pool)
        if owner != question and text not in gold:
            return text

