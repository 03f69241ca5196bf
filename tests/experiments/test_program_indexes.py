"""The index a program retrieves from when none is given: its pooling, built once for every command that asks
(``multihop.experiments.program_indexes``, the command line's ``retriever_folder``), its progress bar, and its
description."""

import json
import os

import pytest

from multihop.cli.programs import retriever_folder
from multihop.experiments.program_indexes import cached_index, program_index, program_retriever
from multihop.programs import CoopRAG, SingleStepRAG
from multihop.retrievers import BM25Retriever, Encoder, RerankedRetriever, describe_index, load_retriever
from multihop.retrievers.encoder import POOLINGS


@pytest.fixture
def corpus_file(tmp_path, monkeypatch):
    """A corpus file of six passages, with ``MULTIHOP_HOME`` (where indexes are cached) under ``tmp_path``."""
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"title": f"T{i}", "text": f"the passage about topic {i}"}) + "\n"
                            for i in range(6)))
    return path


@pytest.fixture
def encoded(monkeypatch):
    """The passages each encoding pass was handed (``Encoder.passage_states``), in order."""
    calls, real = [], Encoder.passage_states
    monkeypatch.setattr(Encoder, "passage_states",
                        lambda self, texts, layers=None: calls.append(len(texts)) or real(self, texts, layers))
    return calls


def test_a_program_gets_the_pooling_its_class_declares_and_every_pooling_comes_from_one_encoding(corpus_file,
                                                                                                   encoded):
    assert (CoopRAG.index_pooling, SingleStepRAG.index_pooling) == ("cls", "mean")
    cooprag = program_index("CoopRAG", corpus_file, "minilm")
    assert encoded == [6]  # one pass for both poolings
    single = program_index("SingleStepRAG", corpus_file, "minilm")
    assert encoded == [6] and single != cooprag
    assert describe_index(cooprag)["pooling"] == "cls" and describe_index(single)["pooling"] == "mean"
    assert load_retriever(cooprag).encoder.pooling == "cls"
    # both keep every declared method's markers and share one copy of the token states
    for folder in (cooprag, single):
        assert describe_index(folder)["special_tokens"] == list(CoopRAG.special_tokens)
    assert os.stat(cooprag / "tokens" / "offsets.npy").st_ino == os.stat(single / "tokens" / "offsets.npy").st_ino


def test_every_command_finds_the_same_cached_index_and_encodes_nothing_again(corpus_file, encoded):
    folders = {pooling: cached_index(corpus_file, "dense", "minilm", pooling) for pooling in POOLINGS}
    encoded.clear()
    stamp = (folders["cls"] / "index.faiss").stat().st_mtime_ns
    assert program_index("CoopRAG", corpus_file, "minilm") == folders["cls"]  # eval, compile, ... (the CLI's door)
    assert retriever_folder(None, str(corpus_file), None, "minilm", "CoopRAG") == folders["cls"]
    loaded = {}
    retriever, folder = program_retriever("CoopRAG", corpus_file, "minilm", loaded=loaded)  # compare, reproduce
    assert folder == folders["cls"] and retriever.encoder.pooling == "cls"
    assert program_retriever("SingleStepRAG", corpus_file, "minilm", loaded=loaded)[1] == folders["mean"]
    assert program_retriever("IRCoT", corpus_file, "minilm", loaded=loaded)[0] is loaded[folders["mean"]]  # shared
    assert program_retriever("SingleStepRAG", corpus_file, "minilm", pooling="cls")[1] == folders["cls"]  # a row's
    assert retriever_folder(None, str(corpus_file), None, "minilm", "SingleStepRAG") == folders["mean"]
    assert encoded == [] and (folders["cls"] / "index.faiss").stat().st_mtime_ns == stamp


def test_the_first_encoding_shows_its_progress_on_stderr_unless_progress_is_off(corpus_file, capsys):
    cached_index(corpus_file, "dense", "minilm", progress=False)
    assert "encoding" not in capsys.readouterr().err
    with corpus_file.open("a") as another_corpus:
        another_corpus.write(json.dumps({"title": "T6", "text": "one more passage"}) + "\n")
    cached_index(corpus_file, "dense", "minilm")
    err = capsys.readouterr().err
    assert "encoding passages by minilm" in err and "7/7" in err and "passage/s" in err
    cached_index(corpus_file, "dense", "minilm")
    assert "encoding" not in capsys.readouterr().err  # cached


def test_an_index_describes_its_encoder_pooling_first_stage_and_passages(corpus_file, tmp_path):
    folder = program_index("CoopRAG", corpus_file, "minilm")
    described = describe_index(folder)
    assert described == {
        "first_stage": "dense", "reranker": None, "passages": 6, "corpus_sha256": described["corpus_sha256"],
        "encoder": "minilm", "encoder_sha256": Encoder("minilm").checksum(), "encoder_fine_tuned": False,
        "pooling": "cls", "special_tokens": list(CoopRAG.special_tokens), "token_states": "fp16"}
    bm25 = program_index("CoopRAG", corpus_file, "minilm", first_stage="bm25")
    assert describe_index(bm25) == {**described, "first_stage": "bm25", "encoder": None, "encoder_sha256": None,
                                    "encoder_fine_tuned": None, "pooling": None, "special_tokens": [],
                                    "token_states": "none"}
    RerankedRetriever(BM25Retriever(load_retriever(bm25).corpus), n=4, k=2).save(tmp_path / "reranked")
    assert describe_index(tmp_path / "reranked") == describe_index(bm25)
