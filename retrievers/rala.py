"""RaLa: ranking by contrasting layers (CoopRAG §3.4, App. E.5, E.9, F.3).

The candidate layers ``C`` are one layer drawn (seeded) from each of ``buckets`` contiguous buckets of the encoder's
premature layers ``1..L-1`` (Eq. 7, App. G.1: 1 ≤ l < L; hidden state 0, the embedding output, is no layer); the last
layer ``L`` is never a candidate. ``scoring="eq4"`` is the paper's practical score (Eq. 4): ω_{U,D} · MaxSim on the last
layer, with ω the largest ``[CLS]`` similarity gap between the last and a candidate layer, floored at
:data:`~.scoring.OMEGA_FLOOR` so that a negative gap never reverses the ranking (our reading); ``omega=False`` drops ω
(plain ColBERT MaxSim, the "w/o ω" ablation). ``scoring="eq3"`` is Eq. 3: the token-level maximum gap, averaged over
query tokens. This follows the paper, not the authors' release, which skips ω at inference. The default is 4 buckets,
App. F.3's (which tries 2, 4, 6 and 12 over MPNet's 12 layers; App. A says 3); more buckets than premature layers
(Table 23's 12, "all layers", over MPNet's 11 premature ones) take every premature layer. Buckets and seed left None
are those the encoder was fine-tuned with (its ``multihop-encoder.json``), else 4 and 0, so a RaLa over a fine-tuned
encoder contrasts the layers training did; given ones that draw other layers are refused. The encoder, the token
cache and the ranking of candidate texts are those of every late-interaction reranker (:mod:`.late_interaction`).

An encoder fine-tuned with the authors' released recipe (``multihop cooprag train --recipe released``: its
``multihop-encoder.json`` records the recipe and the fixed layers [0, 4, 7, 11]) is reranked as the released code
reranks (RaLa/eval.py, predictor.py ``calc_avg_maxsim``): by MaxSim on the final layer, averaged over the query's
tokens — no ω and no punctuation filter, which that code applies in training only. A RaLa over such an encoder is
not refused, draws no layers and scores so (``scoring="eq4"``, with a warning that ω is not applied); Eq. 3, which
the released code has not, is refused. This is the faithful option: the released ω needs the query's ``[CLS]`` state
at hidden state 11, which no reranker here keeps, and the released pipeline never reads it at inference.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import scoring
from .encoder import Encoder, trained_layers
from .late_interaction import LateInteraction

if TYPE_CHECKING:
    import torch

SCORINGS = ("eq4", "eq3")
logger = logging.getLogger(__name__)
DEFAULT_BUCKETS, DEFAULT_SEED = 4, 0


class RaLa(LateInteraction):
    def __init__(self, scoring: str = "eq4", buckets: int | None = None, omega: bool = True, seed: int | None = None,
                 encoder: str | Encoder | dict | None = None, special_tokens: Sequence[str] = (), cache: bool = True,
                 omega_floor: float | None = scoring.OMEGA_FLOOR):
        """``encoder``, ``special_tokens``, ``cache``: as for every :class:`~.late_interaction.LateInteraction`;
        ``omega_floor`` None: Eq. 4's bare product, which a negative ω reverses (:func:`~.scoring.score_eq4`)."""
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {SCORINGS}, not {scoring!r}")
        if buckets is not None and buckets < 1:
            raise ValueError("buckets must be at least 1")
        super().__init__(encoder=encoder, special_tokens=special_tokens, cache=cache)
        self.scoring, self.buckets, self.omega, self.seed = scoring, buckets, omega, seed
        self.omega_floor = omega_floor
        self._checked: tuple | None = None  # (encoder folder, layers) once checked against its training stamp
        self._released: tuple | None = None  # (encoder folder, whether it was fine-tuned with the released recipe)

    @property
    def name(self) -> str:
        return f"rala-{self.scoring}"

    def options(self) -> dict:
        return {"buckets": self.buckets, "omega": self.omega, "seed": self.seed, "omega_floor": self.omega_floor}

    def settings(self) -> tuple[int, int]:
        """(buckets, seed): the ones given, else those the encoder was fine-tuned with, else 4 and 0."""
        trained = trained_layers(self.encoder.path) if None in (self.buckets, self.seed) else None
        config = trained[1] if trained else {}
        buckets = self.buckets if self.buckets is not None else config.get("buckets", DEFAULT_BUCKETS)
        return buckets, self.seed if self.seed is not None else config.get("seed", DEFAULT_SEED)

    def candidate_layers(self, num_layers: int) -> tuple[int, ...]:
        """One premature layer from each bucket of the transformer layers ``1..num_layers-1`` (Eq. 7, App. G.1:
        1 ≤ l < L; hidden state 0, the embedding output, is not a layer), drawn with the seed; more buckets than
        premature layers take each premature layer."""
        buckets, seed = self.settings()
        if num_layers < 2:
            raise ValueError(f"an encoder of {num_layers} layer has no premature layer to contrast")
        rng = random.Random(seed)
        split = np.array_split(np.arange(1, num_layers), min(buckets, num_layers - 1))
        return tuple(int(rng.choice(bucket)) for bucket in split)

    def layers(self, num_layers: int) -> tuple[int, ...]:
        """:meth:`candidate_layers`, checked against the layers the encoder was fine-tuned with (its
        ``multihop-encoder.json``): training and inference contrast the same layers, or the reranker refuses. A score
        other than the training's (``--score``, ``--no-omega``) is allowed, with a warning. None over an encoder
        fine-tuned with the released recipe, which is reranked by MaxSim (the module docstring)."""
        if self.released():
            return ()
        drawn = self.candidate_layers(num_layers)
        if self._checked == (self.encoder.path, drawn):
            return drawn
        trained = trained_layers(self.encoder.path)
        if trained is not None and trained[0] and trained[0] != drawn:
            config = trained[1]
            raise ValueError(f"{self.encoder.path} was fine-tuned contrasting layers {list(trained[0])} (buckets "
                             f"{config.get('buckets')}, seed {config.get('seed')}); this RaLa draws {list(drawn)}: "
                             "rerank with the training's buckets and seed (or, if no seed draws those layers, "
                             "fine-tune again)")
        if trained is not None:
            trained_score = (trained[1].get("score", "eq4"), trained[1].get("omega", True))
            if trained_score[0] != self.scoring or (self.scoring == "eq4" and trained_score[1] != self.omega):
                logger.warning("%s was fine-tuned with score %s (ω %s); this reranker scores with %s (ω %s)",
                               self.encoder.path, *trained_score, self.scoring, self.omega)
        self._checked = (self.encoder.path, drawn)
        return drawn

    def released(self) -> bool:
        """Whether the encoder was fine-tuned with the authors' released recipe; Eq. 3 over it is refused."""
        if self._released is None or self._released[0] != self.encoder.path:
            trained = trained_layers(self.encoder.path)
            released = trained is not None and trained[1].get("recipe") == "released"
            if released and self.scoring == "eq3":
                raise ValueError(f"{self.encoder.path} was fine-tuned with the released recipe, whose code has no "
                                 "Eq. 3; rerank it with rala-eq4 (its inference: MaxSim) or maxsim")
            if released:
                logger.warning("%s was fine-tuned with the released recipe, whose code reranks by MaxSim alone: this "
                               "RaLa scores MaxSim (no ω)", self.encoder.path)
            self._released = (self.encoder.path, released)
        return self._released[1]

    def token_layers(self, num_layers: int) -> tuple[int, ...]:
        """The premature layers whose token states a score needs (Eq. 3 only; Eq. 4 needs ``[CLS]`` states alone)."""
        return self.layers(num_layers) if self.scoring == "eq3" else ()

    def cls_layers(self, num_layers: int) -> tuple[int, ...]:
        """The candidate layers whose ``[CLS]`` states Eq. 4's ω reads (Eq. 3 reads none)."""
        return self.layers(num_layers) if self.scoring == "eq4" else ()

    def score(self, q, qm, d, dm, cls, layer_tokens) -> torch.Tensor:
        import torch

        if self.released():
            return scoring.maxsim(q, qm, d, dm)
        layers = self.layers(cls.shape[1] - 1)
        if self.scoring == "eq4":
            cls_layers = torch.as_tensor(cls[:, list(layers)], dtype=torch.float32)
            return scoring.score_eq4(q, qm, d, dm, cls_layers, omega=self.omega, floor=self.omega_floor)
        d_layers = torch.stack([scoring.pad(layer_tokens[layer])[0] for layer in layers], dim=1)
        return scoring.score_eq3(q, qm, d, dm, d_layers)

    def score_projected(self, q, qm, d, dm, cls, q_cls, d_cls) -> torch.Tensor | None:
        """Eq. 4 (and the released recipe's MaxSim) in a ``plaid`` codec's projected space: MaxSim of the lifted query
        against the scorable tokens, ω from the query's and candidates' first tokens in the encoder's dimensions
        (:func:`~.scoring.cls_gap`, floored as :func:`~.scoring.score_eq4` floors it). Eq. 3 reads the premature
        layers' tokens, another codec each: it stays on the decoded path (None)."""
        import torch

        if self.released():
            return scoring.maxsim(q, qm, d, dm)
        if self.scoring != "eq4":
            return None
        sim = scoring.maxsim(q, qm, d, dm)
        if not self.omega:
            return sim
        layers = self.layers(cls.shape[1] - 1)
        gap = scoring.cls_gap(q_cls, d_cls, torch.as_tensor(cls[:, list(layers)], dtype=torch.float32))
        return (gap if self.omega_floor is None else gap.clamp_min(self.omega_floor)) * sim
