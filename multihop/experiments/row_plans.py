"""What each declared row of a paper's table runs with here, before anything runs (``multihop reproduce``): the LM
each of its stages runs on, its artifacts (:class:`~multihop.programs.papers.Artifact`), its student and the stages
that student serves, its first stage, encoder and pooling — together the row's *identity* — or why it does not run.

The rules:

- A row runs on the LM its paper LM is mapped to (``--lm-for "Gemma2-9B=SPEC"``), else on the run's LM. A row whose
  LM is its own (rows of several LMs in one table: ``TableRow.lm``) and not mapped does not run under the paper's LM's
  name; the rows of one configuration among them run once on the run's LM, as one row labelled with that LM (a
  *stand-in*, which has no paper number), unless a row of the table already runs that configuration.
- A row that needs an artifact runs only once it is given or built; it shows the paper's number alone with the
  command that makes it and the option that gives it. An encoder artifact (or the table's own encoder, where given) is
  the index's encoder (a ColBERT checkpoint: the row's PLAID first stage's). A model the paper used that the user
  supplies (:attr:`~multihop.programs.papers.Artifact.model`) is such an artifact too, given with ``--artifact``; one
  that names a stand-in (DualRAG's bge-reranker-v2-m3: MaxSim) does not stop its row: the row runs on the stand-in
  until the model is given, and its plan (:attr:`PlannedRow.substitutes`), its run's record and its table's header say
  "MaxSim stand-in for bge-reranker-v2-m3", never the paper's model.
- A row whose first stage is not built here (no :data:`~multihop.retrievers.CACHED_FIRST_STAGES` of its name) does
  not run.
- A row that runs stages on a student needs its program's student (one trained for its paper LM where that LM is
  mapped: a student stands beside the LM it was trained with); it runs on it exactly the stages the row names. Stages
  on a stronger LM run where that LM is mapped.
- Two rows of a table that would run the same identity run once: declared (``TableRow.same_as``), the run is shown in
  both places; otherwise the later row shows the paper's number alone, naming the row that runs it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from multihop.programs import PROGRAMS, takes_retriever
from multihop.programs.papers import ARTIFACT_KINDS, Artifact, PaperTable, TableRow
from multihop.retrievers import CACHED_FIRST_STAGES, RERANKERS


@dataclass(frozen=True)
class RunSetup:
    """What the user gave a reproduction: the run's LM (its model string), the paper LMs mapped to theirs
    (``lm_for``: paper LM → model string), the artifacts given or built (``(name, dataset)`` → folder; dataset None
    for an artifact made once for the paper), the students (a folder or a served spec) by program, or by
    ``PROGRAM@PAPER_LM`` for the rows of that paper LM (:func:`student_key`), the stock encoder, and the first stage
    of the tables' rows where the user overrides it."""

    lm: str
    lm_for: Mapping[str, str] = field(default_factory=dict)
    artifacts: Mapping[tuple[str, str | None], Path] = field(default_factory=dict)
    students: Mapping[str, str] = field(default_factory=dict)
    encoder: str = "mpnet"
    first_stage: str | None = None

    def artifact(self, artifact: Artifact, dataset: str) -> Path | None:
        """The folder of ``artifact`` for ``dataset`` (None: neither given nor built)."""
        return self.artifacts.get((artifact.name, dataset if artifact.per_dataset else None))


@dataclass(frozen=True)
class PlannedRow:
    """One row of a table on one dataset as it will run: ``label`` as shown (a stand-in's names our LM), the
    ``identity`` that tells its run from every other row's, and ``skipped``, why it shows the paper's number alone
    (None: it runs); ``shares`` the label of the row whose run it shows; ``substitutes`` what it runs in place of a
    model the paper used and the user did not give ("MaxSim stand-in for bge-reranker-v2-m3; ...")."""

    table: PaperTable
    row: TableRow
    dataset: str
    label: str
    lm: str
    identity: dict | None = None
    skipped: str | None = None
    stand_in: bool = False
    shares: str | None = None
    substitutes: tuple[str, ...] = ()

    def key(self) -> str:
        """The identity as one string (the key of its run's results)."""
        return json.dumps(self.identity, sort_keys=True, default=str)


def row_settings(row: TableRow, dataset: str, setup: RunSetup) -> dict:
    """The settings ``row``'s program is built with: the row's, and each artifact it has that a setting takes (a
    classifier's folder, a triple cache's, oracle labels', a reranker model as ``cross-encoder:MODEL``), or the
    stand-in of one not given."""
    settings = dict(row.settings)
    for artifact in row.needs:
        folder, setting = setup.artifact(artifact, dataset), ARTIFACT_KINDS[artifact.kind]
        if setting is not None and folder is not None:
            settings[setting] = artifact.setting_value(folder)
        elif setting is not None and artifact.stand_in is not None:
            settings[setting] = artifact.stand_in
    return settings


def stand_in_name(artifact: Artifact) -> str:
    """How a stand-in is called: its reranker's class name (``MaxSim``), else its value."""
    return getattr(RERANKERS.get(artifact.stand_in), "__name__", artifact.stand_in)


def substitutes(row: TableRow, dataset: str, setup: RunSetup) -> tuple[str, ...]:
    """What ``row`` runs in place of the models the paper used that were not given, each with the option that gives
    the paper's ("MaxSim stand-in for bge-reranker-v2-m3; the paper's runs when given: --artifact reranker=MODEL")."""
    return tuple(f"{stand_in_name(artifact)} stand-in for {artifact.model}; the paper's runs when given: "
                 f"{artifact.option(dataset if artifact.per_dataset else None)}"
                 for artifact in row.needs
                 if artifact.stand_in is not None and setup.artifact(artifact, dataset) is None)


def absent(row: TableRow, dataset: str, setup: RunSetup) -> list[Artifact]:
    """The artifacts ``row`` needs that were neither given nor built and that it has no stand-in for."""
    return [artifact for artifact in row.needs
            if setup.artifact(artifact, dataset) is None and artifact.stand_in is None]


def row_encoder(table: PaperTable, row: TableRow, dataset: str, setup: RunSetup) -> tuple[str, Artifact | None]:
    """The encoder of ``row``'s dense index: its own encoder artifact's folder, else the table's encoder's where
    given, else the stock encoder; and the artifact it is (None: stock)."""
    own = next((artifact for artifact in row.needs if artifact.kind == "encoder"), None)
    for artifact in (own, table.encoder):
        if artifact is not None and setup.artifact(artifact, dataset) is not None:
            return str(setup.artifact(artifact, dataset)), artifact
    return setup.encoder, None


def first_stage(table: PaperTable, row: TableRow, setup: RunSetup) -> str:
    """The first stage ``row`` reads: its own where it has one (a row's label names it), else the user's override,
    else the table's."""
    return row.first_stage or setup.first_stage or table.first_stage


def is_own_lm(table: PaperTable, row: TableRow) -> bool:
    """Whether ``row`` names an LM of its own, other than its table's (a table of rows of several LMs)."""
    return row.lm is not None and row.lm != table.lm


def student_key(table: PaperTable, row: TableRow, setup: RunSetup) -> str | None:
    """The key of the student that serves ``row``'s stages (None: none given): one given for its program and paper LM
    (``HANRAG@FLAN-T5-XL (3B)``), else, for a row that runs on the run's LM (its paper LM not mapped), one given for
    its program — a student is trained on the LM it stands beside, so a row run on a mapped LM wants its own."""
    paper_lm = row.lm or table.lm
    if paper_lm and f"{row.program}@{paper_lm}" in setup.students:
        return f"{row.program}@{paper_lm}"
    return row.program if row.program in setup.students and paper_lm not in setup.lm_for else None


def missing(table: PaperTable, row: TableRow, dataset: str, setup: RunSetup) -> str | None:
    """Why ``row`` cannot run yet with what was given (None: it can): an artifact it needs, a student, a stronger LM
    not mapped, or a program not here."""
    if not row.runnable:
        return row.why_not
    if row.program not in PROGRAMS:
        return f"{row.program} is no program here"
    stage = first_stage(table, row, setup)
    if stage not in CACHED_FIRST_STAGES:
        return f"its first stage {stage!r} is not built here ({', '.join(CACHED_FIRST_STAGES)} are)"
    reasons = [f"needs {artifact.name}{f' ({dataset})' if artifact.per_dataset else ''}"
               f"{f' (the paper’s {artifact.model}, which you supply)' if artifact.model else ''}: make it with "
               f"`{artifact.make}`{' or --build' if artifact.build else ''}, then "
               f"{artifact.option(dataset if artifact.per_dataset else None)}"
               for artifact in absent(row, dataset, setup)]
    stages = row.stage_lms
    if stages is not None and stages.role == "student" and student_key(table, row, setup) is None:
        paper = f" ({stages.paper_lm} in the paper)" if stages.paper_lm else ""
        paper_lm = row.lm or table.lm
        which = f"'{row.program}@{paper_lm}=DIR' (one trained for that LM, which you mapped)" \
            if paper_lm in setup.lm_for else f"{row.program}=DIR"
        reasons.append(f"runs {', '.join(stages.stages)} on a student{paper}: give one with --student {which}")
    if stages is not None and stages.role == "stronger" and stages.paper_lm not in setup.lm_for:
        reasons.append(f"runs {', '.join(stages.stages)} on a stronger LM ({stages.paper_lm} in the paper): map it "
                       f"with --lm-for '{stages.paper_lm}=SPEC'")
    return "; ".join(reasons) or None


def waiting_state(table: PaperTable, row: TableRow, dataset: str, setup: RunSetup) -> str:
    """How a row that does not run with what was given could: ``runs once built`` (every artifact it lacks has a
    builder, and it lacks nothing else), ``runs when given: --artifact NAME=DIR`` (it lacks only artifacts the user
    makes or supplies: a model the paper used, a classifier), ``runs once given`` (a student or an LM mapping, with or
    without such an artifact), or ``cannot run here`` (not rebuilt here, its first stage not built here, or the same
    run as another row)."""
    if not row.runnable or row.program not in PROGRAMS or first_stage(table, row, setup) not in CACHED_FIRST_STAGES:
        return "cannot run here"
    lacking = absent(row, dataset, setup)
    stages = row.stage_lms
    other_lm = stages is not None and (student_key(table, row, setup) is None if stages.role == "student"
                                       else stages.paper_lm not in setup.lm_for)
    own_lm = is_own_lm(table, row) and (row.lm or table.lm) not in setup.lm_for
    if lacking and not other_lm and all(artifact.build is not None for artifact in lacking):
        return "runs once built"
    if lacking and not other_lm:  # a row of an unmapped LM of its own runs on yours once given, as a stand-in
        options = [artifact.option(dataset if artifact.per_dataset else None)
                   for artifact in lacking if artifact.build is None]
        return "runs when given: " + " ".join(options + ["--build"] * any(artifact.build for artifact in lacking))
    return "runs once given" if lacking or other_lm or own_lm else "cannot run here"


def identity(table: PaperTable, row: TableRow, dataset: str, setup: RunSetup, lm: str) -> dict:
    """Everything ``row`` runs with on ``dataset`` (the module docstring): two rows with the same identity are one
    run."""
    settings = {**PROGRAMS[row.program].defaults(), **row_settings(row, dataset, setup)}
    stages = row.stage_lms
    stage_lms = {}
    if stages is not None:
        other = setup.students[student_key(table, row, setup)] if stages.role == "student" \
            else setup.lm_for[stages.paper_lm]
        stage_lms = {stage: str(other) for stage in stages.stages}
    found = {"program": row.program, "settings": settings, "lm": lm, "stage_lms": stage_lms,
             "artifacts": {artifact.name: str(setup.artifact(artifact, dataset)) if setup.artifact(artifact, dataset)
                           else f"not given: {stand_in_name(artifact)} stand-in for {artifact.model}"
                           for artifact in row.needs}}
    if takes_retriever(PROGRAMS[row.program]):
        stage = first_stage(table, row, setup)
        encoder, artifact = row_encoder(table, row, dataset, setup)
        found.update(first_stage=stage, encoder=encoder, encoder_switches=list(artifact.switches) if artifact else None,
                     pooling=(row.pooling or PROGRAMS[row.program].index_pooling) if stage == "dense" else None)
    return found


def plan_table(table: PaperTable, dataset: str, setup: RunSetup) -> list[PlannedRow]:
    """Every declared row of ``table`` on ``dataset`` as it runs here (or why not), then the stand-ins of the rows of
    unmapped LMs of their own (the module docstring), in the table's order; every identity runs once."""
    planned: list[PlannedRow] = []
    stand_ins: dict[int, PlannedRow] = {}  # by the id of the unmapped row it stands in for
    for row in table.rows:
        paper_lm = row.lm or table.lm
        lm = setup.lm_for.get(paper_lm, setup.lm) if paper_lm else setup.lm
        reason = missing(table, row, dataset, setup)
        if reason is None and is_own_lm(table, row) and paper_lm not in setup.lm_for:
            stand_ins[id(row)] = PlannedRow(table, row, dataset, f"{row.label} (ours: {setup.lm})", setup.lm,
                                            identity(table, row, dataset, setup, setup.lm), stand_in=True,
                                            substitutes=substitutes(row, dataset, setup))
            reason = f"its LM ({paper_lm}) is not mapped to one of yours: --lm-for '{paper_lm}=SPEC'"
        label = row.label + (f" ({paper_lm} → {lm})" if paper_lm in setup.lm_for else "")
        found = None if reason is not None else identity(table, row, dataset, setup, lm)
        planned.append(PlannedRow(table, row, dataset, label, lm, found, skipped=reason,
                                  substitutes=substitutes(row, dataset, setup)))
    planned, runs = run_once([*planned, *stand_ins.values()])
    return [PlannedRow(**{**plan.__dict__, "skipped": f"{plan.skipped}; row {runs[stand_ins[id(plan.row)].key()]!r} "
                                                      "runs its configuration on your LM"})
            if id(plan.row) in stand_ins and not plan.stand_in else plan for plan in planned]


def run_once(planned: list[PlannedRow]) -> tuple[list[PlannedRow], dict[str, str]]:
    """``planned`` with every identity run once, and the label of the row that runs each identity: a row declared
    the same run as an earlier one shares its run; another declared row whose identity an earlier row runs shows the
    paper's number alone, naming that row; such a stand-in is dropped."""
    runs: dict[str, PlannedRow] = {}
    out = []
    for plan in planned:
        if plan.identity is None:
            out.append(plan)
            continue
        first = runs.setdefault(plan.key(), plan)
        if first is plan:
            out.append(plan)
        elif plan.row.same_as is not None and plan.row.same_as == first.row.label:
            out.append(PlannedRow(**{**plan.__dict__, "shares": first.label}))
        elif not plan.stand_in:
            out.append(PlannedRow(**{**plan.__dict__, "identity": None,
                                     "skipped": f"the same run as row {first.label!r} (every setting, artifact and "
                                                "LM alike)"}))
    return out, {key: plan.label for key, plan in runs.items()}
