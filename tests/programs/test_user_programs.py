"""A user's own program by import path, ``--program package.module:ClassName``: a ``MultihopProgram`` subclass or a
plain ``dspy.Module`` in a module of the current folder is evaluated (``eval``), compared (``compare --programs``),
saved and loaded again like a built-in, and the run manifest and the saved folder record its import path. The
textbook DSPy RAG module (``dspy.Retrieve`` then a ``ChainOfThought``) searches the ``--retriever`` given, its
passages recorded and scored like a program's own, and a plain module instance saves and loads by its import
path."""

import json
import sys

import dspy
import pytest
from typer.testing import CliRunner

import multihop
from multihop.cli import app
from multihop.data.corpus import Passage
from multihop.data.folders import RUN_MANIFEST
from multihop.data.jsonl import read_rows
from multihop.programs import PROGRAMS

from helpers import StaticRetriever, paris_data, scripted_lm

runner = CliRunner()

MODULE = '''
import dspy

from multihop.programs import MultihopProgram


class Reply(dspy.Signature):
    """Answer the question in a few words."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


class MyOwnRAG(MultihopProgram):
    """Search, then answer."""

    def __init__(self, retriever=None, k: int = 2, tone: str = "plain"):
        super().__init__(retriever=retriever)
        self.k, self.tone = k, tone
        self.add_stages(reply=Reply)

    def forward(self, question):
        hits = self.search(question, k=self.k)
        answer = self.run_stage(self.reply, {"answer": ""}, question=question).answer
        return dspy.Prediction(answer=answer, passage_ids=list(hits.ids))


class ClassicRAG(dspy.Module):
    """The textbook DSPy RAG module: dspy.Retrieve, then a ChainOfThought over the passages."""

    def __init__(self, num_passages: int = 3):
        super().__init__()
        self.retrieve = dspy.Retrieve(k=num_passages)
        self.generate_answer = dspy.ChainOfThought("context, question -> answer")

    def forward(self, question):
        context = self.retrieve(question).passages
        return self.generate_answer(context=context, question=question)


class PlainModule(dspy.Module):
    """A plain DSPy module: one ChainOfThought."""

    def __init__(self):
        super().__init__()
        self.answer = dspy.ChainOfThought("question -> answer")

    def forward(self, question):
        return self.answer(question=question)
'''


@pytest.fixture
def questions(tmp_path, monkeypatch):
    """A question file of one question with its paragraph, and a MULTIHOP_HOME of the test's own for its index."""
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps({"id": "q1", "question": "Capital of France?", "answers": ["Paris"], "paragraphs": [
        {"title": "France", "text": "Paris is the capital of France.", "is_supporting": True}]}) + "\n")
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    return path


@pytest.fixture
def user_package(tmp_path, monkeypatch):
    """``mine/programs.py`` in a folder that is the current one; its classes forgotten by the registry afterwards."""
    folder = tmp_path / "work"
    (folder / "mine").mkdir(parents=True)
    (folder / "mine" / "__init__.py").write_text("")
    (folder / "mine" / "programs.py").write_text(MODULE)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    for name in ("MyOwnRAG", "PlainModule", "ClassicRAG"):
        PROGRAMS.remove(name)
    PROGRAMS._imported.clear()
    for module in ("mine.programs", "mine"):
        sys.modules.pop(module, None)


@pytest.fixture
def paris_lm(monkeypatch):
    """Every LM the commands build answers "Paris"."""
    import multihop.lm.backends

    def make_lm(spec, **settings):
        return scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"}, name=spec.replace("/", "-"))[0]

    monkeypatch.setattr(multihop.lm.backends, "make_lm", make_lm)


@pytest.mark.parametrize("path", ["mine.programs:MyOwnRAG", "mine.programs:PlainModule"])
def test_eval_runs_a_users_program_and_records_its_import_path(user_package, paris_lm, questions, path):
    result = runner.invoke(app, ["eval", "--program", path, "--data", str(questions), "--out", "run",
                                 "--lm", "openai/x", "--encoder", "minilm"], terminal_width=300)
    assert result.exit_code == 0, result.output
    row = next(iter(read_rows(user_package / "run" / "results.jsonl").values()))
    assert row["error"] is None and row["prediction"] == "Paris" and row["metrics"]["em"] == 1.0
    manifest = json.loads((user_package / "run" / RUN_MANIFEST).read_text())
    assert manifest["import_path"] == path and manifest["program"] == path.rpartition(":")[2]
    again = runner.invoke(app, ["eval", "--program", path, "--data", str(questions), "--out", "run",
                                "--lm", "openai/x", "--encoder", "minilm"], terminal_width=300)
    assert again.exit_code == 0, again.output  # the same run: resumed


def test_set_reaches_a_users_program(user_package, paris_lm, questions):
    result = runner.invoke(app, ["eval", "--program", "mine.programs:MyOwnRAG", "--set", "tone=terse", "--data",
                                 str(questions), "--out", "run", "--lm", "openai/x", "--encoder", "minilm"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((user_package / "run" / RUN_MANIFEST).read_text())
    assert manifest["config"] == {"k": 2, "tone": "terse"}


@pytest.mark.parametrize(("path", "message"), [
    ("nosuch.module:Thing", "cannot import nosuch.module"),
    ("mine.programs:Nothing", "mine.programs has no Nothing"),
    ("mine.programs:Reply", "is no dspy.Module subclass"),
])
def test_a_bad_import_path_is_one_line(user_package, paris_lm, questions, path, message):
    result = runner.invoke(app, ["eval", "--program", path, "--data", str(questions), "--out", "run",
                                 "--lm", "openai/x"], terminal_width=300)
    assert result.exit_code == 2 and message in " ".join(result.output.replace("│", " ").split()), result.output


def test_compare_runs_a_users_program_beside_a_built_in(user_package, tmp_path, monkeypatch):
    paris_data(tmp_path, monkeypatch)
    dspy.configure(lm=scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"})[0])
    comparison = multihop.compare(tmp_path / "out", datasets=["musique"], first_stage="bm25", progress=False,
                                  programs=["NoRetrieval", "mine.programs:MyOwnRAG", "mine.programs:PlainModule"])
    rows = {row["program"]: row for row in comparison["rows"]}
    assert set(rows) == {"NoRetrieval", "MyOwnRAG", "PlainModule"} and rows["MyOwnRAG"]["em"] == 1.0
    assert rows["MyOwnRAG"]["recall@2"] == 1.0 and rows["PlainModule"]["em"] == 1.0
    assert comparison["programs"]["MyOwnRAG"]["import_path"] == "mine.programs:MyOwnRAG"
    assert comparison["programs"]["MyOwnRAG"]["kind"] == "custom"
    manifest = json.loads((tmp_path / "out" / "musique" / "PlainModule" / RUN_MANIFEST).read_text())
    assert manifest["import_path"] == "mine.programs:PlainModule"


def test_compare_gives_a_users_module_its_index_as_dspy_settings_rm(user_package, tmp_path, monkeypatch):
    paris_data(tmp_path, monkeypatch)
    dspy.configure(lm=scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"})[0])
    comparison = multihop.compare(tmp_path / "out", datasets=["musique"], first_stage="bm25", progress=False,
                                  programs=["mine.programs:ClassicRAG"])
    (row,) = comparison["rows"]
    assert row["em"] == 1.0 and row["recall@5"] == 1.0  # dspy.Retrieve searched the dev file's own paragraphs
    manifest = json.loads((tmp_path / "out" / "musique" / "ClassicRAG" / RUN_MANIFEST).read_text())
    assert manifest["retriever"] is not None


def test_the_compare_command_takes_an_import_path(user_package, paris_lm, tmp_path, monkeypatch):
    paris_data(tmp_path, monkeypatch)
    result = runner.invoke(app, ["compare", "--out", "cmp", "--programs", "mine.programs:PlainModule",
                                 "--datasets", "musique", "--first-stage", "bm25", "--lm", "openai/x"],
                           terminal_width=300)
    assert result.exit_code == 0, result.output
    assert json.loads((user_package / "cmp" / "comparison.json").read_text())["rows"][0]["em"] == 1.0


@pytest.mark.parametrize("path", ["mine.programs:MyOwnRAG", "mine.programs:PlainModule"])
def test_a_users_program_is_saved_and_loaded_by_its_import_path(user_package, path, tmp_path):
    cls = PROGRAMS[PROGRAMS.named(path)]
    program = cls()
    predictor = program.named_predictors()[0][1]
    predictor.signature = predictor.signature.with_instructions("Be brief.")
    predictor.demos = [dspy.Example(question="Capital of Italy?", answer="Rome")]
    folder = multihop.save(program, tmp_path / "saved")
    info = json.loads((folder / "manifest.json").read_text())
    assert info["import_path"] == path
    # a fresh process: nothing of the user's module registered or imported yet
    PROGRAMS.remove(cls.__name__)
    PROGRAMS._imported.clear()
    sys.modules.pop("mine.programs", None)
    loaded = multihop.load(folder, retriever=StaticRetriever([Passage.make("France", "Paris is in France.")]))
    assert type(loaded).__name__ == cls.__name__ and type(loaded) is not cls
    loaded_predictor = loaded.named_predictors()[0][1]
    assert loaded_predictor.signature.instructions == "Be brief."
    assert [demo["answer"] for demo in loaded_predictor.demos] == ["Rome"]
    with dspy.context(lm=scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"})[0]):
        assert loaded(question="Capital of France?").answer == "Paris"


def test_compile_saves_a_users_program_that_eval_loads_again(user_package, paris_lm, questions):
    compiled = runner.invoke(app, ["compile", "--program", "mine.programs:PlainModule", "--optimizer", "labeled",
                                   "--data", str(questions), "--out", "saved", "--lm", "openai/x"], terminal_width=300)
    assert compiled.exit_code == 0, compiled.output
    assert json.loads((user_package / "saved" / "manifest.json").read_text())["import_path"] == \
        "mine.programs:PlainModule"
    PROGRAMS.remove("PlainModule")  # as in a fresh process
    PROGRAMS._imported.clear()
    sys.modules.pop("mine.programs", None)
    result = runner.invoke(app, ["eval", "--load", "saved", "--data", str(questions), "--out", "run",
                                 "--lm", "openai/x"], terminal_width=300)
    assert result.exit_code == 0, result.output
    assert next(iter(read_rows(user_package / "run" / "results.jsonl").values()))["prediction"] == "Paris"


PARIS = Passage.make("France", "Paris is the capital of France.")
DISTRACTORS = [Passage.make(country, f"{city} is the capital of {country}.")
               for country, city in (("Italy", "Rome"), ("Spain", "Madrid"), ("Peru", "Lima"), ("Chile", "Santiago"))]


@pytest.fixture
def bm25_folder(tmp_path):
    """A saved BM25 index over the gold passage of the ``questions`` fixture and four distractors."""
    from multihop.data.corpus import Corpus
    from multihop.retrievers import BM25Retriever

    folder = tmp_path / "bm25"
    BM25Retriever(Corpus([PARIS, *DISTRACTORS])).save(folder)
    return folder


@pytest.mark.parametrize("settings", [[], ["--set", "num_passages=2"]])
def test_the_textbook_dspy_rag_module_searches_the_retriever_given(user_package, paris_lm, questions, bm25_folder,
                                                                    settings):
    result = runner.invoke(app, ["eval", "--program", "mine.programs:ClassicRAG", "--retriever", str(bm25_folder),
                                 "--data", str(questions), "--out", "run", "--lm", "openai/x", *settings],
                           terminal_width=300)
    assert result.exit_code == 0, result.output
    row = next(iter(read_rows(user_package / "run" / "results.jsonl").values()))
    passages = 2 if settings else 3
    assert row["error"] is None and row["prediction"] == "Paris"
    assert len(row["passage_ids"]) == passages and row["passage_ids"][0] == PARIS.id  # dspy.Retrieve's, with ids
    assert row["metrics"]["recall@5"] == 1.0 and row["counts"]["retrieval_calls"] == 1
    trace = json.loads((user_package / "run" / "traces" / "q1.json").read_text())
    assert trace[0]["stage"] == "retrieve" and trace[0]["outputs"]["ids"] == row["passage_ids"]
    manifest = json.loads((user_package / "run" / RUN_MANIFEST).read_text())
    assert manifest["config"] == {"num_passages": passages}  # kept as no attribute: recorded from the call
    assert manifest["retriever"] is not None


def test_evaluate_takes_the_retriever_dspy_retrieve_searches(user_package, questions, bm25_folder, tmp_path):
    from mine.programs import ClassicRAG

    from multihop.data.loaders import load_dataset
    from multihop.retrievers import load_retriever

    dspy.configure(lm=scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"})[0])
    summary = multihop.evaluate(ClassicRAG(), load_dataset(questions), tmp_path / "run", progress=False,
                                retriever=load_retriever(bm25_folder))
    assert summary["errors"] == 0 and summary["em"] == 1.0 and summary["recall@5"] == 1.0
    row = next(iter(read_rows(tmp_path / "run" / "results.jsonl").values()))
    assert row["passage_ids"][0] == PARIS.id and dspy.settings.rm is None  # the run's alone


def test_a_plain_module_instance_is_saved_and_loaded_by_its_import_path(user_package, bm25_folder, tmp_path):
    from mine.programs import ClassicRAG

    from multihop.retrievers import load_retriever

    program = ClassicRAG(num_passages=2)  # a plain dspy.Module, built with no call multihop saw
    program.generate_answer.predict.demos = [dspy.Example(context=[], question="Capital of Italy?", reasoning="r",
                                                          answer="Rome")]
    folder = multihop.save(program, tmp_path / "saved")
    info = json.loads((folder / "manifest.json").read_text())
    assert info["import_path"] == "mine.programs:ClassicRAG" and info["config"] == {"num_passages": 3}
    assert info["unrecorded_settings"] == ["num_passages"]  # its default; the state keeps dspy.Retrieve's k
    sys.modules.pop("mine.programs", None)  # as in a fresh process
    loaded = multihop.load(folder)
    assert type(loaded).__name__ == "ClassicRAG" and loaded.retrieve.k == 2
    assert [demo["answer"] for demo in loaded.generate_answer.predict.demos] == ["Rome"]
    with dspy.context(lm=scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"})[0],
                      rm=load_retriever(bm25_folder)):
        prediction = loaded(question="Capital of France?")
    assert prediction.answer == "Paris" and prediction.counts["passage_ids"][0] == PARIS.id


def test_a_plain_module_that_cannot_be_loaded_again_is_refused_in_one_line(tmp_path):
    class Local(dspy.Module):
        def forward(self, question):
            return dspy.Prediction(answer="x")

    with pytest.raises(TypeError, match="load cannot import again") as refused:
        multihop.save(Local(), tmp_path / "saved")
    assert "\n" not in str(refused.value) and not (tmp_path / "saved").exists()


def test_a_compiled_textbook_module_searches_the_retriever_it_was_compiled_with(user_package, paris_lm, questions,
                                                                               bm25_folder):
    compiled = runner.invoke(app, ["compile", "--program", "mine.programs:ClassicRAG", "--optimizer", "labeled",
                                   "--retriever", str(bm25_folder), "--data", str(questions), "--out", "saved",
                                   "--lm", "openai/x"], terminal_width=300)
    assert compiled.exit_code == 0, compiled.output
    assert json.loads((user_package / "saved" / "manifest.json").read_text())["retriever"] == str(bm25_folder)
    result = runner.invoke(app, ["eval", "--load", "saved", "--data", str(questions), "--out", "run",
                                 "--lm", "openai/x"], terminal_width=300)
    assert result.exit_code == 0, result.output
    row = next(iter(read_rows(user_package / "run" / "results.jsonl").values()))
    assert row["error"] is None and row["passage_ids"][0] == PARIS.id and row["metrics"]["recall@5"] == 1.0
