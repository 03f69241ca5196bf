"""Build any retriever from a corpus by name: a first stage (dense, BM25, hybrid or PLAID) and a reranker of the
registry (:data:`~.rerankers.RERANKERS`), all on one loaded encoder — what ``multihop index build`` saves; and the first
stages a corpus is indexed with once and cached (:data:`CACHED_FIRST_STAGES`), which the command line and ``multihop
compare`` build for a program from its method's declared first stage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from multihop.data.corpus import Corpus

from .dense import DenseRetriever
from .encoder import Encoder
from .hybrid import HybridRetriever
from .module import RetrieverModule
from .plaid import PlaidRetriever, PlaidSettings, plaid_form
from .reranked import RerankedRetriever
from .rerankers import make_reranker
from .sparse import BM25Retriever
from .token_codecs import DEFAULT_TOKEN_STATES, check_form

FIRST_STAGES = ("dense", "bm25", "hybrid", "plaid")


def _cached_dense(corpus: Corpus, encoder: str, special_tokens: Sequence[str], pooling: str,
                  token_layers: tuple[int, ...] | None, token_states: str, progress: bool) -> Path:
    return DenseRetriever.build_cached(corpus, encoder=encoder, token_layers=token_layers,
                                       special_tokens=tuple(special_tokens), pooling=pooling, token_states=token_states,
                                       progress=progress)


def _cached_bm25(corpus: Corpus, encoder: str, special_tokens: Sequence[str], pooling: str,
                 token_layers: tuple[int, ...] | None, token_states: str, progress: bool) -> Path:
    return BM25Retriever.build_cached(corpus)


def _cached_plaid(corpus: Corpus, encoder: str, special_tokens: Sequence[str], pooling: str,
                  token_layers: tuple[int, ...] | None, token_states: str, progress: bool) -> Path:
    form = token_states if token_states.split(":")[0] == "plaid" else None  # the dense default means plaid's
    return PlaidRetriever.build_cached(corpus, encoder, tuple(special_tokens), plaid_form(form), progress=progress)


# name → builder(corpus, encoder, special_tokens, pooling, token_layers, token_states, progress) of the folder, built
# once under MULTIHOP_HOME/indexes; a first stage registered here is one a method can declare
# (``Declaration(first_stage=...)``)
CACHED_FIRST_STAGES: dict[str, Callable[..., Path]] = {"dense": _cached_dense, "bm25": _cached_bm25,
                                                        "plaid": _cached_plaid}


def build_cached(corpus: Corpus, first_stage: str = "dense", encoder: str = "mpnet", special_tokens: Sequence[str] = (),
                 pooling: str = "mean", token_layers: tuple[int, ...] | None = None,
                 token_states: str = DEFAULT_TOKEN_STATES, progress: bool = True) -> Path:
    """The folder of ``corpus``'s ``first_stage`` index (one of :data:`CACHED_FIRST_STAGES`), built on first use and
    reused: a dense one by ``encoder`` with the query markers ``special_tokens``, ``pooling`` (built with the other
    poolings' from one encoding pass, :meth:`~.dense.DenseRetriever.build_cached`) and, with ``token_layers=()``, the
    last layer's token states for reranking in the form ``token_states`` (:data:`~.token_codecs.TOKEN_STATES`); the
    dense settings mean nothing to BM25; a PLAID one keeps the last layer's token states in ``token_states`` when it is
    a ``plaid`` form, else in ``plaid`` (:mod:`.plaid`). ``progress`` shows the encoding's bar."""
    if first_stage not in CACHED_FIRST_STAGES:
        raise ValueError(f"unknown first stage {first_stage!r}; choose one of {', '.join(CACHED_FIRST_STAGES)}")
    return CACHED_FIRST_STAGES[first_stage](corpus, encoder, special_tokens, pooling, token_layers,
                                            token_states=token_states, progress=progress)


def build_retriever(
    corpus: Corpus,
    first_stage: str = "dense",
    encoder: str = "mpnet",
    index: str = "auto",
    rerank: str | None = None,
    n: int = 20,
    k: int = 5,
    special_tokens: Sequence[str] = (),
    token_cache: bool = True,
    reranker_options: dict | None = None,
    pooling: str = "mean",
    token_states: str = DEFAULT_TOKEN_STATES,
    ray: str | None = None,
    workers: int = 2,
    plaid: PlaidSettings | None = None,
) -> RetrieverModule:
    """Build any retriever from a corpus: ``first_stage`` one of :data:`FIRST_STAGES`, ``rerank`` None or a reranker
    name, built with ``reranker_options`` (RaLa: ``buckets``, ``omega``, ``seed``). ``encoder`` (with
    ``special_tokens`` added to its tokenizer) serves the dense index and the reranker alike; a dense index keeps the
    token states the reranker reads when ``token_cache`` is set; ``pooling`` is the dense index's
    (:data:`~.encoder.POOLINGS`). A ``plaid`` first stage keeps the encoder's last-layer token states in
    ``token_states`` (a ``plaid`` form; the default ``fp16`` means ``plaid``) and searches them with the settings
    ``plaid`` (:class:`~.plaid.PlaidSettings`; None: PLAID's defaults by k); a reranker over it reads them."""
    if first_stage not in FIRST_STAGES:
        raise ValueError(f"unknown first stage {first_stage!r}; choose one of {', '.join(FIRST_STAGES)}")
    check_form(token_states)
    if first_stage == "plaid":
        token_states = plaid_form(None if token_states == DEFAULT_TOKEN_STATES else token_states)
    shared = Encoder(encoder, special_tokens=special_tokens, pooling=pooling)  # one model: index, cache, reranker
    reranker = make_reranker(rerank, encoder=shared, **(reranker_options or {})) if rerank is not None else None
    token_layers = cls_layers = None
    if hasattr(reranker, "token_layers") and token_cache:
        token_layers = reranker.token_layers(shared.num_layers)
        cls_layers = reranker.cls_layers(shared.num_layers)

    def dense() -> DenseRetriever:
        return DenseRetriever.build(corpus, encoder=shared, k=k, kind=index, token_layers=token_layers,
                                    token_states=token_states, cls_layers=cls_layers, ray=ray, workers=workers)

    if first_stage == "dense":
        stage = dense()
    elif first_stage == "bm25":
        stage = BM25Retriever(corpus, k=k)
    elif first_stage == "plaid":
        stage = PlaidRetriever.build(corpus, shared, k=k, token_states=token_states, settings=plaid, ray=ray,
                                     workers=workers)
    else:
        stage = HybridRetriever(dense(), BM25Retriever(corpus, k=k), k=k)
    return RerankedRetriever(stage, reranker, n=n, k=k) if reranker else stage


def remove_build_files(retriever) -> None:
    """Once ``retriever`` (a :func:`build_retriever`'s) is saved: remove the encoding shards its dense indexes were
    built in (:meth:`DenseRetriever.remove_build_files`, :meth:`~.plaid.PlaidRetriever.remove_build_files`), so the
    saved folder holds the only copy."""
    for module in (retriever, *(sub for _, sub in retriever.named_sub_modules())):
        if isinstance(module, DenseRetriever | PlaidRetriever):
            module.remove_build_files()
