import json
import logging

import pytest
from typer.testing import CliRunner

from multihop.cli import app
from multihop.cli.errors import run
from multihop.evaluation.runner import evaluate

from helpers import Echo, data_root, echo_examples, scripted_lm

runner = CliRunner()


@pytest.fixture
def built_lms(monkeypatch):
    """``multihop.lm.backends.make_lm`` recorded: ``(spec, settings)`` per LM built; each answers "Paris" (and judges
    answers correct)."""
    import multihop.lm.backends

    built = []

    def make_lm(spec, **settings):
        built.append((spec, settings))
        reply = {"reasoning": "r", "answer": "Paris", "correct": "True"}
        return scripted_lm(lambda prompt: reply, name=spec.replace("/", "-"))[0]

    monkeypatch.setattr(multihop.lm.backends, "make_lm", make_lm)
    return built


def test_lm_options_reach_every_lm_the_command_builds(built_lms, questions, tmp_path):
    result = runner.invoke(app, ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out",
                                 str(tmp_path / "run"), "--lm", "openai/served", "--api-base", "http://host:8000/v1",
                                 "--max-tokens", "7", "--judge-lm", "openai/judge"],
                           env={"MULTIHOP_API_KEY": "from-env"})
    assert result.exit_code == 0, result.output
    server = {"api_base": "http://host:8000/v1", "api_key": "from-env", "timeout": None, "structured": "auto"}
    assert built_lms == [("openai/served", {**server, "adapter": None, "max_tokens": 7}),
                         ("openai/judge", {**server, "adapter": None, "max_tokens": None})]  # key and server shared
    row = json.loads((tmp_path / "run" / "results.jsonl").read_text())
    assert row["prediction"] == "Paris" and row["metrics"]["llm_eval"] == 1.0


def test_api_key_flag_wins_over_the_environment_and_the_teacher_lm_takes_the_options(built_lms, questions,
                                                                                       tmp_path):
    result = runner.invoke(app, ["trajectories", "--program", "NoRetrieval", "--data", str(questions), "--out",
                                 str(tmp_path / "traj"), "--teacher-lm", "openai/teacher", "--api-key", "from-flag",
                                 "--max-tokens", "64"], env={"MULTIHOP_API_KEY": "from-env"})
    assert result.exit_code == 0, result.output
    assert built_lms == [("openai/teacher", {"api_base": None, "api_key": "from-flag", "adapter": None,
                                             "max_tokens": 64, "timeout": None, "structured": "auto"})]
    assert "kept 1 of 1 questions" in result.output


def test_the_demo_caps_generation_at_32_tokens_and_runs_the_student_on_the_local_lm_unless_told(monkeypatch):
    import multihop.cli.demo as demo

    seen = []
    monkeypatch.setattr(demo, "run_demo", lambda out, train, dev, lm, console, student: seen.append((lm, student)))
    assert runner.invoke(app, ["demo"]).exit_code == 0
    assert runner.invoke(app, ["demo", "--max-tokens", "100", "--lm", "openai/x"]).exit_code == 0
    assert runner.invoke(app, ["demo", "--no-student"]).exit_code == 0
    assert runner.invoke(app, ["demo", "--lm", "local:qwen-coder-0.5b"]).exit_code == 0  # the shipped one is SmolLM2's
    assert [(lm.lm, lm.max_tokens, student) for lm, student in seen] == [
        ("local:smollm2", 32, demo.SHIPPED_STUDENT), ("openai/x", 100, None), ("local:smollm2", 32, None),
        ("local:qwen-coder-0.5b", 32, None)]


def _error(result) -> str:
    """The error message of a usage error, unwrapped from its box."""
    assert result.exit_code == 2 and "Traceback" not in result.output
    return " ".join(result.output.replace("│", " ").split())


def test_bad_lm_options_and_data_end_in_one_line_naming_what_to_change(tmp_path):
    adapter = runner.invoke(app, ["ask", "a question", "--load", str(tmp_path), "--lm", "openai/x", "--adapter",
                                  str(tmp_path)])
    assert "for the LM options (--lm, --adapter, --engine, --structured): adapter= applies to local models only" in \
        _error(adapter)
    data = runner.invoke(app, ["eval", "--program", "NoRetrieval", "--data", "nosuch", "--out", str(tmp_path)])
    assert "Invalid value for --data: nosuch: no such file; give a question file or one of musique, hotpotqa, 2wiki" \
        in _error(data)


def test_data_takes_a_dataset_name(built_lms, tmp_path):
    data_root()
    result = runner.invoke(app, ["eval", "--program", "NoRetrieval", "--data", "hotpotqa", "--limit", "2", "--out",
                                 str(tmp_path / "run"), "--lm", "openai/x"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["prediction"] == "Paris" for row in rows)


@pytest.fixture
def restore_logging():
    root, ours = logging.getLogger(), logging.getLogger("multihop")
    levels = root.level, ours.level
    yield
    root.setLevel(levels[0])
    ours.setLevel(levels[1])


def test_verbose_logs_multihop_at_info_and_other_libraries_at_warning(restore_logging):
    assert runner.invoke(app, ["-v", "models", "list"]).exit_code == 0
    assert logging.getLogger("multihop.retrievers.encoder").isEnabledFor(logging.INFO)
    assert not logging.getLogger("some.library").isEnabledFor(logging.INFO)
    assert logging.getLogger("some.library").isEnabledFor(logging.WARNING)
    assert runner.invoke(app, ["models", "list"]).exit_code == 0
    assert not logging.getLogger("multihop.retrievers.encoder").isEnabledFor(logging.INFO)
    assert logging.getLogger("multihop.data.loaders").isEnabledFor(logging.WARNING)


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


def test_data_fetch_offline_fails_clearly(tmp_path, monkeypatch, capsys):
    import multihop.data.fetch as fetch

    def offline(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(fetch.urllib.request, "urlopen", offline)
    assert run(app, ["data", "fetch", "hotpotqa", "--root", str(tmp_path)]) == 1  # a failure at run time
    assert "offline" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.json"))  # nothing half-written is left behind


def test_data_list_without_data_says_where_to_point(monkeypatch, capsys):
    monkeypatch.delenv("MULTIHOP_DATA", raising=False)
    assert run(app, ["data", "list"]) == 2  # bad input: where the data is
    assert "error: MULTIHOP_DATA is not set to an existing folder" in capsys.readouterr().err


def test_index_build_writes_any_retriever_kind(tmp_path):
    from multihop.retrievers import BM25Retriever, RaLa, RerankedRetriever, load_retriever

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
                                   "--rerank", "rala-eq3", "--buckets", "2", "--seed", "7", "--n", "6", "--k", "3"])
    assert reranked.exit_code == 0, reranked.output
    loaded = load_retriever(tmp_path / "rr")
    assert isinstance(loaded, RerankedRetriever) and loaded.n == 6 and loaded.k == 3
    assert loaded.reranker.config() == RaLa("eq3", buckets=2, seed=7).bind(loaded.first_stage).config()
    assert loaded.reranker.encoder is loaded.first_stage.encoder and loaded.reranker.tokens is loaded.first_stage.tokens
    assert loaded.first_stage.tokens.layers == RaLa("eq3", buckets=2, seed=7).candidate_layers(6)
    assert loaded("Which comet?").ids[0] == load_retriever(tmp_path / "bm25")("Which comet?").ids[0]


def test_index_build_takes_the_registry_names_and_the_markers(tmp_path):
    from multihop.retrievers import RERANKERS, DenseRetriever, MaxSim, RerankedRetriever, load_retriever
    from multihop.signatures.cooprag import SPECIAL_TOKENS

    help_text = " ".join(runner.invoke(app, ["index", "build", "--help"]).output.split())
    assert all(name in help_text for name in RERANKERS)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(f'{{"title": "T{i}", "text": "An article about topic {i}."}}\n' for i in range(4)))
    built = runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "m"), "--encoder", "minilm",
                                "--rerank", "maxsim", "--n", "4", "--k", "2", "--markers", "CoopRAG"])
    assert built.exit_code == 0, built.output
    loaded = load_retriever(tmp_path / "m")
    assert isinstance(loaded, RerankedRetriever) and type(loaded.reranker) is MaxSim
    assert isinstance(loaded.first_stage, DenseRetriever)
    assert loaded.first_stage.encoder.special_tokens == SPECIAL_TOKENS
    assert loaded.first_stage.encoder.pooling == "cls"  # an index for CoopRAG pools as its Eq. 2
    assert loaded.reranker.encoder is loaded.first_stage.encoder
    mean = runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "mean"), "--encoder", "minilm",
                               "--markers", "CoopRAG", "--pooling", "mean"])
    assert mean.exit_code == 0 and load_retriever(tmp_path / "mean").encoder.pooling == "mean"
    for bad, message in ((["--rerank", "colbert"], "unknown reranker 'colbert'"),
                         (["--rerank", "maxsim", "--buckets", "2"], "'maxsim': got an unexpected keyword"),
                         (["--markers", "SingleStepRAG"], "writes no query markers"),
                         (["--pooling", "max"], "pooling must be one of mean, cls")):
        refused = runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "x"), "--encoder",
                                      "minilm", *bad])
        assert refused.exit_code == 2 and message in refused.output and not (tmp_path / "x").exists(), bad


def test_set_passes_constructor_switches_and_refuses_bad_ones(tmp_path):
    import pytest
    import typer

    from multihop.cli.programs import build_program

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"title": "Comet", "text": "An article about comets."}\n')
    assert runner.invoke(app, ["index", "build", str(corpus), "--out", str(tmp_path / "bm25"),
                               "--first-stage", "bm25"]).exit_code == 0
    program, _ = build_program("ComposeRAG", str(tmp_path / "bm25"), None, None, 3, "minilm",
                          ["simple_qa=false", "max_reflections=1", "passage_reranking=false"])
    assert program.config()["simple_qa"] is False and program.max_reflections == 1 and program.k == 3
    assert "rerank" not in program.stage_names()
    with pytest.raises(typer.BadParameter, match="answer_verification=False"):
        build_program("ComposeRAG", str(tmp_path / "bm25"), None, None, 3, "minilm", ["answer_verification=false"])
    with pytest.raises(typer.BadParameter, match="key=value"):
        build_program("ComposeRAG", str(tmp_path / "bm25"), None, None, 3, "minilm", ["simple_qa"])


def test_an_index_built_for_a_program_keeps_its_query_markers_and_pooling(tmp_path, monkeypatch):
    from multihop.cli.programs import build_program
    from multihop.signatures.cooprag import SPECIAL_TOKENS

    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"title": "Comet", "text": "An article about comets."}\n')
    program, folder = build_program("CoopRAG", None, str(corpus), None, 1, "minilm", ["rerank=null"])
    assert program.retriever.encoder.special_tokens == SPECIAL_TOKENS and program.retriever.encoder.pooling == "cls"
    plain, plain_folder = build_program("SingleStepRAG", None, str(corpus), None, 1, "minilm")
    assert plain_folder != folder and plain.retriever.encoder.pooling == "mean"
    assert plain.retriever.encoder.special_tokens == SPECIAL_TOKENS  # every declared method's: the index compare uses


def test_distill_help_names_every_registered_preset():
    from multihop.programs.distill_presets import DISTILL_PRESETS

    help_text = " ".join(runner.invoke(app, ["distill", "--help"]).output.split())
    assert all(name in help_text for name in DISTILL_PRESETS)


@pytest.mark.parametrize("command", ["eval", "compile", "trajectories"])
def test_program_options_reach_the_program_every_command_builds(built_lms, questions, tmp_path, command,
                                                                  monkeypatch):
    import multihop.cli.programs as programs

    seen, real = [], programs.build_program

    def build_program(name, retriever_dir, corpus, data, k, encoder, settings):
        seen.append((name, retriever_dir, corpus, k, encoder, settings))
        return real("NoRetrieval", None, None, None, k, encoder, [])

    monkeypatch.setattr(programs, "build_program", build_program)
    result = runner.invoke(app, [command, "--program", "ComposeRAG", "--set", "simple_qa=false", "--retriever", "R",
                                 "--corpus", "C", "--k", "3", "--encoder", "minilm", "--data", str(questions),
                                 "--out", str(tmp_path / "out"), *(["--min-score", "0"] if command == "trajectories"
                                                                   else [])])
    assert result.exit_code == 0, result.output
    assert seen == [("ComposeRAG", "R", "C", 3, "minilm", ["simple_qa=false"])]


def test_help_names_the_choices_of_every_registry_option_and_the_lm_options_have_their_panel():
    shown = " ".join(runner.invoke(app, ["eval", "--help"], terminal_width=400).output.replace("│", " ").split())
    assert "choose from: CoopRAG, DualRAG, ComposeRAG, HANRAG, CIRAG, NoRetrieval, SingleStepRAG" in shown
    assert "`multihop programs`" in shown
    assert "choose from: auto, llamacpp, transformers" in shown and "choose from: auto, json_schema" in shown
    assert "╭─ LM options" in runner.invoke(app, ["eval", "--help"], terminal_width=400).output
    built = " ".join(runner.invoke(app, ["index", "build", "--help"], terminal_width=400).output.replace("│", " ")
                     .split())
    assert "choose from: dense, bm25, hybrid, plaid" in built
    assert "choose from: full, fp16, int8, pq, plaid, none" in built
    assert "choose from: none, maxsim" in built
    compiled = " ".join(runner.invoke(app, ["compile", "--help"], terminal_width=400).output.replace("│", " ").split())
    assert "choose from: labeled, bootstrap, random-search, mipro, simba, gepa" in compiled


def test_shell_completion_offers_the_program_names(monkeypatch):
    import subprocess
    import sys

    completed = subprocess.run([sys.executable, "-m", "multihop.cli"], capture_output=True, text=True, env={
        **__import__("os").environ, "_MULTIHOP_COMPLETE": "complete_bash", "COMP_WORDS": "multihop eval --program Co",
        "COMP_CWORD": "3"})
    assert completed.stdout.split() == ["CoopRAG", "ComposeRAG"]


def test_the_command_line_and_every_program_import_without_torch():
    import subprocess
    import sys

    code = "import sys, multihop.cli.app, multihop.programs; print('torch' in sys.modules)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "False"  # loaded by the first encoder or reranker score, not by a command


@pytest.mark.slow  # ranx's measures are numba code, compiled on first use (~50 s in a fresh venv)
def test_eval_writes_a_trec_run_and_qrels_that_ranx_reads(built_lms, tmp_path):
    ranx = pytest.importorskip("ranx")
    data = tmp_path / "questions.jsonl"
    paragraphs = [{"title": "France", "text": "Paris is the capital of France.", "is_supporting": True},
                  {"title": "Italy", "text": "Rome is the capital of Italy."}]
    data.write_text(json.dumps({"id": "q1", "question": "Capital of France?", "answers": ["Paris"],
                                "paragraphs": paragraphs}) + "\n")
    assert runner.invoke(app, ["index", "build", str(data), "--out", str(tmp_path / "bm25"),
                               "--first-stage", "bm25"]).exit_code == 0
    result = runner.invoke(app, ["eval", "--program", "SingleStepRAG", "--data", str(data), "--retriever",
                                 str(tmp_path / "bm25"), "--k", "2", "--out", str(tmp_path / "run"), "--lm",
                                 "openai/x", "--trec-run", str(tmp_path / "run.trec")], terminal_width=300)
    assert result.exit_code == 0, result.output
    assert "nDCG@10" in result.output and "MRR" in result.output and f"{tmp_path / 'run.qrels'}" in result.output
    run, qrels = (ranx.Run.from_file(str(tmp_path / name), kind="trec") if name.endswith("trec")
                  else ranx.Qrels.from_file(str(tmp_path / name), kind="trec") for name in ("run.trec", "run.qrels"))
    assert run.name == "SingleStepRAG" and len(run.to_dict()["q1"]) == 2 and len(qrels.to_dict()["q1"]) == 1
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert ranx.evaluate(qrels, run, "ndcg@10") == pytest.approx(summary["ndcg@10"])
