"""One declaration per method: a toy seventh method declared inside this test — signature, program,
gold builder, ``Declaration(...)`` — is seen by ``eval`` (its first stage, ``--set``), ``compare`` (by default, its loop
budget, its paper's numbers), save/load, ``trajectories --gold``, ``distill --preset`` and the command line (its
sub-app), with no shared file touched; and a contract every registered program keeps."""

import json
from collections import Counter
from pathlib import Path

import dspy
import pytest
import typer
from typer.testing import CliRunner

import multihop
from multihop.cli import app as multihop_app
from multihop.data.corpus import Passage
from multihop.programs import PROGRAMS, Declaration, MultihopProgram, load, save, takes_retriever
from multihop.programs.gold_builders import GOLD_BUILDERS, register_gold_builder
from multihop.programs.papers import reported
from multihop.runtime.tracing import count

from helpers import XBOX_PASSAGES, StaticRetriever, TypedScript, declared_program, scripted_lm, tiny_causal_lm

runner = CliRunner()

# the toy method's offline step: ``multihop toyrag prepare`` (``Declaration(cli=__name__)`` names this module)
app = typer.Typer(help="ToyRAG's offline step.", no_args_is_help=True)


@app.command("prepare")
def prepare(out: Path = typer.Option(...)):
    """Write the toy's offline artefact."""
    out.write_text("prepared")


class ToyAnswer(dspy.Signature):
    """Answer the question from the passages in a few words."""

    passages: list[str] = dspy.InputField()
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


class ToyCheck(dspy.Signature):
    """Say whether the answer hedges."""

    question: str = dspy.InputField()
    answer: str = dspy.InputField()
    hedges: bool = dspy.OutputField()


@pytest.fixture
def toy():
    """ToyRAG declared as a method's package declares itself, and every registry restored afterwards."""

    class ToyRAG(MultihopProgram):
        """Retrieve, answer, and check the answer for hedging at most ``max_rounds`` times."""

        count_display = {"rounds": "mean"}

        def __init__(self, retriever: dspy.Module | None = None, k: int = 2, max_rounds: int = 2,
                     hedge_check: bool = True):
            super().__init__(retriever=retriever)
            self.k, self.max_rounds, self.hedge_check = k, max_rounds, hedge_check
            self.add_stages(answer=ToyAnswer, check=ToyCheck if hedge_check else None)

        def forward(self, question: str) -> dspy.Prediction:
            hits = self.search(question, k=self.k)
            answer = ""
            for _ in range(self.max_rounds):
                count("rounds")
                answer = self.run_stage(self.answer, {"answer": ""}, passages=hits.passages, question=question).answer
                if not self.hedge_check or not self.run_stage(self.check, {"hedges": False}, question=question,
                                                               answer=answer).hedges:
                    break
            return dspy.Prediction(answer=answer, passage_ids=list(hits.ids))

    @register_gold_builder("ToyRAG", "answer")
    def answer_target(program, example, context):
        return [({"passages": [f"{example.question} {example.answer}"], "question": example.question},
                 {"answer": example.answer})]

    Declaration(ToyRAG, papers=reported("Toy-LM", "toy paper, Table 1", "its own corpus", {"musique": {"em": 42.0}}),
           distill_preset={"epochs": 3, "lr": 1e-3}, loop_budget="max_rounds", cli=__name__, first_stage="bm25")
    yield ToyRAG
    PROGRAMS.remove("ToyRAG"), GOLD_BUILDERS.pop("ToyRAG")


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A MULTIHOP_DATA with a MuSiQue dev file of two questions and a train file of two others, and a MULTIHOP_HOME
    of the test's own."""
    root = tmp_path / "data"
    for split, offset in (("dev", 0), ("train", 2)):
        records = [{"id": f"q{offset + i}", "question": f"Which city is number {offset + i}?", "answers": ["Paris"],
                    "paragraphs": [{"title": "Paris", "text": f"Paris is city number {offset + i}.",
                                    "is_supporting": True},
                                   {"title": "Berlin", "text": "Berlin is a city.", "is_supporting": False}]}
                   for i in range(2)]
        (root / "musique" / split).mkdir(parents=True)
        name = "musique_qa_100.json" if split == "dev" else "musique_train.json"
        (root / "musique" / split / name).write_text(json.dumps(records))
    monkeypatch.setenv("MULTIHOP_DATA", str(root))
    monkeypatch.setenv("MULTIHOP_HOME", str(tmp_path / "home"))
    return root


@pytest.fixture
def paris(monkeypatch):
    """Every LM the command line builds answers "Paris" and never hedges (in the ChatAdapter's format, which a served
    LM gets)."""
    import multihop.lm.backends

    monkeypatch.setattr(multihop.lm.backends, "make_lm", lambda spec, **settings: scripted_lm(
        lambda prompt: {"answer": "Paris", "hedges": "false"}, name="paris")[0])


def test_a_declared_method_is_evaluated_through_its_first_stage_and_switches(toy, data, paris, tmp_path):
    result = runner.invoke(multihop_app, ["eval", "--program", "ToyRAG", "--data", "musique", "--set",
                                          "hedge_check=false", "--set", "max_rounds=3", "--out", str(tmp_path / "e"),
                                          "--lm", "openai/paris"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "e" / "results.jsonl").read_text().splitlines()]
    assert [row["prediction"] for row in rows] == ["Paris", "Paris"] and rows[0]["counts"]["rounds"] == 1
    assert rows[0]["counts"]["llm_calls"] == 1  # hedge_check=false: the check stage does not exist
    assert {path.name.split("-")[0] for path in (tmp_path / "home" / "indexes").glob("[!.]*")} == {"bm25"}  # declared
    unknown = runner.invoke(multihop_app, ["eval", "--program", "ToyRAG", "--data", "musique", "--set", "depth=2",
                                           "--out", str(tmp_path / "x")])
    assert unknown.exit_code == 2 and "ToyRAG has no switch depth; its switches: max_rounds, hedge_check" in " ".join(
        unknown.output.replace("│", "").split())


def test_compare_runs_a_declared_method_by_default_with_its_loop_budget_and_its_papers_numbers(toy, data,
                                                                                              tmp_path):
    assert PROGRAMS.compared_by_default() == ["CoopRAG", "DualRAG", "ComposeRAG", "HANRAG", "CIRAG", "NoRetrieval",
                                              "SingleStepRAG", "IRCoT", "FLARE", "MetaRAG", "ToyRAG"]
    # the papers' order, then declaration order
    assert PROGRAMS.declaration("ToyRAG").first_stage == "bm25"
    dspy.configure(lm=scripted_lm(lambda prompt: {"answer": "Paris", "hedges": "false"})[0])
    comparison = multihop.compare(tmp_path / "c", programs=["ToyRAG", "NoRetrieval"], datasets=["musique"],
                                  budget=multihop.Budget(k=1, max_iterations=5), first_stage="bm25", progress=False)
    assert comparison["programs"]["ToyRAG"]["budget"] == {"k": "k", "max_iterations": "max_rounds"}
    assert comparison["programs"]["ToyRAG"]["config"] == {"k": 1, "max_rounds": 5, "hedge_check": True}
    assert [(p["program"], p["dataset"], p["em"]) for p in comparison["papers"]] == [("ToyRAG", "musique", 0.42)]
    assert {row["program"]: row["em"] for row in comparison["rows"]} == {"ToyRAG": 1.0, "NoRetrieval": 1.0}


def test_the_five_methods_and_the_baselines_are_declared_apart_and_the_baselines_compared_are_those_two_papers_report():
    declared = {method.name: method for method in PROGRAMS.declared()}
    assert [method.name for method in PROGRAMS.declared("method")] == ["CoopRAG", "DualRAG", "ComposeRAG", "HANRAG",
                                                                       "CIRAG"]
    assert {method.name for method in PROGRAMS.declared("baseline")} == set(declared) - {
        "CoopRAG", "DualRAG", "ComposeRAG", "HANRAG", "CIRAG"}
    assert all(method.paper is not None for method in PROGRAMS.declared("method"))
    assert all(Path(PROGRAMS[name].__module__.replace(".", "/")).parts[:3] == ("multihop", "programs", "baselines")
               for name in (method.name for method in PROGRAMS.declared("baseline")))
    reports = Counter(name for method in PROGRAMS.declared() for name in method.paper_baselines)
    assert set(reports) <= set(declared), "a paper's baseline that is not a declared program"
    baselines = {method.name for method in PROGRAMS.declared("baseline")}
    assert {name for name in baselines if declared[name].compare} == {name for name in baselines if reports[name] >= 2}
    assert reports["IRCoT"] == 4 and reports["FLARE"] == reports["MetaRAG"] == 2  # seeds 000/001/003/004; 001/004
    assert PROGRAMS.reported_by("IRCoT") == ["CoopRAG", "DualRAG", "HANRAG", "CIRAG"]
    assert all(method.compare for method in PROGRAMS.declared("method"))


def test_an_abstract_base_is_no_program():
    from multihop.programs.baselines import RerankableBaseline

    assert "RerankableBaseline" not in PROGRAMS and issubclass(PROGRAMS["SingleStepRAG"], RerankableBaseline)


def test_a_declared_method_saves_loads_builds_gold_rows_and_has_its_preset_and_sub_app(toy, data, tmp_path):
    program = toy(retriever=StaticRetriever([Passage.make("Paris", "Paris is in France.")]), max_rounds=4)
    program.answer.demos = [dspy.Example(passages=["p"], question="q", answer="a")]
    save(program, tmp_path / "saved")
    loaded = load(tmp_path / "saved", retriever=program.retriever)
    assert type(loaded) is toy and loaded.config() == program.config() and len(loaded.answer.demos) == 1

    gold = runner.invoke(multihop_app, ["trajectories", "--gold", "--program", "ToyRAG", "--data", "musique",
                                        "--out", str(tmp_path / "rows"), "--lm", "openai/student"])
    assert gold.exit_code == 0, gold.output
    rows = [json.loads(line) for line in (tmp_path / "rows" / "answer.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and rows[0]["completion"].count("Paris")

    base = tiny_causal_lm(tmp_path / "tiny", [row["completion"] for row in rows] * 20)
    distilled = runner.invoke(multihop_app, ["distill", str(tmp_path / "rows" / "answer.jsonl"), "--preset",
                                             "toyrag", "--base", base, "--out", str(tmp_path / "student")])
    assert distilled.exit_code == 0, distilled.output
    trained = json.loads((tmp_path / "student" / "distill.json").read_text())
    assert (trained["config"]["epochs"], trained["config"]["lr"]) == (3, 1e-3)  # the toy's declared preset
    described = " ".join(runner.invoke(multihop_app, ["distill", "--help"]).output.replace("│", "").split())
    assert "toyrag (epochs=3, lr=0.001)" in described

    assert "toyrag" in runner.invoke(multihop_app, ["--help"]).output
    prepared = runner.invoke(multihop_app, ["toyrag", "prepare", "--out", str(tmp_path / "artefact")])
    assert prepared.exit_code == 0 and (tmp_path / "artefact").read_text() == "prepared"


def test_a_declaration_names_a_loop_budget_the_program_has():
    class Unbudgeted(MultihopProgram):
        def __init__(self, k: int = 1):
            super().__init__()
            self.k = k

    with pytest.raises(TypeError, match="loop budget 'max_steps' is none of its settings"):
        Declaration(Unbudgeted, loop_budget="max_steps")
    assert "Unbudgeted" not in {method.name for method in PROGRAMS.declared()}
    assert PROGRAMS.declaration("Unbudgeted").compare is False and PROGRAMS.declaration("Unbudgeted").kind == "custom"
    PROGRAMS.remove("Unbudgeted")


# --- the contract every registered program keeps -----------------------------------------------------------------

DECLARED = sorted(method.name for method in PROGRAMS.declared())


@pytest.mark.parametrize("name", DECLARED)
def test_config_survives_json_and_every_switch_is_accepted_by_set(name):
    from multihop.cli.programs import build_program

    config = PROGRAMS[name]().config()
    assert json.loads(json.dumps(config)) == config
    pairs = [f"{key}={json.dumps(value)}" for key, value in config.items() if key != "k"]
    program, _ = build_program(name, None, None, None, None, "mpnet", pairs, index=False)
    assert program.config() == config


@pytest.mark.parametrize("name", DECLARED)
def test_the_class_docstring_documents_every_switch_and_an_example(name):
    import inspect

    doc = inspect.getdoc(PROGRAMS[name])
    assert "Example:" in doc and ">>>" in doc.split("Example:", 1)[1]
    settings = PROGRAMS[name].settings()
    if settings:
        args = doc.split("Args:", 1)[1].split("Example:", 1)[0]
        documented = [line.strip().split(":", 1)[0] for line in args.splitlines()
                      if line.startswith("    ") and not line.startswith("        ") and ":" in line]
        assert documented == ([*(["retriever"] if takes_retriever(PROGRAMS[name]) else []), *settings]), documented


@pytest.mark.parametrize("name", DECLARED)
def test_save_and_load_round_trip(name, tmp_path):
    program = declared_program(name)
    save(program, tmp_path / name)
    loaded = load(tmp_path / name, retriever=getattr(program, "retriever", None))
    assert type(loaded) is type(program) and loaded.config() == program.config()
    assert [n for n, _ in loaded.named_predictors()] == [n for n, _ in program.named_predictors()]


NO_STAGE_SWITCH = {"NoRetrieval", "SingleStepRAG", "IterRetGen",  # one stage, always on
                   "AdaptiveRAG"}  # its route picks strategies (the paper's rows), no switch removes one


@pytest.mark.parametrize("name", DECLARED)
def test_a_switch_that_turns_a_stage_off_removes_it_from_named_predictors(name):
    cls = PROGRAMS[name]
    defaults = cls().config()
    stages = set(cls().stage_names())
    shrunk = []
    for switch, value in defaults.items():
        if value is not True:
            continue
        try:
            off = set(cls(**{switch: False}).stage_names())
        except ValueError:
            continue  # a switch another one needs (ComposeRAG's decomposition for its reflections)
        assert off <= stages, f"{name}({switch}=False) adds stages {off - stages}"
        shrunk += [switch] if off < stages else []
    if "granularities" in defaults:  # CIRAG's stage switch is a list of levels (Table 3)
        kept = set(cls(granularities=defaults["granularities"][:1]).stage_names())
        shrunk += ["granularities"] if kept < stages else []
    assert bool(shrunk) == (name not in NO_STAGE_SWITCH), shrunk


@pytest.mark.parametrize("name", DECLARED)
def test_a_scripted_run_yields_an_answer_passage_ids_and_the_declared_counts(name):
    program = declared_program(name)
    script = TypedScript(program)
    counted = set()
    with dspy.context(lm=script.lm):
        for question in ["Who founded the company that makes the Xbox?", "Where was Bill Gates born?",
                         "When was Microsoft founded?", "Which console does Microsoft make?"]:
            prediction = program(question=question)
            assert isinstance(prediction.answer, str) and isinstance(prediction.passage_ids, list)
            assert set(prediction.passage_ids) <= {p.id for p in XBOX_PASSAGES}
            assert prediction.counts["llm_calls"] == sum(r["kind"] == "lm" for r in prediction.stage_trace)
            counted |= set(prediction.counts)
    for declared in program.count_display:  # each declared count, or its family (route.<route>), is counted
        family = declared.split(".")[0]
        assert declared in counted or any(key.split(".")[0] == family for key in counted), declared
    assert {f"{stage}.fallback" for stage in set(script.seen)} <= counted  # run_stage counts every stage it ran


@pytest.mark.parametrize("name", DECLARED)
def test_evaluation_reuses_the_programs_own_trace_with_the_same_counts(name, monkeypatch):
    from multihop.evaluation.runner import run_question
    from multihop.runtime import tracing

    program = declared_program(name)
    opened = []
    real = tracing.Trace.__init__
    monkeypatch.setattr(tracing.Trace, "__init__", lambda self, root=None: (opened.append(root), real(self, root))[1])
    example = dspy.Example(id="q", question="Who founded the company that makes the Xbox?", answers=["Bill Gates"],
                           answer="Bill Gates").with_inputs("question")
    with dspy.context(lm=TypedScript(program).lm):
        row, trace = run_question(program, example)
        assert len(opened) == 1 and row["error"] is None  # one trace for the question: the program's own
        with tracing.record_trace(program) as outer:  # what evaluation recorded around the program before
            direct = program(question=example.question)
    assert row["counts"] == {key: value for key, value in outer.counts().items() if key != "passage_ids"}
    assert outer.counts() == direct.counts
    assert sorted(r["stage"] for r in trace) == sorted(r["stage"] for r in direct.stage_trace)  # HANRAG fans out


def test_multihop_programs_lists_the_methods_then_the_baselines_with_paper_stages_and_switches():
    listed = json.loads(runner.invoke(multihop_app, ["programs", "--json"]).output)
    assert [(row["name"], row["kind"]) for row in listed] == [
        *((name, "method") for name in ("CoopRAG", "DualRAG", "ComposeRAG", "HANRAG", "CIRAG")),
        *((name, "baseline") for name in ("NoRetrieval", "SingleStepRAG", "IRCoT", "IterRetGen", "FLARE", "SelfAsk",
                                          "AdaptiveRAG", "MetaRAG", "GenGround"))]
    ircot = next(row for row in listed if row["name"] == "IRCoT")
    assert ircot["paper"] == "Trivedi et al., ACL 2023" and ircot["reported_by"] == ["CoopRAG", "DualRAG", "HANRAG",
                                                                                       "CIRAG"]
    assert ircot["stages"] == ["reason", "answer"] and ircot["switches"]["max_paragraphs"] == 15
    baselines = json.loads(runner.invoke(multihop_app, ["programs", "--kind", "baseline", "--json"]).output)
    assert {row["kind"] for row in baselines} == {"baseline"} and len(baselines) == 9
    shown = runner.invoke(multihop_app, ["programs"], terminal_width=200).output
    assert all(row["name"] in shown for row in listed) and "Ko et al., 2025" in shown


def test_cite_prints_the_bibtex_of_a_programs_paper_and_of_every_paper_without_one():
    ircot = runner.invoke(multihop_app, ["cite", "ircot"])
    assert ircot.exit_code == 0 and ircot.output.startswith("@inproceedings{trivedi2023interleaving,")
    assert "author = {Harsh Trivedi and Niranjan Balasubramanian and Tushar Khot and Ashish Sabharwal}" in ircot.output
    every = runner.invoke(multihop_app, ["cite"]).output
    assert every.count("\n@") + 1 == sum(method.paper is not None for method in PROGRAMS.declared()) == 12
    assert "@misc{ko2025cooperative," in every  # a preprint
    own = runner.invoke(multihop_app, ["cite", "NoRetrieval"])
    assert own.exit_code == 2 and "cite the papers that report it (DualRAG, HANRAG)" in " ".join(own.output.split())
