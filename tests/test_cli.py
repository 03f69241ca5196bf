from typer.testing import CliRunner

from multihop.cli import app
from multihop.evaluation import evaluate

from helpers import Echo, echo_examples

runner = CliRunner()


def test_trace_show_lists_questions_and_shows_one(tmp_path):
    evaluate(Echo(), echo_examples(2), tmp_path, progress=False)
    listing = runner.invoke(app, ["trace", "show", str(tmp_path)])
    assert listing.exit_code == 0 and "q0" in listing.output and "q1" in listing.output
    one = runner.invoke(app, ["trace", "show", str(tmp_path), "--id", "q1"])
    assert one.exit_code == 0 and "prediction" in one.output
    missing = runner.invoke(app, ["trace", "show", str(tmp_path), "--id", "nope"])
    assert missing.exit_code != 0


def test_models_list_shows_the_registry():
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0 and "minilm" in result.output and "smollm2" in result.output


def test_data_fetch_offline_fails_clearly(tmp_path, monkeypatch):
    import multihop.fetch as fetch

    def offline(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(fetch.urllib.request, "urlopen", offline)
    result = runner.invoke(app, ["data", "fetch", "hotpotqa", "--root", str(tmp_path)])
    assert result.exit_code == 1 and "offline" in result.output
    assert not list(tmp_path.rglob("*.json"))  # nothing half-written is left behind


def test_data_list_without_data_says_where_to_point(monkeypatch):
    monkeypatch.delenv("MULTIHOP_DATA", raising=False)
    result = runner.invoke(app, ["data", "list"])
    assert result.exit_code == 1 and "MULTIHOP_DATA" in result.output


def test_index_build_writes_any_retriever_kind(tmp_path):
    from multihop.retrievers import BM25Retriever, RaLa, Retriever, load_retriever

    corpus = tmp_path / "corpus.jsonl"
    topics = ["volcano", "violin", "glacier", "penguin", "saffron", "lighthouse", "chess", "comet", "bamboo",
              "submarine", "tulip", "falcon"]
    corpus.write_text("".join(f'{{"title": "{t.title()}", "text": "An article about the {t}."}}\n' for t in topics)
                      + '{"title": "Empty", "text": "  "}\n')
    sparse = runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "bm25"),
                                 "--first-stage", "bm25"])
    assert sparse.exit_code == 0 and "12 passages (1 empty skipped)" in sparse.output
    assert isinstance(load_retriever(tmp_path / "bm25"), BM25Retriever)
    reranked = runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "rr"), "--encoder", "minilm",
                                   "--rerank", "rala-eq3", "--buckets", "2", "--n", "6", "--k", "3"])
    assert reranked.exit_code == 0, reranked.output
    loaded = load_retriever(tmp_path / "rr")
    assert isinstance(loaded, Retriever) and loaded.n == 6 and loaded.k == 3
    assert loaded.reranker.config() == RaLa("eq3", buckets=2).bind(loaded.first_stage).config()
    assert loaded.reranker.encoder is loaded.first_stage.encoder and loaded.reranker.tokens is loaded.first_stage.tokens
    assert loaded.first_stage.tokens.layers == RaLa("eq3", buckets=2).candidate_layers(6)
    assert loaded("Which comet?").ids[0] == load_retriever(tmp_path / "bm25")("Which comet?").ids[0]


def test_index_build_takes_the_registry_names_and_the_markers(tmp_path):
    from multihop.retrievers import RERANKERS, DenseRetriever, MaxSim, Retriever, load_retriever
    from multihop.signatures.cooprag import SPECIAL_TOKENS

    help_text = " ".join(runner.invoke(app, ["index", "build", "--help"]).output.split())
    assert all(name in help_text for name in RERANKERS)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(f'{{"title": "T{i}", "text": "An article about topic {i}."}}\n' for i in range(4)))
    built = runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "m"), "--encoder", "minilm",
                                "--rerank", "maxsim", "--n", "4", "--k", "2", "--markers", "cooprag"])
    assert built.exit_code == 0, built.output
    loaded = load_retriever(tmp_path / "m")
    assert isinstance(loaded, Retriever) and type(loaded.reranker) is MaxSim
    assert isinstance(loaded.first_stage, DenseRetriever)
    assert loaded.first_stage.encoder.special_tokens == SPECIAL_TOKENS
    assert loaded.reranker.encoder is loaded.first_stage.encoder
    for bad, message in ((["--rerank", "colbert"], "unknown reranker 'colbert'"),
                         (["--rerank", "maxsim", "--buckets", "2"], "'maxsim': got an unexpected keyword"),
                         (["--markers", "hanrag"], "unknown --markers 'hanrag'")):
        refused = runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "x"), "--encoder",
                                      "minilm", *bad])
        assert refused.exit_code == 2 and message in refused.output and not (tmp_path / "x").exists(), bad


def test_set_passes_constructor_switches_and_refuses_bad_ones(tmp_path):
    import pytest
    import typer

    from multihop.cli import _program

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"title": "Comet", "text": "An article about comets."}\n')
    assert runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "bm25"),
                               "--first-stage", "bm25"]).exit_code == 0
    program, _ = _program("ComposeRAG", str(tmp_path / "bm25"), None, None, 3, "minilm",
                          ["simple_qa=false", "max_reflections=1", "passage_reranking=false"])
    assert program.config()["simple_qa"] is False and program.max_reflections == 1 and program.k == 3
    assert "rerank" not in program.stage_names()
    with pytest.raises(typer.BadParameter, match="answer_verification=False"):
        _program("ComposeRAG", str(tmp_path / "bm25"), None, None, 3, "minilm", ["answer_verification=false"])
    with pytest.raises(typer.BadParameter, match="key=value"):
        _program("ComposeRAG", str(tmp_path / "bm25"), None, None, 3, "minilm", ["simple_qa"])
