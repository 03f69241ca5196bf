"""Retrievers shared by every program: encoders, FAISS and BM25 indexes, RaLa reranking and the DSPy modules."""

from .dense import DenseRetriever
from .encoder import Encoder
from .hybrid import HybridRetriever
from .index import FaissIndex, IndexMismatchError
from .rala import RaLa
from .retriever import Retriever
from .sparse import BM25Retriever
from .storage import load_retriever

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "Encoder",
    "FaissIndex",
    "HybridRetriever",
    "IndexMismatchError",
    "RaLa",
    "Retriever",
    "load_retriever",
]
