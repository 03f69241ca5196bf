"""Rerankers over an encoder's token states (late interaction, as in ColBERT; CoopRAG §3.4): what MaxSim and RaLa
share, and MaxSim itself.

A late-interaction reranker encodes the query and each candidate text with its encoder and scores every pair from their
token states; only the score differs between :class:`MaxSim` and :class:`~.rala.RaLa`. It ranks any candidate texts —
passages, sentences, triples — from the texts alone. Its encoder is the one it is given, else the first stage's once it
is bound to one (:meth:`LateInteraction.bind`, which :class:`~.reranked.RerankedRetriever` calls), else MPNet. Bound to
a first stage whose encoder is the same model with the same special tokens, it takes that encoder (so a retriever
encodes a query once for the search and the rerank) and that first stage's token cache: a candidate's states are read
from the cache when the candidate is the passage at a row of the corpus the cache covers (same id, same text) and
computed otherwise, with the same scores up to float16 rounding; a ``plaid`` cache's tokens are scored in the codec's
projected space (:meth:`LateInteraction.score_projected`, no back-projection to the encoder's dimensions, the same
scores up to float rounding) when the score reads no premature layer's tokens. ``cache=False`` always computes them.
``special_tokens`` are those its queries need: a first stage whose encoder lacks them is not shared, and the reranker
loads the same model with them added. What it encodes (a query's token states, candidates' states it computes) goes
through its encoder's batches (:class:`~.encoder.Coalescing`): the reranks of the questions in flight encode together.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import dspy
import numpy as np

from multihop.data.corpus import Corpus

from . import scoring
from .encoder import Encoder
from .query import Hits, pick
from .token_cache import TokenCache

if TYPE_CHECKING:
    import torch

DEFAULT_ENCODER = "mpnet"

logger = logging.getLogger(__name__)

_LOADING = threading.Lock()  # a reranker's default encoder is loaded once, whichever thread asks first
_TOLD: set[tuple[int, str]] = set()  # (corpus, reason) of the first stages whose candidates a reranker encodes
NO_TOKENS = "keeps no token states"


class LateInteraction:
    """The base of the token-state rerankers. A subclass sets ``name`` (its name in :data:`~.rerankers.RERANKERS`)
    and defines :meth:`score`, and :meth:`options` and :meth:`token_layers` when it has settings or reads premature
    layers."""

    name: str

    def __init__(self, encoder: str | Encoder | dict | None = None, special_tokens: Sequence[str] = (),
                 cache: bool = True):
        """``encoder``: an :class:`~.encoder.Encoder`, its name, or its :meth:`~.encoder.Encoder.config` (from a
        manifest); None: the first stage's, else MPNet."""
        self.special_tokens, self.cache = tuple(special_tokens), cache
        if isinstance(encoder, str):
            encoder = Encoder(encoder, special_tokens=self.special_tokens)
        elif isinstance(encoder, dict):
            encoder = Encoder(**encoder)
        if encoder is not None and not set(self.special_tokens) <= set(encoder.special_tokens):
            raise ValueError(f"the encoder {encoder.name} lacks the special tokens {list(self.special_tokens)}")
        self._encoder: Encoder | None = encoder
        self.tokens: TokenCache | None = None
        self.corpus: Corpus | None = None

    @property
    def encoder(self) -> Encoder:
        with _LOADING:  # questions in threads: one encoder loaded, not one a thread
            if self._encoder is None:
                self._encoder = self._default_encoder()
        return self._encoder

    def _default_encoder(self) -> Encoder:
        return Encoder(DEFAULT_ENCODER, special_tokens=self.special_tokens)

    def options(self) -> dict:
        """The reranker's own settings, as its constructor takes them."""
        return {}

    def config(self) -> dict:
        """The registry name and the settings that rebuild this reranker (:func:`~.rerankers.load_reranker`)."""
        return {"reranker": self.name, **self.options(), "cache": self.cache,
                "special_tokens": list(self.special_tokens),
                "encoder": self._encoder.config() if self._encoder is not None else None}

    def token_layers(self, num_layers: int) -> tuple[int, ...]:
        """The premature layers whose token states the score reads besides the last layer's."""
        return ()

    def cls_layers(self, num_layers: int) -> tuple[int, ...]:
        """The layers whose ``[CLS]`` states the score reads (the last layer's is a token state already)."""
        return ()

    def score(self, q: torch.Tensor, qm: torch.Tensor, d: torch.Tensor, dm: torch.Tensor, cls: np.ndarray,
              layer_tokens: dict[int, list]) -> torch.Tensor:
        """Scores ``[1, m]`` of the query (padded last-layer token states ``q``, mask ``qm``) against ``m``
        candidates (``d``, ``dm``), given the candidates' all-layer ``[CLS]`` states ``[m, L+1, dim]`` and the
        token states of the :meth:`token_layers`."""
        raise NotImplementedError

    def bind(self, first_stage) -> LateInteraction:
        """This reranker set up for ``first_stage`` (a copy): with the first stage's encoder and token cache when that
        encoder is the one it would use, with an encoder of its own otherwise."""
        theirs = getattr(first_stage, "encoder", None)
        bound = copy.copy(self)
        bound.tokens = bound.corpus = None
        if theirs is None:
            bound._encoder = self._encoder or self._default_encoder()
            return bound
        own = self._encoder
        if own is None and set(self.special_tokens) <= set(theirs.special_tokens):
            own = theirs
        elif own is None:
            logger.warning("the first stage's encoder %s lacks the special tokens %s: the reranker loads it again with "
                           "them and encodes every candidate (build the index with them to share its encoder and "
                           "token cache)", theirs.name, list(self.special_tokens))
            own = Encoder(theirs.name, special_tokens=(*theirs.special_tokens, *self.special_tokens),
                          revision=theirs.revision)
        if own.same_as(theirs):
            own = theirs
            if self.cache:
                bound.tokens = getattr(first_stage, "tokens", None)
                bound.corpus = getattr(first_stage, "corpus", None)
        bound._encoder = own
        return bound

    def rerank(self, query: str, candidates: dspy.Prediction, k: int, query_tokens: np.ndarray | None = None) -> Hits:
        """The top ``k`` of ``candidates`` (texts ``passages`` with their ``ids``) by :meth:`score`, best first, with
        the ids of all the ``candidates``. ``query_tokens``: the query's last-layer token states from this encoder,
        when the caller has them already."""
        if not candidates.ids:
            return Hits(passages=[], ids=[], scores=[], candidates=[])
        if query_tokens is None:
            query_tokens = self.encoder.states([query]).tokens[0]
        import torch

        scores = None
        projected = self.projected_states(candidates)
        if projected is not None:  # a plaid cache: scored in its projected space, no back-projection
            codec, tokens, cls, heads = projected
            q, qm = scoring.pad([codec.lift_query(query_tokens)])
            d, dm = scoring.pad(tokens)
            with torch.inference_mode():
                scores = self.score_projected(q, qm, d, dm, cls, torch.as_tensor(query_tokens[:1], dtype=torch.float32),
                                              torch.as_tensor(heads))
        if scores is None:
            tokens, cls, layer_tokens = self.candidate_states(candidates)
            q, qm = scoring.pad([query_tokens])
            d, dm = scoring.pad(tokens)
            with torch.inference_mode():
                scores = self.score(q, qm, d, dm, cls, layer_tokens)
        scores = scores[0].numpy()
        order = np.argsort(-scores, kind="stable")[:k]
        return pick(candidates, order, [float(scores[i]) for i in order], candidates=list(candidates.ids))

    def score_projected(self, q: torch.Tensor, qm: torch.Tensor, d: torch.Tensor, dm: torch.Tensor, cls: np.ndarray,
                        q_cls: torch.Tensor, d_cls: torch.Tensor) -> torch.Tensor | None:
        """:meth:`score` in a codec's projected space (``plaid``, :meth:`~.token_cache.TokenCache.get_projected`):
        ``q`` the lifted query tokens and ``d`` the candidates' scorable tokens, whose inner products are the cosines
        :meth:`score` reads; ``q_cls`` ``[1, d]`` the query's first token and ``d_cls`` ``[m, d]`` the candidates'
        decoded first tokens, in the encoder's dimensions. None: this score is not computed so (the tokens are
        decoded to the encoder's dimensions instead)."""
        return None

    def projected_states(self, candidates: dspy.Prediction) -> tuple | None:
        """(codec, scorable tokens, ``[CLS]`` states, decoded first tokens) of the candidates from a token cache that
        scores in its projected space (:attr:`~.token_cache.TokenCache.projected`), when it covers them, this score
        reads no premature layer's tokens and has a :meth:`score_projected`; else None."""
        if self.tokens is None or self.tokens.projected is None or type(self).score_projected is \
                LateInteraction.score_projected:
            return None
        num_layers = self.encoder.num_layers
        if self.token_layers(num_layers) or not self.tokens.keeps((), self.cls_layers(num_layers)):
            return None
        rows = self.corpus_rows(candidates)
        if rows is None:
            return None
        return (self.tokens.projected, *self.tokens.get_projected(rows))

    def candidate_states(self, candidates: dspy.Prediction) -> tuple[list, np.ndarray, dict[int, list]]:
        """Last-layer token states, all-layer ``[CLS]`` states and :meth:`token_layers` states of the candidates:
        from the token cache when it covers them and keeps those layers, else computed from their texts."""
        layers = self.token_layers(self.encoder.num_layers)
        rows = self.corpus_rows(candidates)
        if rows is not None and self.tokens is not None and self.tokens.keeps(layers,
                                                                              self.cls_layers(self.encoder.num_layers)):
            return self.tokens.get(rows, layers)
        if rows is not None:
            self._tell_encoding(NO_TOKENS if self.tokens is None else "keeps other layers than this score reads")
        states = self.encoder.candidate_states(list(candidates.passages), layers)
        return states.tokens, states.cls, states.layer_tokens

    def _tell_encoding(self, reason: str) -> None:
        """Say once a process and first stage that its passages are encoded at query time (``reason``: what its index
        lacks) and how to build one that serves them."""
        with _LOADING:
            if (id(self.corpus), reason) in _TOLD:
                return
            _TOLD.add((id(self.corpus), reason))
        remedy = ("build it with `--token-states fp16|int8|pq` to read them" if reason == NO_TOKENS else
                  f"build it with `--rerank {self.name}` and this reranker's settings to keep those layers")
        logger.warning("the first stage's index %s: %s encodes each query's candidates (about a second a question on a "
                       "CPU); %s", reason, self.name, remedy)

    def corpus_rows(self, candidates: dspy.Prediction) -> list[int] | None:
        """The candidates' rows in the bound first stage's corpus, or None unless each candidate is the passage at its
        row (same id, same text) and the reranker reads that first stage's states (``cache``)."""
        if self.corpus is None:
            return None
        rows = [self.corpus.row(pid) if pid in self.corpus else None for pid in candidates.ids]
        if any(row is None or self.corpus[row].render() != text
               for row, text in zip(rows, candidates.passages, strict=True)):
            return None
        return rows


class MaxSim(LateInteraction):
    """ColBERT's MaxSim on the last layer: the mean over query tokens of the best cosine with a candidate token
    (RaLa's Eq. 4 without ω, the "w/o ω" ablation of CoopRAG Table 5)."""

    name = "maxsim"

    def score(self, q, qm, d, dm, cls, layer_tokens) -> torch.Tensor:
        return scoring.maxsim(q, qm, d, dm)

    def score_projected(self, q, qm, d, dm, cls, q_cls, d_cls) -> torch.Tensor:
        return scoring.maxsim(q, qm, d, dm)
