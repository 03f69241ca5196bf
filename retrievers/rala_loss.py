"""RaLa's training loss (CoopRAG §3.6, Eq. 5) as a sentence-transformers loss module, with GradCache.

:class:`RaLaLoss` scores every query of a batch against every document of it and returns the batch's loss. It is a
:class:`~sentence_transformers.base.losses.gradcache.CachedLossMixin`: the batch is encoded in mini-batches without
gradients, the loss is back-propagated to the encoded states, and each mini-batch is encoded again with gradients
(and the first pass's dropout masks) to carry them into the weights (GradCache, Gao et al., 2021). The loss and the
gradients are those of the whole batch; only memory changes. The mixin caches one tensor a mini-batch, so
:meth:`RaLaLoss.pack` packs all a score reads of a text into one: the ``[CLS]`` states of some layers, the final
layer's token states, for Eq. 3 the candidate layers' token states, and the attention mask and a punctuation flag as
two extra channels.

Two recipes (``recipe``):

- ``paper``, our reading of §3.6, App. A, E.7, E.8 and F: score_o of Eq. 4 — ω the largest ``[CLS]`` gap between the
  final layer and a candidate layer, floored as at inference (:func:`~.scoring.score_eq4`) — or Eq. 3 (Table 17),
  a fixed τ, and Eq. 5 summed over the batch with the weights α of Eq. 6 (:func:`paper_loss`), or Table 20's
  cross-entropy.
- ``released``, the authors' code (RaLa/models.py, RaLa/trainer.py): ω of :func:`~.scoring.released_omega` over the
  fixed layers (hidden states 0, 4 and 7 against 11), MaxSim with the documents' punctuation tokens zeroed
  (:func:`~.scoring.zero_tokens`) and their padding scoring :data:`~.scoring.RELEASED_PADDING`, the logits scaled by
  a learnt inverse temperature exp(log(1/τ)) that starts at 1/τ (``log_inv_t``, trained with the encoder), and the
  loss in both directions (:func:`symmetric_loss`).

What a sample brings besides its texts rides in the dataset's ``label`` column (:func:`label_row`): the count α is
taken from, the ids of the texts that are no negatives of it (a question's other supporting paragraphs, which leave
its denominator wherever they sit in the batch: our reading, ``paper`` only — the released code keeps them) and the
ids of its documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from sentence_transformers.base.losses.gradcache import CachedLossMixin, RandContext, _create_minibatch
from torch import nn

from . import scoring

RECIPES = ("paper", "released")
LOSSES = ("infonce", "bce")  # Eq. 5, or Table 20's cross-entropy variant


def difficulty_weights(counts: torch.Tensor | Sequence[int], alpha: bool = True) -> torch.Tensor:
    """Eq. 6: α = log(1 + |S|) for each count |S|; all ones without α."""
    counts = torch.as_tensor(counts, dtype=torch.float32)
    return torch.log1p(counts) if alpha else torch.ones_like(counts)


def paper_loss(scores: torch.Tensor, weights: torch.Tensor, tau: float = 0.05, exclude: torch.Tensor | None = None,
               loss: str = "infonce") -> torch.Tensor:
    """Eq. 5 over one batch from its scores ``[b, m]`` (query ``i``'s positive is document ``i``): Σ_i α_i · −log
    softmax(score_i / τ)_i. ``exclude`` (``[b, m]``) leaves documents out of a query's denominator.

    ``loss="bce"`` is Table 20's cross-entropy baseline, in our reading (the paper names the loss only): each
    query–document pair a binary decision, σ(score/τ) against 1 for the query's positive and 0 for every other
    document of the batch (the excluded ones aside), averaged over the pairs and weighted by α."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, not {loss!r}")
    weights = weights.to(scores.device)
    positives = torch.arange(scores.shape[0], device=scores.device)
    if loss == "bce":
        labels = torch.zeros_like(scores)
        labels[positives, positives] = 1.0
        pairs = F.binary_cross_entropy_with_logits(scores / tau, labels, reduction="none")
        keep = torch.ones_like(scores) if exclude is None else (~exclude.to(scores.device)).to(scores.dtype)
        return (weights * (pairs * keep).sum(dim=1) / keep.sum(dim=1)).sum()
    if exclude is not None:
        scores = scores.masked_fill(exclude.to(scores.device), scoring.NEG)
    log_probs = torch.log_softmax(scores / tau, dim=1)
    return -(weights * log_probs[positives, positives]).sum()


def symmetric_loss(logits: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The released code's loss (RaLa/trainer.py) from the temperature-scaled logits ``[b, m]`` (query ``i``'s positive
    is document ``i``): forward, the mean over the queries of α_i · CE(row i, i) over all ``m`` documents; backward,
    the mean over the ``b`` positives of the unweighted CE of the positives' columns transposed (positive ``j``
    against the ``b`` queries, target ``j``); their sum."""
    b = logits.shape[0]
    targets = torch.arange(b, device=logits.device)
    forward = (F.cross_entropy(logits, targets, reduction="none") * weights.to(logits.device)).mean()
    return forward + F.cross_entropy(logits[:, :b].T, targets)


def label_row(count: int, excluded: Sequence[int], width: int, documents: Sequence[int]) -> list[int]:
    """A sample's ``label``: the count α is taken from, the ids of the texts that are no negatives of it padded with
    −1 to ``width``, and the ids of its documents."""
    return [count, *excluded, *[-1] * (width - len(excluded)), *documents]


def exclusions(labels: torch.Tensor, columns: int) -> torch.Tensor:
    """``[b, columns·b]``: whether document ``j`` of the batch (column-major: every sample's first document, then
    every sample's second, ...) is one of the texts sample ``i`` excludes, ``j`` ≠ ``i``."""
    b = labels.shape[0]
    excluded, documents = labels[:, 1 : labels.shape[1] - columns], labels[:, labels.shape[1] - columns :]
    ids = documents.T.reshape(-1)
    out = (ids[None, :, None] == excluded[:, None, :]).any(dim=-1)
    out[torch.arange(b), torch.arange(b)] = False
    return out


class RaLaLoss(CachedLossMixin, nn.Module):
    """Eq. 5 over batches of (query, positive, negatives...) with GradCache.

    Args:
        model: the SentenceTransformer being trained, returning every layer's states (``all_layer_embeddings``).
        layers: the hidden-state indices whose ``[CLS]`` states ω reads: ``paper``, the RaLa candidate layers (and,
            for Eq. 3, whose token states it reads); ``released``, the fixed layers, the last of them ω's "last".
        recipe: ``paper`` or ``released`` (the module docstring).
        score: ``eq4`` or ``eq3`` (``paper`` only).
        loss: ``infonce`` or ``bce`` (``paper`` only).
        omega: False drops ω (plain MaxSim, the "w/o ω" ablation).
        alpha: False weighs every sample 1 (the "w/o α" ablation).
        tau: the temperature; ``released``, the learnt one's start.
        mini_batch_size: texts a forward pass (memory only).

    The settings are checked where they are chosen (:class:`~.finetune.TrainConfig`), not here.
    """

    def __init__(self, model, layers: Sequence[int], recipe: str = "paper", score: str = "eq4", loss: str = "infonce",
                 omega: bool = True, alpha: bool = True, tau: float = 0.05, mini_batch_size: int = 8):
        nn.Module.__init__(self)
        if recipe not in RECIPES:  # the other settings are TrainConfig's to check; a wrong recipe would train paper
            raise ValueError(f"recipe must be one of {', '.join(RECIPES)}, not {recipe!r}")
        self.model, self.layers, self.recipe = model, tuple(layers), recipe
        self.score, self.objective, self.omega, self.alpha, self.tau = score, loss, omega, alpha, tau
        self.mini_batch_size = mini_batch_size
        released = recipe == "released"
        self.log_inv_t = nn.Parameter(torch.tensor(1 / tau).log()) if released else None
        self.register_buffer("punctuation", punctuation_ids(model.tokenizer) if released else
                             torch.zeros(0, dtype=torch.long), persistent=False)
        self._tau_grad: torch.Tensor | None = None

    def get_config_dict(self) -> dict:
        """The settings, as the saved model card lists them."""
        return {"recipe": self.recipe, "layers": list(self.layers), "score": self.score, "loss": self.objective,
                "omega": self.omega, "alpha": self.alpha, "tau": self.tau}

    @property
    def temperature(self) -> float:
        """τ: the learnt one (``released``), else the fixed one."""
        return self.tau if self.log_inv_t is None else float(torch.exp(-self.log_inv_t.detach()))

    def forward(self, sentence_features, labels: torch.Tensor) -> torch.Tensor:
        loss = self.forward_cached(sentence_features, labels)
        if self.log_inv_t is None or not loss.requires_grad:
            return loss
        # the temperature's gradient, cached by calculate_loss, reaches the parameter through the backward pass that
        # replays the encoder (so the fp16 loss scale and gradient accumulation apply to it as to the weights)
        surrogate, self._tau_grad = self.log_inv_t * self._tau_grad, None
        return loss + surrogate - surrogate.detach()

    def embed_minibatch(self, sentence_feature, begin, end, with_grad, copy_random_state, random_state=None):
        """:meth:`pack` of one mini-batch (the mixin's own, with the packed states in place of the pooled ones)."""
        features = _create_minibatch(sentence_feature, begin, end)
        with nullcontext() if random_state is None else random_state:
            with nullcontext() if with_grad else torch.no_grad():
                random_state = RandContext(*features.values()) if copy_random_state else None
                out = self.model(features)
                packed = self.pack(out["all_layer_embeddings"], features["attention_mask"], features["input_ids"])
        return packed, random_state

    def pack(self, hidden: Sequence[torch.Tensor], mask: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
        """``[n, K + B·T, d + 2]`` from every layer's states ``hidden`` (``[n, T, d]`` each, 0 the embeddings):
        rows 0..K−1 the ``[CLS]`` states of :attr:`layers`, then the final layer's token states and, for Eq. 3, each
        layer's (B blocks of T rows), all L2-normalised; channel ``d`` the attention mask, channel ``d + 1`` whether
        the token is punctuation (``released``)."""
        blocks = [hidden[-1]] + ([hidden[layer] for layer in self.layers] if self.score == "eq3" else [])
        cls = F.normalize(torch.stack([hidden[layer][:, 0] for layer in self.layers], dim=1), dim=-1)
        flags = torch.stack([mask.bool(), torch.isin(token_ids, self.punctuation)], dim=-1).to(cls.dtype)
        tokens = [torch.cat([F.normalize(block, dim=-1), flags], dim=-1) for block in blocks]
        return torch.cat([F.pad(cls, (0, 2)), *tokens], dim=1)

    def unpack(self, reps: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Mini-batches of :meth:`pack` as one batch in float32, padded to their longest text: ``cls`` ``[n, K, d]``,
        ``tokens`` ``[n, T, d]``, ``mask`` and ``punctuation`` ``[n, T]``, ``layer_tokens`` ``[n, K, T, d]`` (Eq. 3)."""
        k, blocks = len(self.layers), 1 + (len(self.layers) if self.score == "eq3" else 0)
        parts = [(rep[:, :k, :-2].float(), rep[:, k:].float().reshape(rep.shape[0], blocks, -1, rep.shape[-1]))
                 for rep in reps]
        longest = max(tokens.shape[2] for _, tokens in parts)
        tokens = torch.cat([F.pad(tokens, (0, 0, 0, longest - tokens.shape[2])) for _, tokens in parts])
        return {"cls": torch.cat([cls for cls, _ in parts]), "tokens": tokens[:, 0, :, :-2],
                "mask": tokens[:, 0, :, -2] > 0.5, "punctuation": tokens[:, 0, :, -1] > 0.5,
                "layer_tokens": tokens[:, 1:, :, :-2]}

    def scores(self, q: dict[str, torch.Tensor], d: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[b, m]`` scores of the :meth:`unpack` ed queries against the documents."""
        if self.recipe == "released":
            sim = scoring.maxsim(q["tokens"], q["mask"], scoring.zero_tokens(d["tokens"], d["punctuation"]), d["mask"],
                                 floor=scoring.RELEASED_PADDING)
            return scoring.released_omega(q["cls"][:, -1], d["cls"][:, -1], d["cls"][:, :-1]) * sim if self.omega \
                else sim
        if self.score == "eq3":
            return scoring.score_eq3(q["tokens"], q["mask"], d["tokens"], d["mask"], d["layer_tokens"])
        return scoring.score_eq4(q["tokens"], q["mask"], d["tokens"], d["mask"], d["cls"], omega=self.omega)

    def calculate_loss(self, reps, labels=None, *, with_backward: bool = False) -> torch.Tensor:
        queries = self.unpack(reps[0])
        scores = self.scores(queries, self.unpack([rep for column in reps[1:] for rep in column]))
        weights = difficulty_weights(labels[:, 0], self.alpha).to(scores.device)
        log_inv_t = None
        if self.log_inv_t is not None:
            log_inv_t = self.log_inv_t.detach().requires_grad_() if with_backward else self.log_inv_t
            loss = symmetric_loss(scores * log_inv_t.exp(), weights)
        else:
            loss = paper_loss(scores, weights, self.tau, exclusions(labels, len(reps) - 1), self.objective)
        if not with_backward:
            return loss
        loss.backward()
        self._tau_grad = None if log_inv_t is None else log_inv_t.grad
        return loss.detach()


def punctuation_ids(tokenizer) -> torch.Tensor:
    """The ids of :data:`~.scoring.PUNCTUATION` in ``tokenizer``'s vocabulary (one the vocabulary lacks is left out,
    where the released code's lookup would map it to the unknown token and zero every unknown token)."""
    ids = tokenizer.convert_tokens_to_ids(list(scoring.PUNCTUATION))
    return torch.tensor([i for i in ids if i is not None and i != tokenizer.unk_token_id], dtype=torch.long)
