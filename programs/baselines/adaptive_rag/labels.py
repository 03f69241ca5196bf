"""Adaptive-RAG's silver labels (§3.2): each question answered by the strategies, simplest first, and labelled by the
rule of :func:`.complexity.silver_label`, as a resumable job.

A labels folder holds ``labels.jsonl``, one row a question as soon as it is labelled — ``{"id", "question",
"dataset", "answers", "outcomes": {label: {"answer", "correct", "llm_calls", "retrieval_calls"}}, "label",
"source"}`` (``source``: :data:`~.complexity.BY_OUTCOME` or :data:`~.complexity.BY_BIAS`) —, ``run.json``, the
manifest of the job (the question file, the split, each strategy's settings, the LM, the retriever, the bias, the
sample), which refuses a rerun that differs, and ``sample.json``, the held-out sample the job labels
(:mod:`.sampling`: the authors' 500 questions of each dataset of a train file); a rerun labels the questions the file
lacks (without a sample, a larger ``--limit`` extends it).

The classifier's training set (:func:`with_bias_labels`) is the authors' "binary_silver" data
(``classifier/preprocess/preprocess_binary_train.py``, ``concat_binary_silver_train.py``,
``preprocess_utils.concat_and_save_binary_silver``): train questions labelled by their dataset's inductive bias alone
(:func:`bias_rows`; the authors take the first 400 of each dataset's train file, :func:`first_of_each_dataset`),
joined to the silver labels. The authors' two sets never overlap (their silver sample is drawn elsewhere); ours are
kept apart as theirs are — the bias questions are the first 400 of each dataset outside the silver labels and their
sample (``multihop adaptiverag train``; ours, ``--overlapping-bias``: the first 400 whatever the silver labels hold,
which with 400 silver labels from a file's first questions leaves no bias label) — and a question in both keeps its
silver label. A question is its dataset and its id (:func:`question_key`): ids are unique only
within a dataset (a MuSiQue, a HotpotQA and a 2WikiMultihopQA question may share one, and a question file may mix
datasets), so the join, the rows of several labels folders and the oracle's labels (:func:`with_gold_complexity`)
are keyed by both; the authors join on the bare id, which their six datasets' id formats keep apart.

Ours: the strategies run in order, A then B then C, and stop at the first correct answer — the label is the same as
when all three run (the simplest correct one wins), for fewer LM calls; the authors ran all three on every question
(they report each strategy's own scores too). A strategy that raises (a dead endpoint) stops the job; a rerun resumes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from functools import partial
from pathlib import Path

import dspy
from tqdm.auto import tqdm

from multihop.data.corpus import DataFormatError
from multihop.data.folders import RUN_MANIFEST, check_run, locked
from multihop.data.jsonl import append_row, read_rows
from multihop.runtime.parallel import fan_out_chunks

from .complexity import BY_BIAS, LABELS, answered, bias_label, gold_answers, silver_label
from .sampling import write_sample

LABELS_FILE = "labels.jsonl"


def label_row(strategies: Mapping[str, dspy.Module], example: dspy.Example, bias: str | None = None) -> dict:
    """The labels file's row for ``example``: the strategies (by label) asked in turn until one answers correctly,
    and its silver label (the dataset's inductive bias, or ``bias`` for a dataset without a known one, when none
    does)."""
    answers, outcomes = gold_answers(example), {}
    for label in LABELS:
        prediction = strategies[label](question=example.question)
        correct = answered(prediction.answer, answers)
        outcomes[label] = {"answer": prediction.answer, "correct": correct,
                           "llm_calls": prediction.counts["llm_calls"],
                           "retrieval_calls": prediction.counts["retrieval_calls"]}
        if correct:
            break
    label, source = silver_label({name: outcome["correct"] for name, outcome in outcomes.items()},
                                 bias_label(example, bias))
    return {"id": str(example.id), "question": example.question, "dataset": example.get("dataset"),
            "answers": answers, "outcomes": outcomes, "label": label, "source": source}


def label_questions(strategies: Mapping[str, dspy.Module], examples: Sequence[dspy.Example], out: str | Path,
                    manifest: dict, bias: str | None = None, threads: int = 1, progress: bool = True,
                    sample: tuple[int, int] | None = None) -> dict[tuple[str, str], dict]:
    """Label every question of ``examples`` that the folder ``out`` lacks, ``threads`` at once, appending each row
    as it is done; returns every row of the folder by question (:func:`question_key`: its dataset and id, so a file
    mixing datasets whose ids repeat keeps each). ``manifest`` describes the job (module docstring); ``sample``
    (size, seed): ``examples`` are the held-out sample drawn so, recorded in the folder before any is labelled
    (:func:`~.sampling.write_sample`)."""
    missing = [label for label in LABELS if label not in strategies]
    if missing:
        raise ValueError(f"labelling runs every strategy; missing {', '.join(missing)}")
    for example in examples:
        bias_label(example, bias)  # a question of a dataset without a known bias is refused before any LM call
    out = Path(out)
    with locked(out):
        check_run(out / RUN_MANIFEST, manifest, kind="labelling")
        if sample is not None:
            write_sample(out, examples, *sample)
        rows = read_rows(out / LABELS_FILE, key=question_key)
        todo = [example for example in examples if question_key(example) not in rows]
        with open(out / LABELS_FILE, "a", encoding="utf-8") as sink, \
                tqdm(total=len(todo), desc="silver labels", unit="q", disable=not progress) as bar:
            for chunk in fan_out_chunks(partial(label_row, strategies, bias=bias), todo, threads):
                for _, row in chunk:
                    append_row(sink, row)
                    rows[question_key(row)] = row
                bar.update(len(chunk))
    return rows


def bias_rows(examples: Sequence[dspy.Example], bias: str | None = None) -> list[dict]:
    """The inductive-bias rows of train questions (the authors' "binary" labels): each question labelled by its
    dataset's bias (B single-hop, C multi-hop; ``bias`` for a dataset without a known one), whatever any strategy
    answers, with :data:`~.complexity.BY_BIAS` as its source."""
    return [{"id": str(example.id), "question": example.question, "dataset": example.get("dataset"),
             "label": bias_label(example, bias), "source": BY_BIAS} for example in examples]


def first_of_each_dataset(examples: Sequence[dspy.Example], limit: int | None,
                          skip: Collection[tuple[str, str]] = frozenset()) -> list[dspy.Example]:
    """The first ``limit`` questions of each dataset of ``examples`` (None or 0: all), in file order, leaving out the
    questions in ``skip`` (by :func:`question_key`) before counting — the authors' first 400 of each dataset's train
    file, when one question file mixes datasets, outside the silver labels' sample."""
    taken: dict[str, int] = {}
    kept = []
    for example in examples:
        if question_key(example) in skip:
            continue
        dataset = str(example.get("dataset") or "")
        if not limit or taken.get(dataset, 0) < limit:
            taken[dataset] = taken.get(dataset, 0) + 1
            kept.append(example)
    return kept


def question_key(row: Mapping) -> tuple[str, str]:
    """Which question a labels row (or an example) is: its dataset and its id, as strings (no dataset: empty)."""
    return str(row.get("dataset") or ""), str(row.get("id"))


def with_bias_labels(silver: Sequence[dict], bias: Sequence[dict]) -> list[dict]:
    """The classifier's training rows as the authors join them (``concat_and_save_binary_silver``): the bias rows of
    the questions without a silver row, then the silver rows — a question with both keeps its silver label. A question
    is its dataset and its id (:func:`question_key`), so two datasets' questions sharing an id stay apart; a silver
    row that names no dataset (a labels file written by hand) stands for every question of its id."""
    labelled = {question_key(row) for row in silver}
    undated = {str(row.get("id")) for row in silver if not row.get("dataset")}
    kept = {question_key(row): row for row in bias
            if question_key(row) not in labelled and str(row.get("id")) not in undated}  # a question once
    return [*kept.values(), *silver]


def read_labels(*sources: str | Path) -> list[dict]:
    """The rows of labels folders (or their ``labels.jsonl`` files), in order; a question (its dataset and id,
    :func:`question_key`) in several sources keeps its last row."""
    rows: dict[tuple[str, str], dict] = {}
    for source in sources:
        path = Path(source)
        path = path / LABELS_FILE if path.is_dir() else path
        if not path.is_file():
            raise FileNotFoundError(f"{source} holds no silver labels ({LABELS_FILE}): make them with `multihop "
                                    "adaptiverag labels --dataset NAME --out DIR`")
        found = read_rows(path, repair=False, fields={"question": str, "label": str}, key=question_key)
        unknown = next((row for row in found.values() if row["label"] not in LABELS), None)
        if unknown is not None:
            raise DataFormatError(f"{path}: question {unknown['id']}'s label is {unknown['label']!r}, not one of "
                                  f"{', '.join(LABELS)}")
        rows.update(found)
    return list(rows.values())


def with_gold_complexity(examples: Sequence[dspy.Example], labels: Mapping[tuple[str, str], str] | None = None
                         ) -> list[dspy.Example]:
    """``examples`` with each one's silver label as the input ``gold_complexity``, which Adaptive-RAG's oracle
    (``AdaptiveRAG(route="oracle")``) follows: the example's own ``gold_complexity`` field, else its label in
    ``labels``, keyed as every labels row is (:func:`question_key`: dataset and id; :func:`labels_by_question` builds
    it), a row that names no dataset standing for every question of its id; an example with neither is a
    ``ValueError`` naming how to label it."""
    labels, prepared, unlabelled = labels or {}, [], []
    for example in examples:
        key = question_key(example)
        label = example.get("gold_complexity") or labels.get(key) or labels.get(("", key[1]))
        if label not in LABELS:
            unlabelled.append(str(example.get("id")))
            continue
        prepared.append(example.copy(gold_complexity=label).with_inputs(*example.inputs().keys(), "gold_complexity"))
    if unlabelled:
        raise ValueError(f"{len(unlabelled)} questions have no silver label for the oracle (e.g. {unlabelled[0]}): "
                         "label them with `multihop adaptiverag labels --split dev --dataset NAME --out DIR` and give "
                         "the folder as the oracle_labels setting")
    return prepared


def labels_by_question(rows: Sequence[Mapping]) -> dict[tuple[str, str], str]:
    """The silver label of each question of labels rows, by question (:func:`question_key`), as
    :func:`with_gold_complexity` reads them."""
    return {question_key(row): row["label"] for row in rows}
