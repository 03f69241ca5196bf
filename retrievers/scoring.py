"""The reranking scores of CoopRAG §3.4 on padded batches of L2-normalised token states (torch, differentiable).

Shapes: queries ``q`` ``[b, Tq, d]`` with mask ``qm`` ``[b, Tq]``; documents ``D`` ``[m, Td, d]`` with mask ``dm``
``[m, Td]``; premature-layer states ``[m, |C|, Td, d]`` (tokens) or ``[m, |C|, d]`` (``[CLS]``). Every score is
``[b, m]``: one row per query, one column per document. Padding never wins a max and never enters an average, except
under the authors' released training code (RaLa/models.py), whose pieces are here too: :func:`released_omega`, the
padding floor of :func:`maxsim` and :func:`zero_tokens` with :data:`PUNCTUATION`.

torch is imported by the functions that call it: every program imports the rerankers, and a program that never
reranks (or a command that runs none) does not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

NEG = -1e4  # below any difference of cosines (|gap| <= 2)
OMEGA_FLOOR = 1e-3  # our reading: the least gap-aware weight ω (the paper is silent on ω <= 0)
# the released code's document tokens that score 0 (RaLa/models.py, filter_punctuation); its padding similarities are
# filled with RELEASED_PADDING instead of being left out (compute_logits)
PUNCTUATION = (",", ".", "?", "!", ":", ";", "-", "(", ")", '"', "'")
RELEASED_PADDING = -1e-9


def maxsim(q: torch.Tensor, qm: torch.Tensor, d: torch.Tensor, dm: torch.Tensor,
           floor: float | None = None) -> torch.Tensor:
    """ColBERT late interaction: average over query tokens of the max cosine over document tokens. ``floor``: each
    query token's best match is at least this much — the released code's padding (:data:`RELEASED_PADDING`): it pads
    every text to 512 tokens and fills the padding's similarities with it rather than leaving them out, so every
    document shorter than 512 tokens gets this floor (given, it applies to every document)."""
    import torch

    sim = torch.einsum("bid,mjd->bmij", q, d).masked_fill(~dm[None, :, None, :], NEG)
    best = sim.max(dim=-1).values
    return _masked_mean(best if floor is None else best.clamp_min(floor), qm)


def zero_tokens(states: torch.Tensor, drop: torch.Tensor) -> torch.Tensor:
    """``states`` ``[n, T, d]`` with the rows where ``drop`` ``[n, T]`` is set to zero: the released code's punctuation
    filter on document tokens (``drop``: the tokens of :data:`PUNCTUATION`), so such a token scores 0 against every
    query token in MaxSim — it is not masked out. (The released code zeroes the states before normalising them, which
    leaves them zero as well.)"""
    return states * (~drop)[..., None].to(states.dtype)


def cls_gap(q_cls: torch.Tensor, d_cls_last: torch.Tensor, d_cls_layers: torch.Tensor) -> torch.Tensor:
    """The gap-aware weight ω_{U,D} = g(q0, d0) = max over candidate layers l of <q0, d0^L> − <q0, d0^l>."""
    import torch

    last = q_cls @ d_cls_last.T  # [b, m]
    premature = torch.einsum("bd,mcd->bmc", q_cls, d_cls_layers)
    return (last[:, :, None] - premature).max(dim=-1).values


def score_eq4(q, qm, d, dm, d_cls_layers, omega: bool = True, floor: float | None = OMEGA_FLOOR) -> torch.Tensor:
    """Eq. 4: score_o(U, D) = ω_{U,D} · avg_i max_j <q_i, d_j^L>; ``omega=False`` is the plain MaxSim (w/o ω).

    ω is a difference of cosines and can be zero or negative (a premature layer's [CLS] closer to the query than the
    last one's); multiplying by it would then rank a better MaxSim lower. Our reading, since the paper does not say:
    ω is floored at ``floor`` (:data:`OMEGA_FLOOR`), so a document with ω ≤ floor scores floor · MaxSim: among such
    documents MaxSim decides, never reversed, and they rank below any document whose ω · MaxSim is larger. Training
    (the Eq. 5 loss) and inference share this function and so the rule. The floor is straight-through: its value is
    max(ω, floor) but its gradient is ω's, so training can still raise a floored ω (a clamp would give it none). For a
    negative the same gradient keeps lowering a floored ω without changing the loss: the direction training wants
    for negatives anyway, so the floor stays a floor there.
    ``floor=None`` is the paper's bare product (the benchmark's comparison row)."""
    sim = maxsim(q, qm, d, dm)
    if not omega:
        return sim
    gap = cls_gap(q[:, 0], d[:, 0], d_cls_layers)
    if floor is not None:
        gap = gap + (gap.clamp_min(floor) - gap).detach()
    return gap * sim


def released_omega(q_cls: torch.Tensor, d_cls_last: torch.Tensor, d_cls_layers: torch.Tensor) -> torch.Tensor:
    """The released code's ω (RaLa/models.py, ``fixed_weight_query``): (⟨q^last, d^last⟩ − min_l ⟨q^last, d^l⟩) / 2 over
    the ``[CLS]`` states of its fixed layers — ``last`` the query's and the document's at the last of them (hidden
    state 11 of MPNet's 12 layers, not the final one), ``l`` the document's at the others — with no floor: half the
    paper's gap of :func:`cls_gap`, taken at another layer."""
    return cls_gap(q_cls, d_cls_last, d_cls_layers) / 2


def score_eq3(q, qm, d, dm, d_layers: torch.Tensor) -> torch.Tensor:
    """Eq. 3: avg_i max_j g(q_i, d_j) with g(q_i, d_j) = max_l <q_i, d_j^L> − <q_i, d_j^l>."""
    import torch

    last = torch.einsum("bid,mjd->bmij", q, d)
    premature = torch.einsum("bid,mcjd->bmijc", q, d_layers)
    gap = (last[..., None] - premature).max(dim=-1).values.masked_fill(~dm[None, :, None, :], NEG)
    return _masked_mean(gap.max(dim=-1).values, qm)


def pad(states: list, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack ``[T_i, ...]`` arrays or tensors into a zero-padded ``[n, T, ...]`` tensor and its ``[n, T]`` mask."""
    import torch

    tensors = [torch.as_tensor(s, dtype=torch.float32, device=device) for s in states]
    longest = max(t.shape[0] for t in tensors)
    out = tensors[0].new_zeros((len(tensors), longest, *tensors[0].shape[1:]))
    mask = torch.zeros((len(tensors), longest), dtype=torch.bool, device=out.device)
    for i, t in enumerate(tensors):
        out[i, : t.shape[0]] = t
        mask[i, : t.shape[0]] = True
    return out, mask


def _masked_mean(values: torch.Tensor, qm: torch.Tensor) -> torch.Tensor:
    """Mean over the query-token axis (last) of ``[b, m, Tq]`` values, counting real tokens only."""
    weights = qm[:, None, :].to(values.dtype)
    return (values * weights).sum(dim=-1) / weights.sum(dim=-1).clamp(min=1)
