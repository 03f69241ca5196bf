"""The dense retriever as a DSPy module (DESIGN.md, "The contract every program keeps").

``DenseRetriever`` holds a corpus, an :class:`~.encoder.Encoder` and a :class:`~.index.FaissIndex`. It has no
predictors, so optimizers leave it alone, and ``forward(query, k)`` returns ``dspy.Prediction(passages, ids,
scores)`` — ``passages`` rendered as ``title: text``. A list of queries returns one such prediction per query.
"""

from __future__ import annotations

from pathlib import Path

import dspy

from multihop.corpus import Corpus, Passage
from multihop.data import load_corpus
from multihop.paths import home

from .encoder import Encoder
from .index import FaissIndex, encode_corpus

CORPUS_FILE = "corpus.jsonl"


class DenseRetriever(dspy.Module):
    def __init__(self, corpus: Corpus, encoder: Encoder, index: FaissIndex, k: int = 5):
        super().__init__()
        self.corpus, self.encoder, self.index, self.k = corpus, encoder, index, k

    @classmethod
    def build(cls, corpus: Corpus, encoder: str | Encoder = "mpnet", k: int = 5, work_dir: str | Path | None = None):
        """Encode ``corpus`` (in resumable shards under ``work_dir``, default ``MULTIHOP_HOME/shards/<checksum>``)
        and index it."""
        if len(corpus) == 0:
            raise ValueError("cannot build an index over an empty corpus")
        encoder = encoder if isinstance(encoder, Encoder) else Encoder(encoder)
        work = Path(work_dir) if work_dir else home() / "shards" / f"{encoder.name}-{corpus.checksum()[:16]}"
        vectors = encode_corpus(corpus, encoder, work)
        manifest = {"encoder": encoder.name, "encoder_sha256": encoder.checksum(), "corpus_sha256": corpus.checksum()}
        return cls(corpus, encoder, FaissIndex.build(vectors, manifest), k=k)

    @classmethod
    def build_cached(cls, corpus: Corpus, encoder: str = "mpnet") -> Path:
        """The folder of ``corpus``'s index under ``MULTIHOP_HOME/indexes``, built (resumably) on first use."""
        target = home() / "indexes" / f"{encoder}-{corpus.checksum()[:16]}"
        if not (target / "manifest.json").exists():
            cls.build(corpus, encoder=encoder).save(target)
        return target

    def save(self, directory: str | Path) -> None:
        """Save the index, its manifest and the corpus it covers into ``directory``."""
        directory = Path(directory)
        self.index.save(directory)
        self.corpus.save(directory / CORPUS_FILE)

    @classmethod
    def load(
        cls, directory: str | Path, encoder: str | Encoder | None = None, corpus: Corpus | None = None, k: int = 5
    ):
        """Load a saved retriever. A given ``encoder`` or ``corpus`` must match the manifest, else it is refused."""
        directory = Path(directory)
        corpus = corpus or load_corpus(directory / CORPUS_FILE)
        probe = FaissIndex.load(directory)
        encoder = encoder if isinstance(encoder, Encoder) else Encoder(encoder or probe.manifest["encoder"])
        index = FaissIndex.load(
            directory,
            expect={"encoder_sha256": encoder.checksum(), "corpus_sha256": corpus.checksum(), "count": len(corpus)},
        )
        return cls(corpus, encoder, index, k=k)

    def forward(self, query: str | list[str], k: int | None = None):
        queries = [query] if isinstance(query, str) else list(query)
        if not all(isinstance(q, str) and q.strip() for q in queries):
            raise ValueError("every query must be a non-empty string")
        scores, rows = self.index.search(self.encoder.encode(queries), k or self.k)
        predictions = [self._prediction(row, score) for row, score in zip(rows, scores, strict=True)]
        return predictions[0] if isinstance(query, str) else predictions

    def _prediction(self, rows, scores) -> dspy.Prediction:
        hits: list[Passage] = [self.corpus[int(i)] for i in rows if i >= 0]
        return dspy.Prediction(
            passages=[p.render() for p in hits],
            ids=[p.id for p in hits],
            scores=[float(s) for s, i in zip(scores, rows, strict=True) if i >= 0],
        )
