"""The papers' results tables declared as data (``Declaration(tables=...)``, each method's ``tables.py``): every row
names a registered program and settings it has, a runnable row's program is built with its settings, every table holds
some of its paper's numbers in declared columns, and each method declares at least the tables its benchmark ran."""

import inspect

import pytest

from multihop.programs import PROGRAMS, takes_retriever
from multihop.programs.papers import PaperTable, StageLMs, TableRow, cells, grid
from multihop.retrievers import CACHED_FIRST_STAGES

EXPECTED = {  # the tables each method must declare, by number
    "CoopRAG": {"Table 2", "Table 3", "Table 5", "Table 7", "Table 12", "Table 13"},
    "DualRAG": {"Table 2", "Table 3", "Table 4"},
    "ComposeRAG": {"Table 1", "Table 3", "Table 4", "Table 5", "Table 6"},
    "HANRAG": {"Table 1", "Table 2"},
    "CIRAG": {"Table 1", "Table 2", "Table 3"},
}
TABLES = [(method.name, table) for method in PROGRAMS.declared("method") for table in method.tables]
ROWS = [(f"{name} {table.number}: {row.label} ({row.lm or table.lm})", table, row)
        for name, table in TABLES for row in table.rows]


def test_each_method_declares_its_papers_tables():
    declared = {method.name: {table.number for table in method.tables} for method in PROGRAMS.declared("method")}
    for name, numbers in EXPECTED.items():
        assert numbers <= declared[name], f"{name} lacks {sorted(numbers - declared[name])}"
    assert not [method.name for method in PROGRAMS.declared("baseline") if method.tables]


@pytest.mark.parametrize(("name", "table"), TABLES, ids=[f"{name} {table.number}" for name, table in TABLES])
def test_a_table_holds_paper_numbers_in_its_declared_columns(name, table):
    assert table.numbers() > 0
    assert table.first_stage in CACHED_FIRST_STAGES
    for row in table.rows:
        assert set(row.numbers) <= set(table.columns)
        assert all(isinstance(value, float | int) for value in row.numbers.values())


@pytest.mark.parametrize(("label", "table", "row"), ROWS, ids=[label for label, _, _ in ROWS])
def test_a_row_names_a_registered_program_and_its_settings(label, table, row):
    assert row.program in PROGRAMS, f"{label}: no program {row.program}"
    cls = PROGRAMS[row.program]
    assert set(row.settings) <= set(cls.settings()), f"{label}: {sorted(set(row.settings) - set(cls.settings()))}"
    assert row.first_stage is None or row.first_stage in CACHED_FIRST_STAGES
    if row.stage_lms is not None:  # stages of the program in the row's setting or its default one
        stages = {stage.split(".")[0] for program in (_built(row), _built(TableRow(row.label, row.program)))
                  for stage in program.stage_names()}
        assert set(row.stage_lms.stages) <= stages, f"{label}: {sorted(set(row.stage_lms.stages) - stages)}"


@pytest.mark.parametrize(("label", "table", "row"), [r for r in ROWS if r[2].runnable],
                         ids=[label for label, _, row in ROWS if row.runnable])
def test_a_runnable_row_builds_its_program(label, table, row):
    program = _built(row)
    for setting, value in row.settings.items():
        assert getattr(program, setting) == (list(value) if isinstance(getattr(program, setting), list) else value)


def _built(row: TableRow):
    cls = PROGRAMS[row.program]
    return cls(retriever=None, **row.settings) if takes_retriever(cls) else cls(**row.settings)


def test_each_papers_method_ablation_and_baseline_rows_are_declared_with_that_papers_settings():
    """The rows each paper reports that a program here runs — its method, its ablations and its baselines under the
    settings that paper ran them with — are rows of its declared tables (program and settings)."""
    declared = {(name, row.program, tuple(sorted(row.settings.items())))
                for name, table in TABLES for row in table.rows}
    ran = {
        "CoopRAG": [("SingleStepRAG", {"k": 5, "n": 20, "rerank": "rala-eq4"}), ("CoopRAG", {}),
                    ("CoopRAG", {"unified": True}), ("CoopRAG", {"key_extract_rounds": 3}),
                    ("CoopRAG", {"uncertainty_mask": False}), ("CoopRAG", {"unrolling": False}),
                    ("IRCoT", {"k": 5, "max_steps": 8, "max_paragraphs": 15, "n": 20, "rerank": "rala-eq4"})],
        "DualRAG": [("SingleStepRAG", {"k": 10, "n": 50, "rerank": "maxsim"}), ("SingleStepRAG", {"k": 10}),
                    ("DualRAG", {"k": 10}), ("DualRAG", {"k": 10, "reasoner": False}),
                    ("DualRAG", {"k": 10, "reasoner": False, "entity_identifier": False}),
                    ("DualRAG", {"k": 10, "outline_structure": False}), ("DualRAG", {"k": 10, "rerank": None}),
                    ("DualRAG", {"k": 10, "max_iterations": 2}), ("NoRetrieval", {}),
                    ("IRCoT", {"k": 10, "n": 50, "rerank": "maxsim", "max_steps": 5}),
                    ("FLARE", {"k": 10, "n": 50, "rerank": "maxsim", "max_sentences": 5}),
                    ("MetaRAG", {"k": 10, "n": 50, "rerank": "maxsim", "max_iterations": 5}),
                    ("GenGround", {"k": 10, "n": 50, "rerank": "maxsim", "max_iterations": 5})],
        "ComposeRAG": [("ComposeRAG", {"simple_qa": False, "max_reflections": 0, "retrieval_decision": False,
                                       "decomposition": False, "passage_reranking": False,
                                       "answer_verification": False, "query_rewriting": False}),
                       ("ComposeRAG", {"simple_qa": True, "max_reflections": 0, "retrieval_decision": False}),
                       ("ComposeRAG", {"simple_qa": False, "max_reflections": 0, "retrieval_decision": True}),
                       ("ComposeRAG", {"max_reflections": 0}), ("ComposeRAG", {"max_reflections": 3}),
                       ("SelfAsk", {"k": 10})],
        "HANRAG": [("NoRetrieval", {}), ("SingleStepRAG", {"k": 5}), ("HANRAG", {"k": 5}),
                   ("HANRAG", {"k": 5, "refiner": False}), ("HANRAG", {"k": 5, "route": "oracle"}),
                   ("IRCoT", {"k": 5, "max_steps": 8, "max_paragraphs": 15}),
                   ("AdaptiveRAG", {"k": 5, "single_step_k": 5}),
                   ("AdaptiveRAG", {"k": 5, "single_step_k": 5, "route": "oracle"})],
        "CIRAG": [("SingleStepRAG", {"k": 10}), ("CIRAG", {"k": 10}), ("CIRAG", {"k": 10, "reranker": False}),
                  ("CIRAG", {"k": 10, "granularities": ("triple",)}), ("CIRAG", {"k": 10, "max_iterations": 2}),
                  ("CIRAG", {"k": 10, "n_triples": 50}), ("IRCoT", {"k": 10, "max_steps": 4}),
                  ("FLARE", {"k": 10, "max_sentences": 4}), ("MetaRAG", {"k": 10, "max_iterations": 4}),
                  ("DualRAG", {"k": 10, "max_iterations": 4, "rerank": None})],
    }
    missing = [(name, program, settings) for name, rows in ran.items() for program, settings in rows
               if (name, program, tuple(sorted(settings.items()))) not in declared]
    assert not missing, missing


def test_a_table_running_a_method_without_its_own_reranker_says_so_in_its_notes_and_on_the_program_page():
    from multihop.programs.cirag import program as cirag

    unranked = [(method.name, table) for method in PROGRAMS.declared("method") if method.name != "DualRAG"
                for table in method.tables
                if any(row.program == "DualRAG" and row.settings.get("rerank", "") is None for row in table.rows)]
    assert unranked  # CIRAG's tables run DualRAG on the first stage's top 10
    assert all("without DualRAG's reranker" in table.notes for _, table in unranked), unranked
    assert "DualRAG" in cirag.__doc__ and "without its reranker" in " ".join(cirag.__doc__.split())


def test_a_row_refuses_percentages_and_a_table_refuses_undeclared_cells():
    columns = grid(("musique",), ("em", "steps"))
    assert cells(columns, 52.3, 2.45) == {("musique", "em"): pytest.approx(0.523), ("musique", "steps"): 2.45}
    assert cells(columns, 0.523, None, fractions=True) == {("musique", "em"): 0.523}
    with pytest.raises(ValueError, match="no fraction"):
        TableRow("x", "CoopRAG", numbers={("musique", "em"): 52.3})
    with pytest.raises(ValueError, match="name no column"):
        PaperTable("Table 9", "t", columns, (TableRow("x", "CoopRAG", numbers={("hotpotqa", "em"): 0.5}),))
    with pytest.raises(ValueError, match="declared twice"):
        PaperTable("Table 9", "t", columns, (TableRow("x", "CoopRAG"), TableRow("x", "CoopRAG")))
    with pytest.raises(ValueError, match="why_not"):
        TableRow("x", "CoopRAG", runnable=False)
    with pytest.raises(ValueError, match="role"):
        StageLMs("teacher", ("answer",))


def test_the_papers_module_stays_in_its_layer():
    import multihop.programs.papers as papers

    assert "import multihop" not in inspect.getsource(papers)
