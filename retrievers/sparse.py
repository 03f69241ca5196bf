"""BM25 over the corpus with ``bm25s`` — the sparse baseline users compare against (CoopRAG App. B, C.1).

Texts are lower-cased and split by ``bm25s.tokenize`` with English stop words removed; no stemming (``bm25s``
would need PyStemmer). Passages that share no term with the query score 0 and are not returned, so a query of
stop words only returns no passages. Saved as ``bm25s``'s own files plus the manifest and the corpus.
"""

from __future__ import annotations

import json
from pathlib import Path

import bm25s

from multihop.data.corpus import Corpus
from multihop.data.folders import locked, write_inventory
from multihop.data.loaders import load_corpus
from multihop.data.paths import atomic_dir, atomic_write_text, home

from .dense import CORPUS_FILE
from .index import MANIFEST, read_manifest
from .module import RetrieverModule
from .query import Hits, hits_prediction

INDEX_DIR = "bm25"


class BM25Retriever(RetrieverModule):
    kind = "bm25"

    def __init__(self, corpus: Corpus, k: int = 5, k1: float = 1.5, b: float = 0.75, index: bm25s.BM25 | None = None):
        super().__init__()
        if len(corpus) == 0:
            raise ValueError("cannot build an index over an empty corpus")
        self.corpus, self.k, self.k1, self.b = corpus, k, k1, b
        if index is None:
            index = bm25s.BM25(k1=k1, b=b)
            index.index(bm25s.tokenize(corpus.texts(), stopwords="en", show_progress=False), show_progress=False)
        self.bm25 = index

    def search(self, queries: list[str], k: int) -> list[Hits]:
        tokens = bm25s.tokenize(queries, stopwords="en", return_ids=False, show_progress=False)
        rows, scores = self.bm25.retrieve(tokens, k=min(k, len(self.corpus)), show_progress=False)
        return [hits_prediction(self.corpus, [r if s > 0 else -1 for r, s in zip(row, score, strict=True)], score)
                for row, score in zip(rows, scores, strict=True)]

    def manifest(self) -> dict:
        return {"retriever": self.kind, "k1": self.k1, "b": self.b, "corpus_sha256": self.corpus.checksum(),
                "count": len(self.corpus)}

    def save(self, directory: str | Path) -> None:
        with atomic_dir(Path(directory)) as tmp:
            self.bm25.save(str(tmp / INDEX_DIR), show_progress=False)
            self.corpus.save(tmp / CORPUS_FILE)
            atomic_write_text(tmp / MANIFEST, json.dumps(self.manifest(), indent=2))
            write_inventory(tmp)

    @classmethod
    def load(cls, directory: str | Path, corpus: Corpus | None = None, k: int = 5) -> BM25Retriever:
        directory = Path(directory)
        corpus = corpus or load_corpus(directory / CORPUS_FILE)
        manifest = read_manifest(directory, {"retriever": cls.kind, "corpus_sha256": corpus.checksum(),
                                             "count": len(corpus)})
        index = bm25s.BM25.load(str(directory / INDEX_DIR), show_progress=False)
        return cls(corpus, k=k, k1=manifest["k1"], b=manifest["b"], index=index)

    @classmethod
    def build_cached(cls, corpus: Corpus) -> Path:
        """The folder of ``corpus``'s BM25 index under ``MULTIHOP_HOME/indexes``, built on first use."""
        target = home() / "indexes" / f"bm25-{corpus.checksum()[:16]}"
        with locked(target, file=True, wait=True):
            if not (target / MANIFEST).exists():
                cls(corpus).save(target)
        return target
