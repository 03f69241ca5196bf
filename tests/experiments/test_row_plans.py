"""What each declared row of the papers' tables runs with (``multihop.experiments.row_plans``), planned without running:
no two rows of a table that run share an identity, whatever is given; a row runs only with the artifacts, student
and LMs its label names; rows of unmapped LMs run once, labelled with ours."""

import json

import pytest

from multihop.experiments.reproduce import (
    describe_tables,
    not_run,
    ours,
    paper_of,
    row_slug,
    select_tables,
    setting_ran,
    table_datasets,
)
from multihop.experiments.reproduced_tables import header_lines
from multihop.experiments.row_plans import RunSetup, plan_table, row_settings, waiting_state
from multihop.programs import PROGRAMS

TABLES = [(method.name, table) for method in PROGRAMS.declared("method") for table in method.tables]


def everything_given(table) -> RunSetup:
    """A setup in which every artifact, student and paper LM of ``table`` is given (each its own folder or spec)."""
    artifacts = {(artifact.name, dataset if artifact.per_dataset else None): f"/given/{artifact.name}-{dataset}"
                 for row in table.rows for artifact in (*row.needs, table.encoder) if artifact is not None
                 for dataset in table_datasets(table, None)}
    lms = {lm for row in table.rows for lm in (row.lm, row.stage_lms and row.stage_lms.paper_lm)} | {table.lm}
    students = {f"{row.program}{at}{lm}": f"/students/{row.program}{at}{lm}" for row in table.rows if row.stage_lms
                for at, lm in (("", ""), ("@", row.lm or table.lm))}
    return RunSetup(lm="ours", lm_for={lm: f"mapped/{lm}" for lm in lms if lm}, artifacts=artifacts,
                    students=students)


def identities(table, setup: RunSetup) -> list[tuple[str, list[str]]]:
    """For each dataset of ``table``, the identities of its rows that run (a row sharing a declared run counts once)."""
    return [(dataset, [plan.key() for plan in plan_table(table, dataset, setup)
                       if plan.identity is not None and not plan.shares])
            for dataset in table_datasets(table, None)]


@pytest.mark.parametrize("paper, table", TABLES, ids=[f"{paper}-{table.number}" for paper, table in TABLES])
@pytest.mark.parametrize("given", ["nothing", "everything", "artifacts and students, no LM mapped"])
def test_no_two_rows_of_a_table_that_run_here_share_an_identity(paper, table, given):
    setup = {"nothing": RunSetup(lm="ours"), "everything": everything_given(table)}.get(given)
    if setup is None:
        setup = RunSetup(lm="ours", artifacts=everything_given(table).artifacts,
                         students=everything_given(table).students)
    for dataset, keys in identities(table, setup):
        assert len(keys) == len(set(keys)), (dataset, [json.loads(key) for key in keys if keys.count(key) > 1])


def test_a_training_ablation_runs_only_on_its_own_encoder_and_each_row_on_a_different_one():
    table = select_tables(paper_of("CoopRAG"), ["5"])[0]
    assert all(plan.identity is None and "--build" in plan.skipped for plan in plan_table(table, "musique",
                                                                                          RunSetup(lm="ours")))
    planned = plan_table(table, "musique", everything_given(table))
    encoders = [plan.identity["encoder"] for plan in planned]
    assert len(set(encoders)) == 4 and all(encoder.startswith("/given/encoder") for encoder in encoders)
    assert planned[1].identity["encoder_switches"] == ["--no-alpha"]
    assert {plan.identity["pooling"] for plan in planned} == {"cls"}  # CoopRAG's own index pooling (Eq. 2)


def test_the_fine_tuning_ablations_run_different_stages_on_the_student():
    table = select_tables(paper_of("DualRAG"), ["4"])[0]
    setup = RunSetup(lm="ours", students=everything_given(table).students)
    planned = {plan.label: plan for plan in plan_table(table, "musique", setup)}
    assert set(planned["DualRAG-FT"].identity["stage_lms"]) == {"reason", "identify", "summarize"}
    assert set(planned["w/o R-FT"].identity["stage_lms"]) == {"identify", "summarize"}
    assert set(planned["w/o KS-FT"].identity["stage_lms"]) == {"reason", "identify"}
    assert planned["w/o FT"].identity["stage_lms"] == {}


def test_rows_of_unmapped_lms_run_once_labelled_with_ours_and_a_mapped_one_runs_on_its_lm():
    table = select_tables(paper_of("CoopRAG"), ["2"])[0]
    planned = plan_table(table, "musique", RunSetup(lm="ollama/mine"))
    running = [plan for plan in planned if plan.identity is not None]
    assert [plan.label for plan in running] == ["CoopRAG (ours: ollama/mine)"] and running[0].stand_in
    gemma = next(plan for plan in planned if plan.row.lm == "Gemma2-9B")
    assert "--lm-for 'Gemma2-9B=SPEC'" in gemma.skipped and "'CoopRAG (ours: ollama/mine)' runs" in gemma.skipped
    planned = plan_table(table, "musique", RunSetup(lm="ollama/mine", lm_for={"Gemma2-9B": "ollama/gemma2"}))
    running = {plan.label: plan for plan in planned if plan.identity is not None}
    assert running["CoopRAG (Gemma2-9B → ollama/gemma2)"].identity["lm"] == "ollama/gemma2"
    assert running["CoopRAG (ours: ollama/mine)"].identity["lm"] == "ollama/mine"


def test_a_row_of_another_lm_whose_configuration_a_row_runs_on_ours_names_that_row():
    table = select_tables(paper_of("HANRAG"), ["2"])[0]
    planned = {plan.label: plan for plan in plan_table(table, "musique", RunSetup(lm="x", students={"HANRAG": "s"}))}
    assert "row 'HANRAG' runs its configuration on your LM" in planned["HANRAG-Fair"].skipped
    assert not any(plan.stand_in for plan in planned.values())


def test_a_row_run_on_a_mapped_lm_wants_a_student_trained_for_that_lm():
    table = select_tables(paper_of("HANRAG"), ["2"])[0]
    setup = RunSetup(lm="x", students={"HANRAG": "s"}, lm_for={"FLAN-T5-XL (3B)": "flan"})
    fair = next(plan for plan in plan_table(table, "musique", setup) if plan.row.label == "HANRAG-Fair")
    assert "--student 'HANRAG@FLAN-T5-XL (3B)=DIR'" in fair.skipped
    setup = RunSetup(lm="x", students={"HANRAG": "s", "HANRAG@FLAN-T5-XL (3B)": "fair"},
                     lm_for={"FLAN-T5-XL (3B)": "flan"})
    fair = next(plan for plan in plan_table(table, "musique", setup) if plan.row.label == "HANRAG-Fair")
    assert fair.identity["lm"] == "flan" and set(fair.identity["stage_lms"].values()) == {"fair"}


def test_hanrags_steps_read_its_own_count_and_a_baselines_its_retrieval_calls():
    table = select_tables(paper_of("HANRAG"), ["2"])[0]
    assert ours({"steps": 1.5, "retrieval_calls": 3.0}, "steps", table) == 1.5
    assert ours({"retrieval_calls": 3.0}, "steps", table) == 3.0
    assert ours({"em": 0.25}, "em", table) == 0.25


def test_row_folders_keep_the_labels_letters_and_datasets_not_run_say_why():
    assert row_slug("w/o α_U, ω_U,D") == "w-o-α_U-ω_U-D"
    table = select_tables(paper_of("HANRAG"), ["2"])[0]
    assert not_run(table, ["musique"]) == {"hotpotqa": "left out (--datasets)", "2wiki": "left out (--datasets)",
                                           "compound": "no dev set of it here"}


def test_list_names_each_rows_state(plaid_built):
    described = describe_tables([paper_of("CIRAG")])
    states = {row["label"]: row["state"] for row in described[1]["rows"]}
    assert states["CIRAG"] == "runs once given"  # a student is given, never built
    assert states["w/o TD"] == "runs once built"  # its triple cache is built by --build
    described = describe_tables([paper_of("CoopRAG"), paper_of("DualRAG")])
    rows = {(info["paper"], info["table"], row["label"]): row for info in described for row in info["rows"]}
    colbert = rows["CoopRAG", "Table 12", "IRCoT + ColBERTv2"]
    assert colbert["state"] == "runs when given: --artifact colbert=DIR" and not colbert["runnable"]
    for table, label in (("Table 13", "IRCoT + ColBERTv2"), ("Table 10", "ColBERTv2"),
                         ("Table 9", "ColBERTv2 (without fine-tuning)")):
        assert rows["CoopRAG", table, label]["state"] == "runs when given: --artifact colbert=DIR"
    assert rows["CoopRAG", "Table 9", "ColBERTv2 (with fine-tuning)"]["state"] == "cannot run here"
    dualrag = rows["DualRAG", "Table 15", "DualRAG"]
    assert dualrag["state"] == "runs on a stand-in" and dualrag["substitutes"] == [STAND_IN]
    assert rows["DualRAG", "Table 15", "w/o rerank"]["state"] == "runs"


@pytest.fixture
def plaid_built(monkeypatch):
    """A first stage named ``plaid`` among those built here (its builder is never called by planning)."""
    from multihop.retrievers import CACHED_FIRST_STAGES

    monkeypatch.setitem(CACHED_FIRST_STAGES, "plaid", lambda *args, **kwargs: None)


def test_a_colbert_row_runs_when_its_checkpoint_is_given_on_a_plaid_index_of_it(plaid_built):
    table = select_tables(paper_of("CoopRAG"), ["12"])[0]
    row = table.row("IRCoT + ColBERTv2")
    plan = next(plan for plan in plan_table(table, "musique", RunSetup(lm="ours")) if plan.row is row)
    assert plan.identity is None and "--artifact colbert=DIR" in plan.skipped and "ColBERTv2" in plan.skipped
    assert waiting_state(table, row, "musique", RunSetup(lm="ours")) == "runs when given: --artifact colbert=DIR"
    given = RunSetup(lm="ours", artifacts={("colbert", None): "checkpoint"})
    plan = next(plan for plan in plan_table(table, "musique", given) if plan.row is row)
    assert plan.skipped is None and not plan.substitutes
    assert {key: plan.identity[key] for key in ("program", "first_stage", "encoder", "pooling")} == {
        "program": "IRCoT", "first_stage": "plaid", "encoder": "checkpoint", "pooling": None}
    assert "rerank" not in row_settings(row, "musique", given)  # IRCoT reads the PLAID top k itself


def test_a_row_whose_first_stage_is_not_built_here_does_not_run(monkeypatch):
    from multihop.retrievers import CACHED_FIRST_STAGES

    monkeypatch.delitem(CACHED_FIRST_STAGES, "plaid", raising=False)
    table = select_tables(paper_of("CoopRAG"), ["12"])[0]
    given = RunSetup(lm="ours", artifacts={("colbert", None): "checkpoint"})
    plan = next(plan for plan in plan_table(table, "musique", given) if plan.row.label == "IRCoT + ColBERTv2")
    assert plan.identity is None and "its first stage 'plaid' is not built here" in plan.skipped
    assert waiting_state(table, plan.row, "musique", given) == "cannot run here"


STAND_IN = "MaxSim stand-in for bge-reranker-v2-m3; the paper's runs when given: --artifact reranker=MODEL"


def test_dualrags_reranked_rows_run_maxsim_in_its_rerankers_place_until_it_is_given():
    table = select_tables(paper_of("DualRAG"), ["15"])[0]
    planned = {plan.label: plan for plan in plan_table(table, "musique", RunSetup(lm="ours"))}
    method, ablation = planned["DualRAG"], planned["w/o rerank"]
    assert method.identity["settings"]["rerank"] == "maxsim" and method.substitutes == (STAND_IN,)
    assert method.identity["artifacts"] == {"reranker": "not given: MaxSim stand-in for bge-reranker-v2-m3"}
    assert ablation.identity["settings"]["rerank"] is None and not ablation.substitutes  # reranks nothing
    given = RunSetup(lm="ours", artifacts={("reranker", None): "BAAI/bge-reranker-v2-m3"})
    planned = {plan.label: plan for plan in plan_table(table, "musique", given)}
    assert planned["DualRAG"].identity["settings"]["rerank"] == "cross-encoder:BAAI/bge-reranker-v2-m3"
    assert not planned["DualRAG"].substitutes and planned["w/o rerank"].identity["settings"]["rerank"] is None
    baseline = next(plan for plan in plan_table(select_tables(paper_of("DualRAG"), ["2"])[0], "musique", given)
                    if plan.label == "NativeRAG (ours: ours)")  # its rows' LMs unmapped: run once on ours
    assert baseline.identity["settings"]["rerank"] == "cross-encoder:BAAI/bge-reranker-v2-m3"  # §4.3's retrieval


def test_a_stand_in_is_named_in_the_tables_header_and_the_paper_setting_is_the_papers():
    table = select_tables(paper_of("DualRAG"), ["15"])[0]
    setup = RunSetup(lm="ours")
    plans = plan_table(table, "musique", setup)
    runs = {plan.key(): {"record": {}} for plan in plans if plan.identity is not None}
    ran = setting_ran(table, plans, runs, setup)
    assert ran["stand_ins"] == [STAND_IN] and ran["settings"]["rerank"] == ['"maxsim"', "null"]
    header = "\n".join(header_lines({"ours": ran, "lm": "ours", "datasets": {"musique": 1}, "judge": None,
                                     "paper_lm": table.lm, "settings": table.settings, "counts": {}, "derived": {},
                                     "notice": None, "not_run": {}, "columns": table.columns}))
    assert f"- ours, in place of the paper's model: {STAND_IN}" in header
    assert "rerank bge-reranker-v2-m3 → top 10" in header  # the paper's setting, labelled as the paper's
    given = RunSetup(lm="ours", artifacts={("reranker", None): "BAAI/bge-reranker-v2-m3"})
    plans = plan_table(table, "musique", given)
    ran = setting_ran(table, plans, {plan.key(): {"record": {}} for plan in plans if plan.identity}, given)
    assert ran["stand_ins"] == [] and '"cross-encoder:BAAI/bge-reranker-v2-m3"' in ran["settings"]["rerank"]
