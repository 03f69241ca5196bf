"""The papers the programs rebuild (:class:`Paper`, each program's declaration names its own) and their own headline
numbers, which ``multihop compare`` shows beside ours, labelled as theirs: each with the LM it was measured with, where
it was read (the paper by first author and year, and its table: "Ko et al., 2025, Tables 2-3") and how its setting
differs from ours (their questions, corpus and retriever). Each method declares its paper's numbers with its other
facts (``Declaration(papers=reported(...))`` in its package); only numbers read in the papers' text are declared.

Each method's package also declares its paper's results tables as data (:class:`PaperTable`, ``programs/<method>/
tables.py``, ``Declaration(tables=...)``): every row a program here stands for (:class:`TableRow`: the program, its
settings, the student or stronger LM some of its stages need, whether it can run here) with the paper's number for
each cell it prints, so that a table can be run again row by row and set beside the paper's.

Numbers are fractions, as our summaries keep them (counts — steps, tokens — as printed).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """The paper a program rebuilds, as its declaration names it (``Declaration(paper=Paper(...))``)."""

    title: str
    authors: str  # as the paper lists them, "First Author, Second Author, ..."
    year: int
    venue: str | None = None  # where it was published; None: a preprint
    url: str | None = None

    def key(self) -> str:
        """A BibTeX key: the first author's last name, the year and the title's first word
        (``trivedi2023interleaving``)."""
        last = re.sub(r"[^a-z]", "", self.authors.split(",")[0].split()[-1].lower())
        first = re.sub(r"[^a-z]", "", self.title.split()[0].lower())
        return f"{last}{self.year}{first}"

    def bibtex(self) -> str:
        """The paper's BibTeX entry: ``@inproceedings`` where it was published, ``@misc`` for a preprint."""
        fields = {"title": "{" + self.title + "}", "author": " and ".join(a.strip() for a in self.authors.split(",")),
                  "year": str(self.year)}
        if self.venue:
            fields["booktitle"] = self.venue
        if self.url:
            fields["url"] = self.url
        body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields.items())
        return f"@{'inproceedings' if self.venue else 'misc'}{{{self.key()},\n{body}\n}}"

    def short(self) -> str:
        """``First author et al., venue year`` (``year`` alone for a preprint)."""
        first = self.authors.split(",")[0].strip().split()[-1]
        more = " et al." if "," in self.authors else ""
        return f"{first}{more}, {self.venue + ' ' if self.venue else ''}{self.year}"


@dataclass(frozen=True)
class PaperResult:
    """One paper's reported scores of its method on one dataset: ``metrics`` by our summary keys (em, f1, acc,
    cover_em, llm_eval, recall@2, recall@5), the paper's ``lm``, where it was read (``source``) and its ``setting``."""

    program: str  # the method's name (filled in by its declaration)
    dataset: str
    lm: str
    metrics: dict[str, float]
    source: str
    setting: str

    def label(self) -> str:
        return f"paper (theirs, {self.lm})"


def reported(lm: str, source: str, setting: str, by_dataset: dict[str, dict[str, float]]) -> tuple[PaperResult, ...]:
    """A paper's numbers for its method, one :class:`PaperResult` per dataset (musique, hotpotqa, 2wiki);
    ``by_dataset`` holds percentages as the papers print them. The method's declaration fills in its name."""
    return tuple(PaperResult("", dataset, lm, {key: value / 100 for key, value in numbers.items()}, source, setting)
                 for dataset, numbers in by_dataset.items())


# --- a paper's results tables, as data ------------------------------------------------------------------------------

RATES = ("em", "f1", "acc", "cover_em", "llm_eval")  # and every recall@k: shares of questions, kept as fractions
MEAN = "mean"  # the dataset of "Mean" columns: each the mean of the row's cells of its metric on the others
STAGE_LM_ROLES = ("student", "stronger")


def is_rate(metric: str) -> bool:
    """Whether ``metric`` is a share of questions (kept as a fraction), not a count (steps, tokens, LLM calls)."""
    return metric in RATES or metric.startswith("recall@")


@dataclass(frozen=True)
class StageLMs:
    """Stages of a row that run on an LM other than the row's own: ``role`` ``"student"``, a ``multihop distill``
    folder trained on those stages (``set_stage_lm``), or ``"stronger"``, an LM stronger than the row's (ComposeRAG's
    Table 4 upgrades); ``stages`` by their names (``program.stage_names()``, first parts); ``paper_lm`` what the paper
    ran them on ("fine-tuned Qwen2.5-7B-Instruct", "gpt-4o")."""

    role: str
    stages: tuple[str, ...]
    paper_lm: str | None = None

    def __post_init__(self):
        if self.role not in STAGE_LM_ROLES:
            raise ValueError(f"a stage LM's role is one of {', '.join(STAGE_LM_ROLES)}, not {self.role!r}")
        if not self.stages:
            raise ValueError("name the stages that run on the other LM")


# what each kind of artifact is to a row: the index's encoder, or the program setting its folder (or model) is given as
ARTIFACT_KINDS = {"encoder": None, "classifier": "classifier", "triple_cache": "triple_cache",
                  "oracle_labels": "oracle_labels", "reranker": "rerank"}
# how a given artifact becomes its setting's value, where it is not the folder itself: a reranker model is the
# cross-encoder's (``rerank="cross-encoder:MODEL"``)
ARTIFACT_VALUES = {"reranker": "cross-encoder:{}"}


@dataclass(frozen=True)
class Artifact:
    """Something a row needs that is not installed with the project: made here (a fine-tuned encoder, an Adaptive-RAG
    classifier, a CIRAG triple cache, Adaptive-RAG's oracle labels) or a model the paper used that the user supplies
    (a ColBERTv2 checkpoint, a cross-encoder reranker). A row that needs one runs only once it is given (``reproduce
    --artifact NAME=DIR``) or built (``reproduce --build``); until then it shows the paper's number alone with the
    command that makes it — unless the artifact names a ``stand_in``, which the row runs on in its place, saying so.

    Args:
        name: its name within its paper ("encoder", "encoder-no-alpha", "classifier", "triple-cache", "colbert").
        kind: what it is, and so how a row uses it (:data:`ARTIFACT_KINDS`): ``"encoder"`` (the row's index is built
            with it: a dense one, whose hidden states the reranker reads, or the row's own ``first_stage``, PLAID for a
            ColBERT checkpoint), ``"reranker"`` (a cross-encoder model, a Hub id or a folder: the row's ``rerank``
            setting is ``cross-encoder:MODEL``), else the program setting of that name (``classifier``,
            ``triple_cache``, ``oracle_labels``) set to its folder.
        make: the commands that make (or fetch) it, as a user types them (``DATA``: the dataset, ``DIR``: its
            folder).
        per_dataset: made once for each dataset (an encoder trained on its train questions, a cache of its corpus)
            rather than once for the paper.
        switches: what it was made with that tells it apart from the paper's other artifacts of its kind (an
            encoder's training switches), shown in the row's identity.
        build: ``build(folder, dataset, limit, lm)`` makes it into ``folder`` with the project's own commands on
            ``limit`` train questions (``dataset`` None when not ``per_dataset``; ``lm`` the run's LM, for an
            artifact made by running one); resumable, as those commands are. None: it cannot be made by
            ``reproduce --build``.
        model: the paper's model it is, for one the user supplies ("ColBERTv2", "bge-reranker-v2-m3").
        stand_in: the value of its setting the row runs with while it is not given (a reranker's registry name,
            ``"maxsim"``), which the row's plan and its table's header name as a stand-in for ``model``; None: the
            row does not run without it.
    """

    name: str
    kind: str
    make: str
    per_dataset: bool = True
    switches: tuple[str, ...] = ()
    build: Callable | None = dataclasses.field(default=None, compare=False, repr=False)
    model: str | None = None
    stand_in: str | None = None

    def __post_init__(self):
        if self.kind not in ARTIFACT_KINDS:
            raise ValueError(f"an artifact's kind is one of {', '.join(ARTIFACT_KINDS)}, not {self.kind!r}")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", self.name):
            raise ValueError(f"artifact name {self.name!r}: lower-case letters, digits and dashes")
        if self.stand_in is not None and (ARTIFACT_KINDS[self.kind] is None or self.model is None):
            raise ValueError(f"artifact {self.name!r}: a stand-in takes the place of a model (model=...) given as a "
                             f"setting; an artifact of kind {self.kind!r} is none")

    def option(self, dataset: str | None = None) -> str:
        """The option that gives it: ``--artifact NAME=DIR`` (``NAME@DATASET=DIR`` for one made per dataset),
        ``NAME=MODEL`` for a reranker (a Hub id or a folder)."""
        at = f"@{dataset or 'DATASET'}" if self.per_dataset else ""
        return f"--artifact {self.name}{at}={'MODEL' if self.kind == 'reranker' else 'DIR'}"

    def setting_value(self, given: object) -> str:
        """The value of its setting when it is given as ``given`` (a folder, or a reranker's model)."""
        return ARTIFACT_VALUES.get(self.kind, "{}").format(given)


@dataclass(frozen=True)
class TableRow:
    """One row of a paper's results table, as the paper prints it and as a program here runs it.

    Args:
        label: the row as the paper prints it ("w/o EI", "IRCoT + BM25 (Default)"); a row the paper does not print
            (ours, for comparison) says so in its label.
        program: the registered program that runs the row (``PROGRAMS[program]``); for a row that cannot run here
            (``runnable=False``), the nearest program built here.
        settings: the constructor settings of the row (``program(retriever=..., **settings)``): the table's setup
            (its k, caps, reranker) applied through the program's own knobs, and the row's switches.
        numbers: the paper's number for every cell of the row it prints, by ``(dataset, metric)`` (a column of the
            table); rates as fractions (0.523 for 52.3), counts (steps, tokens) as printed.
        lm: the LM the paper ran the row with, where it differs from the table's ``lm``.
        stage_lms: stages the row runs on a student or a stronger LM (None: every stage on the row's LM).
        first_stage: the row's own first stage (``"bm25"``, ``"dense"``, ``"plaid"`` over a ColBERT checkpoint it
            needs), read alone without the table's reranker, where it differs from the table's.
        pooling: the pooling of the row's dense index where it is not its program's own (``"cls"``: a baseline read
            through CoopRAG's retriever).
        needs: what else the row needs to run as the paper's (:class:`Artifact`: an encoder trained with its
            switches, a classifier, a triple cache, a model the paper used); it does not run without them, but on the
            ``stand_in`` of one that has it, said where it runs.
        same_as: the label of an earlier row of the table that this one runs exactly (the paper prints one
            configuration under two labels): run once, shown in both places.
        runnable: False where the row needs what cannot run here (a fine-tuned model not built, a proprietary or
            missing retriever, a strategy not rebuilt); ``why_not`` says what.
    """

    label: str
    program: str
    settings: dict = dataclasses.field(default_factory=dict)
    numbers: dict[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    lm: str | None = None
    stage_lms: StageLMs | None = None
    first_stage: str | None = None
    pooling: str | None = None
    needs: tuple[Artifact, ...] = ()
    same_as: str | None = None
    runnable: bool = True
    why_not: str | None = None

    def __post_init__(self):
        if not isinstance(self.needs, tuple) or not all(isinstance(need, Artifact) for need in self.needs):
            raise ValueError(f"row {self.label!r}: needs is a tuple of Artifacts")
        if self.runnable == bool(self.why_not):
            raise ValueError(f"row {self.label!r}: a row that cannot run says why (why_not), and only such a row")
        for (dataset, metric), value in self.numbers.items():
            if is_rate(metric) and not 0 <= value <= 1:
                raise ValueError(f"row {self.label!r}: {dataset} {metric} = {value} is no fraction (rates are kept "
                                 "as fractions: 0.523 for 52.3)")


@dataclass(frozen=True)
class PaperTable:
    """One results table (or figure with printed numbers) of a method's paper, as data: its rows, each run by a program
    here (:class:`TableRow`), and the paper's numbers beside them. Declared in the method's package
    (``programs/<method>/tables.py``) and passed as ``Declaration(tables=...)``.

    Args:
        number: as the paper names it ("Table 2", "Fig. 5", "App. E").
        title: its caption, shortened.
        columns: ``(dataset, metric)`` of every column, in the paper's order: our dataset names (musique, hotpotqa,
            2wiki, nq, ...) and summary keys (em, f1, acc, cover_em, llm_eval, recall@2, recall@5, steps, tokens).
        rows: its rows (only those a program here stands for; the others are named in ``notes``).
        lm: the LM every row ran with unless the row names its own (None: the paper does not say).
        first_stage: the first stage of ours the rows' retriever is built with (``"dense"``, ``"bm25"``).
        settings: the setup the paper ran every row with, in its terms (k, n and the reranker, iteration caps, the
            encoder, ...); each row's ``settings`` apply it through its program's own knobs.
        encoder: the fine-tuned encoder the paper ran every dense row with (an :class:`Artifact`): used where it is
            given or built, else the stock encoder, which the table's header then says; a row that needs its own
            encoder (``needs``) runs on that one.
        counts: what each count column of the table is in our evaluation summaries, where it is not the summary key
            of the column's own name: the keys to read, the first a run has (``{"steps": ("steps",
            "retrieval_calls")}``), none where no count of ours is the paper's (the column is the paper's alone); said
            in the table's header.
        derived: a column that is the mean of other columns of its dataset (``{"avg": ("llm_eval", "cover_em")}``);
            columns of the dataset :data:`MEAN` are each the mean of the row's cells of their metric on the table's
            other datasets.
        rates: metrics of the table that are shares of questions beyond :func:`is_rate`'s (kept as fractions, shown
            in percent).
        notes: what differs from ours, the rows left out and how the rows were read.
    """

    number: str
    title: str
    columns: tuple[tuple[str, str], ...]
    rows: tuple[TableRow, ...]
    lm: str | None = None
    first_stage: str = "dense"
    settings: dict = dataclasses.field(default_factory=dict)
    notes: str = ""
    encoder: Artifact | None = None
    counts: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    derived: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    rates: tuple[str, ...] = ()

    def __post_init__(self):
        if len(set(self.columns)) != len(self.columns):
            raise ValueError(f"{self.number}: a column is declared twice")
        seen = set()
        for row in self.rows:
            unknown = sorted(set(row.numbers) - set(self.columns))
            if unknown:
                raise ValueError(f"{self.number}, row {row.label!r}: cells {unknown} name no column of the table")
            key = (row.label, row.lm)
            if key in seen:
                raise ValueError(f"{self.number}: row {row.label!r} ({row.lm or self.lm}) is declared twice")
            if row.same_as is not None and (row.same_as, row.lm) not in seen:
                raise ValueError(f"{self.number}: row {row.label!r} is the same run as {row.same_as!r}, which is no "
                                 "earlier row of the table")
            seen.add(key)
        if self.encoder is not None and self.encoder.kind != "encoder":
            raise ValueError(f"{self.number}: its encoder is an artifact of kind {self.encoder.kind!r}")

    def is_rate(self, metric: str) -> bool:
        """Whether ``metric`` is a share of questions in this table (:func:`is_rate`, or one of its ``rates``)."""
        return is_rate(metric) or metric in self.rates

    def numbers(self) -> int:
        """How many cells the paper prints in the declared rows."""
        return sum(len(row.numbers) for row in self.rows)

    def row(self, label: str, lm: str | None = None) -> TableRow:
        """The row labelled ``label`` (of ``lm`` where rows of several LMs share a label)."""
        matches = [row for row in self.rows if row.label == label and (lm is None or row.lm == lm)]
        if len(matches) != 1:
            raise KeyError(f"{self.number} has {len(matches)} rows labelled {label!r}"
                           f"{f' for {lm}' if lm else ''}")
        return matches[0]


def cells(columns: tuple[tuple[str, str], ...], *printed: float | None,
          fractions: bool = False) -> dict[tuple[str, str], float]:
    """A row's numbers from its printed cells in the order of ``columns`` (None for a cell the paper leaves empty:
    "-"): rates printed as percentages become fractions (``fractions=True``: the table prints fractions already),
    counts stay as printed."""
    if len(printed) != len(columns):
        raise ValueError(f"{len(printed)} cells for {len(columns)} columns")
    return {column: (value / 100 if is_rate(column[1]) and not fractions else value)
            for column, value in zip(columns, printed, strict=True) if value is not None}


def grid(datasets: tuple[str, ...], metrics: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The columns of a table that prints ``metrics`` under each of ``datasets``."""
    return tuple((dataset, metric) for dataset in datasets for metric in metrics)
