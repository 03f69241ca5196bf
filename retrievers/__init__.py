"""Retrievers shared by every program: encoders (sentence encoders and ColBERT checkpoints), FAISS, BM25 and PLAID
indexes, rerankers behind one protocol (RaLa, MaxSim, Cosine, a cross-encoder) and the DSPy modules; DSPy's own
retrievers, and any function that returns passages, wrapped as one of them (:func:`as_retriever`)."""

from .colbert_encoder import ColBERTEncoder
from .cosine import Cosine
from .cross_encoder import CrossEncoderReranker
from .dense import DenseRetriever, IndexSpec
from .dspy_retrievers import DSPyRetriever, as_retriever
from .encoder import Encoder
from .hybrid import HybridRetriever
from .index import FaissIndex, IndexMismatchError
from .late_interaction import MaxSim
from .module import RetrieverModule, describe_index, load_retriever
from .plaid import PlaidRetriever
from .query import Hits
from .rala import RaLa
from .reranked import RerankedRetriever
from .rerankers import (
    RERANKERS,
    Reranker,
    RerankStep,
    checked_reranker,
    load_reranker,
    make_reranker,
    parse_rerank,
)
from .sparse import BM25Retriever
from .storage import CACHED_FIRST_STAGES, build_cached, build_retriever, remove_build_files
from .token_codecs import TOKEN_STATES

__all__ = [
    "CACHED_FIRST_STAGES",
    "RERANKERS",
    "TOKEN_STATES",
    "BM25Retriever",
    "ColBERTEncoder",
    "Cosine",
    "CrossEncoderReranker",
    "DSPyRetriever",
    "DenseRetriever",
    "Encoder",
    "FaissIndex",
    "Hits",
    "HybridRetriever",
    "IndexSpec",
    "IndexMismatchError",
    "MaxSim",
    "PlaidRetriever",
    "RaLa",
    "RerankStep",
    "RerankedRetriever",
    "Reranker",
    "RetrieverModule",
    "as_retriever",
    "build_cached",
    "build_retriever",
    "checked_reranker",
    "describe_index",
    "load_reranker",
    "load_retriever",
    "make_reranker",
    "parse_rerank",
    "remove_build_files",
]
