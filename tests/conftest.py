import os
from pathlib import Path

import dspy
import pytest

from multihop.corpus import Passage

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def reset_dspy_settings():
    """Every test starts from DSPy's default settings, as DSPy's own test-suite does."""
    yield
    dspy.configure(lm=None, rm=None, adapter=None, callbacks=[], track_usage=False)


@pytest.fixture(autouse=True)
def isolated_dspy_cache(tmp_path, monkeypatch):
    """Requests never leak between tests through DSPy's cache."""
    monkeypatch.setattr(dspy, "cache", dspy.clients.Cache(enable_disk_cache=False, enable_memory_cache=True,
                                                            disk_cache_dir=str(tmp_path / "cache")))


def data_root() -> Path:
    value = os.environ.get("MULTIHOP_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("MULTIHOP_DATA is not set (the Makefile points it at ../shared/data)")
    return Path(value)


@pytest.fixture(scope="session")
def musique_dev():
    from multihop.data import load_dataset

    return load_dataset(data_root() / "musique/dev/musique_qa_100.json")


@pytest.fixture(scope="session")
def small_retriever(musique_dev, tmp_path_factory):
    """A MiniLM index over the IRCoT corpus of the first 5 MuSiQue dev questions (real passages, ~100)."""
    from multihop.data import build_corpus
    from multihop.retrievers import DenseRetriever

    corpus = build_corpus(musique_dev[:5])
    return DenseRetriever.build(corpus, encoder="minilm", work_dir=tmp_path_factory.mktemp("shards"))


@pytest.fixture(scope="session")
def cached_retriever(musique_dev, tmp_path_factory):
    """The same corpus with token states kept for RaLa: the last layer and MiniLM layers 1 and 4 (the Eq. 3 layers
    of ``RaLa(buckets=2, seed=0)``)."""
    from multihop.data import build_corpus
    from multihop.retrievers import DenseRetriever

    corpus = build_corpus(musique_dev[:5])
    return DenseRetriever.build(corpus, encoder="minilm", work_dir=tmp_path_factory.mktemp("shards"),
                                token_layers=(1, 4))


class StaticRetriever(dspy.Module):
    """A retriever that returns fixed passages and counts its calls."""

    def __init__(self, passages: list[Passage]):
        super().__init__()
        self.passages, self.calls = passages, []

    def forward(self, query, k=5):
        self.calls.append((query, k))
        hits = self.passages[:k]
        return dspy.Prediction(passages=[p.render() for p in hits], ids=[p.id for p in hits],
                               scores=[1.0 - i / 10 for i in range(len(hits))])


@pytest.fixture
def static_retriever():
    return StaticRetriever([Passage.make(f"T{i}", f"text {i}") for i in range(8)])
