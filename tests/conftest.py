import os

import dspy
import pytest

from multihop.data.corpus import Passage

from helpers import StaticRetriever, data_root, scripted_lm

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


@pytest.fixture
def questions(tmp_path):
    """A question file of one question: "Capital of France?" (Paris)."""
    path = tmp_path / "questions.jsonl"
    path.write_text('{"id": "q1", "question": "Capital of France?", "answers": ["Paris"]}\n')
    return path


@pytest.fixture
def built_lms(monkeypatch):
    """Every LM a command builds (``make_lm``) answers "Paris"."""
    import multihop.lm.backends

    def make_lm(spec, **settings):
        return scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"}, name=spec.replace("/", "-"))[0]

    monkeypatch.setattr(multihop.lm.backends, "make_lm", make_lm)


@pytest.fixture(scope="session")
def musique_dev():
    from multihop.data.loaders import load_dataset

    return load_dataset(data_root() / "musique/dev/musique_qa_100.json")


@pytest.fixture(scope="session")
def small_retriever(musique_dev, tmp_path_factory):
    """A MiniLM index over the IRCoT corpus of the first 5 MuSiQue dev questions (real passages, ~100)."""
    from multihop.data.loaders import build_corpus
    from multihop.retrievers import DenseRetriever

    corpus = build_corpus(musique_dev[:5])
    return DenseRetriever.build(corpus, encoder="minilm", work_dir=tmp_path_factory.mktemp("shards"))


@pytest.fixture(scope="session")
def cached_retriever(musique_dev, tmp_path_factory):
    """The same corpus with token states kept for RaLa: the last layer and MiniLM layers 1 and 4 (the Eq. 3 layers
    of ``RaLa(buckets=2, seed=0)``)."""
    from multihop.data.loaders import build_corpus
    from multihop.retrievers import DenseRetriever

    corpus = build_corpus(musique_dev[:5])
    return DenseRetriever.build(corpus, encoder="minilm", work_dir=tmp_path_factory.mktemp("shards"),
                                token_layers=(1, 4))


@pytest.fixture
def static_retriever():
    return StaticRetriever([Passage.make(f"T{i}", f"text {i}") for i in range(8)])
