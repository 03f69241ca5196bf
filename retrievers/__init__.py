"""Retrievers shared by every program: encoders, FAISS indexes and the DSPy retriever modules."""

from .dense import DenseRetriever
from .encoder import Encoder
from .index import FaissIndex, IndexMismatchError

__all__ = ["DenseRetriever", "Encoder", "FaissIndex", "IndexMismatchError"]
