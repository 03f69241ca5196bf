"""MLflow, DSPy's documented tracing path, on our programs: under ``mlflow.dspy.autolog()`` a question is one trace
with a span per module and LM call and typed retriever/reranker spans holding the documents; ``eval``/``compare
--mlflow URI --experiment NAME`` log a run (manifest → parameters, summary → metrics, folder → artifacts) with its
traces; a missing MLflow or a tracking server that does not answer is one line before any work. Every test writes to
a SQLite store in its own folder: nothing leaves the machine. Also ``dspy.inspect_history()`` after a program call."""

import json
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

import dspy
import pytest
from typer.testing import CliRunner

from multihop.cli import app
from multihop.cli.errors import run
from multihop.data.corpus import Corpus, Passage
from multihop.evaluation.mlflow_runs import key_name, metrics, mlflow_run, params
from multihop.programs import PROGRAMS
from multihop.retrievers.query import pick
from multihop.retrievers.rerankers import RerankStep
from multihop.retrievers.sparse import BM25Retriever
from multihop.runtime import spans

from helpers import data_root, paris_data, scripted_lm

mlflow = pytest.importorskip("mlflow", reason="pip install 'multihop[mlflow]'")
runner = CliRunner()
PASSAGES = [Passage.make(title="France", text="Paris is the capital of France."),
            Passage.make(title="Spain", text="Madrid is the capital of Spain."),
            Passage.make(title="Italy", text="Rome is the capital of Italy.")]


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    """The folder of one SQLite tracking store for the module (creating a store takes seconds); each test logs to
    experiments of its own."""
    return tmp_path_factory.mktemp("mlflow")


@pytest.fixture
def store(database, monkeypatch):
    """The module's tracking URI, the test running in the store's folder; MLflow's global state is put back after the
    test."""
    monkeypatch.chdir(database)
    yield f"sqlite:///{database / 'mlflow.db'}"
    mlflow.dspy.autolog(disable=True, silent=True)
    if mlflow.active_run():
        mlflow.end_run()
    mlflow.set_tracking_uri(None)


def traces_of(uri: str, experiment: str, **query) -> list:
    mlflow.set_tracking_uri(uri)
    mlflow.flush_trace_async_logging()
    found = mlflow.get_experiment_by_name(experiment)
    return mlflow.search_traces(locations=[found.experiment_id], return_type="list", **query)


def single_step() -> dspy.Module:
    return PROGRAMS["SingleStepRAG"](retriever=BM25Retriever(Corpus(PASSAGES)), k=2, rerank=None)


@pytest.mark.slow
def test_under_autolog_a_question_is_a_trace_with_a_span_per_stage_and_a_typed_retriever_span(store):
    program = single_step()
    with mlflow_run(store, "traced", "one question"), dspy.context(lm=scripted_lm(
            lambda prompt: {"reasoning": "r", "answer": "Paris"})[0]):
        assert program(question="What is the capital of France?").answer == "Paris"
    (trace,) = traces_of(store, "traced")
    by_type = {}
    for span in trace.data.spans:
        by_type.setdefault(span.span_type, []).append(span)
    (retrieval,) = by_type["RETRIEVER"]
    assert retrieval.name == "BM25Retriever.search" and retrieval.inputs == {
        "query": "What is the capital of France?", "k": 2}
    documents = retrieval.outputs
    assert len(documents) == 2 and documents[0]["page_content"] == "Paris is the capital of France."
    assert documents[0]["metadata"]["title"] == "France" and documents[0]["id"] == program.retriever.corpus[0].id
    assert [span.name for span in by_type["LLM"]] == ["Predict.forward"]  # the one stage, typed as an LM call
    assert any(span.name.startswith("SingleStepRAG") for span in by_type["CHAIN"])


class FirstOnes:
    """A reranker that keeps the first ``k`` candidates."""

    def rerank(self, query, candidates, k):
        return pick(candidates, list(range(k)), [1.0] * k)


@pytest.mark.slow
def test_a_rerank_step_is_a_reranker_span_with_the_documents_it_kept(store):
    candidates = BM25Retriever(Corpus(PASSAGES), k=3)(query="capital")
    with mlflow_run(store, "reranked"), mlflow.start_span("question"):
        kept = RerankStep(FirstOnes())(query="capital", candidates=candidates, k=1)
    (trace,) = traces_of(store, "reranked")
    (span,) = [span for span in trace.data.spans if span.span_type == "RERANKER"]
    assert span.name == "FirstOnes.rerank" and span.inputs["candidates"] == list(candidates.ids)
    assert [document["id"] for document in span.outputs] == list(kept.ids) and len(kept.ids) == 1


def test_outside_a_trace_a_search_records_nothing(store, monkeypatch):
    retriever = BM25Retriever(Corpus(PASSAGES), k=1)
    mlflow.set_tracking_uri(store)
    mlflow.set_experiment("quiet")
    assert retriever(query="Spain").titles == ["Spain"]
    assert traces_of(store, "quiet") == []
    with monkeypatch.context() as patched:  # undone before the store's teardown, which imports mlflow.dspy
        patched.setitem(sys.modules, "mlflow", None)  # never imported: the search does not import it
        assert spans.active_mlflow() is None and retriever(query="Italy").titles == ["Italy"]


def test_manifest_and_summary_become_mlflow_parameters_and_metrics():
    assert key_name("recall@5") == "recall_at_5" and key_name("answer.fallback") == "answer.fallback"
    assert params({"program": "X", "settings": {"k": 5, "rerank": None}, "notes": "x" * 7000}) == {
        "program": "X", "settings.k": "5", "settings.rerank": "None", "notes": "x" * 6000}
    assert metrics({"em": 0.5, "recall@2": 1, "judged": 0, "llm_eval": None, "program": "X", "ok": True,
                    "musique": {"X": {"f1": 0.25}}}) == {
        "em": 0.5, "recall_at_2": 1.0, "judged": 0.0, "musique.X.f1": 0.25}


@pytest.mark.slow
def test_eval_mlflow_logs_the_run_and_a_trace_per_question(tmp_path, store, built_lms):
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Capital of France, take {i}?",
                                             "answers": ["Paris"]}) + "\n" for i in range(3)))
    out = tmp_path / "run"
    result = runner.invoke(app, ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(out),
                                 "--lm", "openai/x", "--threads", "2", "--mlflow", store, "--experiment", "mine"],
                           terminal_width=300)
    assert result.exit_code == 0, result.output
    mlflow.set_tracking_uri(store)
    (run,) = mlflow.search_runs(experiment_names=["mine"], output_format="list")
    assert run.info.run_name == "NoRetrieval" and run.data.params["program"] == "NoRetrieval"
    assert run.data.metrics["em"] == 1.0 and run.data.metrics["questions"] == 3.0
    artifacts = {item.path for item in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {"results.jsonl", "summary.json", "traces"} <= artifacts
    traces = traces_of(store, "mine", run_id=run.info.run_id)
    assert len(traces) == 3 and all(any(span.span_type == "LLM" for span in t.data.spans) for t in traces)


@pytest.mark.slow
def test_compare_mlflow_logs_every_dataset_and_program(tmp_path, store, monkeypatch, built_lms):
    paris_data(tmp_path, monkeypatch)
    result = runner.invoke(app, ["compare", "--out", str(tmp_path / "cmp"), "--programs", "NoRetrieval,SingleStepRAG",
                                 "--datasets", "musique", "--first-stage", "bm25", "--lm", "openai/x",
                                 "--mlflow", store], terminal_width=300)
    assert result.exit_code == 0, result.output
    mlflow.set_tracking_uri(store)
    (run,) = mlflow.search_runs(experiment_names=["multihop"], output_format="list")
    assert run.data.metrics["musique.NoRetrieval.em"] == 1.0 and run.data.metrics["musique.SingleStepRAG.em"] == 1.0
    assert run.data.params["budget.k"] == "5" and run.data.params["programs.SingleStepRAG.config.k"] == "5"
    assert len(traces_of(store, "multihop", run_id=run.info.run_id)) == 2


def test_an_experiment_mlflow_run_creates_on_a_local_database_keeps_its_artifacts_beside_it(tmp_path, monkeypatch):
    from multihop.evaluation.mlflow_runs import artifact_location

    monkeypatch.chdir(tmp_path)  # a folder other than the database's: nothing may land in its ./mlruns
    database = tmp_path / "store" / "mlflow.db"
    database.parent.mkdir()
    uri = f"sqlite:///{database}"
    assert artifact_location(uri, "my runs") == (tmp_path / "store" / "mlartifacts" / "my_runs").as_uri()
    assert artifact_location("http://host:5000", "x") is None and artifact_location("sqlite:///:memory:", "x") is None
    (tmp_path / "rows.txt").write_text("rows")
    try:
        with mlflow_run(uri, "my runs") as run:
            mlflow.log_artifact(str(tmp_path / "rows.txt"))
        assert run.info.artifact_uri.startswith((tmp_path / "store" / "mlartifacts" / "my_runs").as_uri())
        assert (tmp_path / "store" / "mlartifacts" / "my_runs" / run.info.run_id / "artifacts" / "rows.txt").exists()
        with mlflow_run(uri, "my runs") as again:  # the experiment exists: the same place
            pass
        assert again.info.artifact_uri.startswith((tmp_path / "store" / "mlartifacts" / "my_runs").as_uri())
        with mlflow_run(uri, "elsewhere", artifacts=tmp_path / "kept") as chosen:
            pass
        assert chosen.info.artifact_uri.startswith((tmp_path / "kept").as_uri())
        assert not (tmp_path / "mlruns").exists()
    finally:
        mlflow.set_tracking_uri(None)


def docs_mlflow_blocks() -> str:
    """The Python blocks of the traces page's MLflow section, in order, as one script."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "concepts" / "traces.md").read_text()
    section = page.split("\n## MLflow and DSPy's history\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(re.findall(r"```python\n(.*?)```", section, re.S))


def run_docs_mlflow_blocks(folder: Path, prelude: str = "") -> str:
    """Run the blocks (after ``prelude``) in a fresh Python in ``folder``, an empty one, and check what they left:
    the spans printed, the traces of the evaluation, and where MLflow put the artifacts."""
    import os
    import subprocess

    env = {key: value for key, value in os.environ.items() if not key.startswith("MLFLOW_")}  # set_experiment sets some
    env.update(MULTIHOP_DATA=str(data_root()), HF_HUB_OFFLINE="1", DSPY_CACHEDIR=str(folder / "cache"))
    result = subprocess.run([sys.executable, "-c", prelude + docs_mlflow_blocks()], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert "SingleStepRAG.forward" in lines[0] and "BM25Retriever.search" in lines[0], result.stdout
    traces, uri = lines[1].split(" ", 1)
    experiment = (folder / "mlartifacts" / "rag").resolve()  # the experiment's artifacts, beside the database
    artifacts = Path(urlparse(uri).path).resolve()
    assert traces == "2" and urlparse(uri).scheme == "file" and artifacts.is_relative_to(experiment), result.stdout
    assert (folder / "runs" / "rag" / "manifest.json").exists()
    assert (folder / "runs" / "rag-eval" / "summary.json").exists()
    run_id = artifacts.relative_to(experiment).parts[0]
    assert (folder / "mlartifacts" / "rag" / run_id / "artifacts" / "summary.json").exists()  # beside the database


@pytest.mark.slow  # the page's blocks in a subprocess with MLflow's SQLite store (~11 s)
def test_the_traces_pages_mlflow_snippets_run(tmp_path):
    """The page's blocks as written, but for the LM: ``configure_lm`` configures a scripted one (the slow test below
    runs them on the embedded LM)."""
    tests = Path(__file__).resolve().parents[1]
    run_docs_mlflow_blocks(tmp_path, prelude=(
        f"import sys; sys.path.insert(0, {str(tests)!r})\n"
        "import dspy, multihop\nfrom helpers import scripted_lm\n"
        "multihop.configure_lm = lambda *args, **kwargs: dspy.configure(lm=scripted_lm(\n"
        "    lambda prompt: {'reasoning': 'r', 'answer': 'Paris'})[0])\n"))


@pytest.mark.slow
def test_the_traces_pages_mlflow_snippets_run_as_written_from_an_empty_folder(tmp_path):
    run_docs_mlflow_blocks(tmp_path)


def test_a_tracking_server_that_does_not_answer_is_one_line_before_any_work(tmp_path, questions, capsys):
    code = run(app, ["eval", "--program", "NoRetrieval", "--data", str(questions), "--out", str(tmp_path / "run"),
                     "--mlflow", "http://127.0.0.1:1"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and line.startswith("error: --mlflow http://127.0.0.1:1: no tracking server answers there")
    assert "--mlflow sqlite:///mlflow.db" in line and not (tmp_path / "run" / "results.jsonl").exists()


def test_mlflow_not_installed_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    code = run(app, ["compare", "--out", str(tmp_path / "cmp"), "--mlflow", "sqlite:///x.db"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and line == "error: --mlflow needs MLflow: pip install 'multihop[mlflow]'"


def test_dspy_inspect_history_shows_a_programs_stage_calls(capsys):
    program = single_step()
    with dspy.context(lm=scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"}, cache=False)[0]):
        program(question="What is the capital of France?")
        dspy.inspect_history(n=1)
    shown = capsys.readouterr().out
    assert "Paris is the capital of France." in shown and "What is the capital of France?" in shown
    assert "[[ ## answer ## ]]" in shown
