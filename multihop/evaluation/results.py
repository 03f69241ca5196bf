"""Evaluation folders as tables and run files: :func:`results` reads the rows of a run (``results.jsonl`` and
``traces/``, written by :func:`multihop.evaluation.runner.evaluate`), of a comparison (``multihop compare``: one run
per dataset × program, listed in its ``comparison.json``) or of ``multihop reproduce`` (a ``comparison.json`` per
table) into one pandas DataFrame, a row a question; :func:`to_dataset` makes it a ``datasets.Dataset``.

:func:`write_trec_run` writes a run's retrievals as a TREC run file and :func:`write_trec_qrels` the questions' gold
passages as TREC qrels, the files ``trec_eval`` and ``ranx`` read (``multihop eval --trec-run FILE`` writes both:
:func:`write_trec_files`); :func:`ranx_run` and :func:`ranx_qrels` hand the same to ``ranx`` in memory::

    import ranx
    ranx.evaluate(ranx_qrels(questions), ranx_run("runs/ssr"), ["ndcg@10", "mrr", "recall@5"], make_comparable=True)

A question that read no passage (or errored) is not in the run; ``make_comparable=True`` scores it 0, where the
run's summary leaves an errored question out of its recall, nDCG and MRR.

A question's ranking is the list of passage ids the program read, in order (``passage_ids`` of its row: the list
recall, nDCG and MRR are computed over, :mod:`multihop.evaluation.metrics`); rows keep no retrieval scores, so a
run file scores rank r of n as n − r + 1, which orders the passages as read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from multihop.data.folders import RUN_MANIFEST
from multihop.data.jsonl import read_rows
from multihop.data.paths import atomic_write_text, read_json
from multihop.evaluation.intervals import ANSWER_METRICS, GRADED_METRICS, question_values
from multihop.evaluation.runner import RESULTS, SUMMARY, trace_path

if TYPE_CHECKING:
    import pandas as pd

COMPARISON = "comparison.json"  # multihop compare's table, and each table's of multihop reproduce
REPRODUCTION = "reproduce.json"  # multihop reproduce's index of its tables
LABELS = ("table", "dataset", "program")  # where a row's run lies, the frame's first columns
QUESTION = ("id", "question", "answers", "prediction", "error")
TRACE = ("stages", "stage_calls", "passage_ids")  # the stage trace's summary, after the metrics and counts


def results(run_dir: str | Path) -> pd.DataFrame:
    """The questions of an evaluation folder as one pandas DataFrame, a row a question.

    ``run_dir`` is a run folder (``multihop eval --out``, :func:`multihop.evaluate`), a comparison's folder
    (``multihop compare --out``, :func:`multihop.compare`) or a ``multihop reproduce`` folder. Columns, in order:

    - ``table`` (a reproduce folder's: the table's folder), ``dataset`` (a comparison's dataset, None for a lone
      run), ``program`` (the name its summary records);
    - ``id``, ``question``, ``answers`` (a list), ``prediction``, ``error`` (None, or ``"Type: message"``);
    - every metric (``em``, ``f1``, ``acc``, ``cover_em``, ``recall@2``, ``recall@5``, ``recall@k``, ``ndcg@10``,
      ``mrr``, ``llm_eval`` when judged, the user metrics) and every count (``llm_calls``, ``retrieval_calls``,
      ``tokens``, ``prompt_tokens``, ``completion_tokens``, ``stage_errors``, the program's events, ...), then
      ``seconds``: each question's value as the run's summary counts it (an errored question scores 0 on the answer
      metrics, a question without gold passages has no recall: NaN), so a column's mean (``frame["em"].mean()``,
      which skips NaN) is the summary's mean;
    - the stage trace's summary: ``stages`` (the stages called, each once, in the order first called: a list),
      ``stage_calls`` (the stage records: LLM calls and retrievals), and ``passage_ids`` (the passages read, in
      order: a list).

    ``frame.groupby(["dataset", "program"])`` gives each run of a comparison; :func:`to_dataset` (or
    ``frame.pipe(datasets.Dataset.from_pandas, preserve_index=False)``) makes the frame a ``datasets.Dataset``. A
    folder holding no ``results.jsonl`` is a ``FileNotFoundError`` naming it."""
    import pandas as pd

    folder = Path(run_dir)
    runs = run_folders(folder)
    if not runs:
        raise FileNotFoundError(f"{folder}: no {RESULTS} here or in the runs of a {COMPARISON}: give an evaluation "
                                "folder (multihop eval --out, compare --out or reproduce --out)")
    frames = [run_frame(path, labels) for path, labels in runs]
    labels = [label for label in LABELS if any(label in run for _, run in runs)]
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    for label in labels:
        if label not in frame:
            frame[label] = None
    return frame[[*labels, *(column for column in frame.columns if column not in labels)]]


def run_folders(folder: Path) -> list[tuple[Path, dict]]:
    """The run folders under ``folder`` with their labels (``table``, ``dataset``, ``program``): the folder itself
    when it holds ``results.jsonl``, else the runs its ``comparison.json`` lists, else those of each table of a
    reproduce folder (each ``*/comparison.json``)."""
    if (folder / RESULTS).exists():
        return [(folder, {"dataset": None, "program": program_name(folder)})]
    if (folder / COMPARISON).exists():
        return compared_runs(folder)
    tables = sorted(path.parent for path in folder.glob(f"*/{COMPARISON}"))
    return [(run, {"table": table.name, **labels}) for table in tables for run, labels in compared_runs(table)]


def compared_runs(folder: Path) -> list[tuple[Path, dict]]:
    """The runs a ``comparison.json`` lists (their folders relative to its own), those with rows."""
    runs = read_json(folder / COMPARISON).get("runs", [])
    found = [((folder / run["folder"]).resolve(), {"dataset": run["dataset"], "program": run["program"]})
             for run in runs]
    return [(path, labels) for path, labels in found if (path / RESULTS).exists()]


def program_name(folder: Path) -> str:
    """The program of a run folder: its summary's name, else its manifest's class, else the folder's name."""
    for name, key in ((SUMMARY, "program"), (RUN_MANIFEST, "program")):
        if (folder / name).exists():
            value = read_json(folder / name).get(key)
            if value:
                return str(value)
    return folder.name


def run_frame(folder: Path, labels: dict) -> pd.DataFrame:
    """One run folder's rows as a DataFrame (:func:`results`' columns), ``labels`` in every row."""
    import pandas as pd

    rows = list(read_rows(folder / RESULTS, repair=False).values())
    metrics = list(dict.fromkeys((*ANSWER_METRICS, *GRADED_METRICS,
                                  *(key for row in rows for key in row.get("metrics", {})))))
    counted = sorted({key for row in rows for key, value in row.get("counts", {}).items()
                      if isinstance(value, int | float) and not isinstance(value, bool)})
    columns = {label: [value] * len(rows) for label, value in labels.items()}
    columns.update({key: [row.get(key) for row in rows] for key in QUESTION})
    columns["answers"] = [list(row.get("answers") or []) for row in rows]
    for key in (*metrics, *(key for key in counted if key not in metrics), "seconds"):
        if key == "llm_eval" and not any("llm_eval" in row.get("metrics", {}) for row in rows):
            continue  # not judged
        columns[key] = [math.nan if value is None else value for value in question_values(rows, key)]
    stages = [trace_summary(folder, str(row["id"])) for row in rows]
    columns["stages"] = [names for names, _ in stages]
    columns["stage_calls"] = [calls for _, calls in stages]
    columns["passage_ids"] = [list(row.get("passage_ids") or []) for row in rows]
    return pd.DataFrame(columns)


def trace_summary(folder: Path, qid: str) -> tuple[list[str], int]:
    """A question's stages, each once in the order first called, and its stage records' count, from its trace file
    (none: no stages)."""
    path = trace_path(folder, qid)
    records = read_json(path) if path.exists() else []
    return list(dict.fromkeys(str(record.get("stage")) for record in records)), len(records)


def to_dataset(frame: pd.DataFrame | str | Path):
    """A :func:`results` frame (or the folder to read it from) as a ``datasets.Dataset``, its columns and types kept
    (lists as Arrow lists). Needs the ``datasets`` package (``pip install datasets``)."""
    try:
        import datasets
    except ImportError:
        raise ImportError("to_dataset needs the datasets package: pip install datasets") from None
    if isinstance(frame, str | Path):
        frame = results(frame)
    return datasets.Dataset.from_pandas(frame, preserve_index=False)


def ranking(run_dir: str | Path) -> dict[str, list[str]]:
    """Each answered question's ranking in a run folder: question id → the passage ids it read, in order (questions
    that read none, or errored, are left out)."""
    rows = read_rows(Path(run_dir) / RESULTS, repair=False)
    return {str(qid): list(dict.fromkeys(row["passage_ids"])) for qid, row in rows.items()
            if not row.get("error") and row.get("passage_ids")}


def _trec_word(value: str, what: str) -> str:
    """``value`` as one field of a TREC line: no whitespace in it (a ValueError naming it otherwise)."""
    if not value or re.search(r"\s", value):
        raise ValueError(f"{what} {value!r} cannot be a TREC field: it is empty or holds whitespace")
    return value


def write_trec_run(run_dir: str | Path, path: str | Path, tag: str | None = None) -> Path:
    """Write the run folder's retrievals (:func:`ranking`) as a TREC run file, ``qid Q0 docid rank score tag`` a line
    (ranks from 1, score n − rank + 1 of a question's n passages); ``tag`` defaults to the run's program. A question
    or passage id holding whitespace is a ValueError. Returns ``path``."""
    tag = _trec_word(re.sub(r"\s+", "_", tag or program_name(Path(run_dir))), "tag")
    lines = [f"{_trec_word(qid, 'question id')} Q0 {_trec_word(pid, 'passage id')} {rank} {len(ids) - rank + 1} {tag}"
             for qid, ids in ranking(run_dir).items() for rank, pid in enumerate(ids, 1)]
    return _written(path, lines)


def write_trec_qrels(examples: Iterable, path: str | Path) -> Path:
    """Write the gold passages of ``examples`` (``dspy.Example``\\ s with an ``id`` and ``gold_passage_ids``) as TREC
    qrels, ``qid 0 docid 1`` a line; questions without gold passages are left out. Returns ``path``."""
    lines = [f"{_trec_word(str(example.id), 'question id')} 0 {_trec_word(pid, 'passage id')} 1"
             for example in examples for pid in dict.fromkeys(example.get("gold_passage_ids") or [])]
    return _written(path, lines)


def write_trec_files(run_dir: str | Path, examples: Iterable, path: str | Path, tag: str | None = None
                     ) -> tuple[Path, Path]:
    """``multihop eval --trec-run PATH``: the run's TREC run file at ``path`` (:func:`write_trec_run`) and the qrels of
    ``examples`` beside it, ``path`` with the suffix ``.qrels`` (:func:`write_trec_qrels`); returns both paths."""
    path = Path(path)
    qrels = path.with_suffix(".qrels") if path.suffix != ".qrels" else path.with_name(f"{path.name}.qrels")
    return write_trec_run(run_dir, path, tag), write_trec_qrels(examples, qrels)


def _written(path: str | Path, lines: Sequence[str]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(f"{line}\n" for line in lines))
    return path


def ranx_run(source: str | Path | Mapping[str, Sequence[str]], name: str | None = None):
    """A run folder's retrievals (:func:`ranking`), or rankings given as question id → passage ids in order, as a
    ``ranx.Run`` scored as :func:`write_trec_run` scores them, named ``name`` (default: the run's program)."""
    import ranx

    if isinstance(source, Mapping):
        ranked = {str(qid): list(dict.fromkeys(ids)) for qid, ids in source.items() if ids}
    else:
        ranked, name = ranking(source), name or program_name(Path(source))
    scored = {qid: {pid: float(len(ids) - rank) for rank, pid in enumerate(ids)} for qid, ids in ranked.items()}
    return ranx.Run(scored, name=name)


def ranx_qrels(examples: Iterable):
    """The gold passages of ``examples`` as ``ranx.Qrels`` (relevance 1; questions without gold left out)."""
    import ranx

    return ranx.Qrels({str(example.id): dict.fromkeys(example.gold_passage_ids, 1) for example in examples
                       if example.get("gold_passage_ids")})
