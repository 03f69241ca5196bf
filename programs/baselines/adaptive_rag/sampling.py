"""Adaptive-RAG's two sources of training labels kept apart: the silver labels' held-out sample of the train questions
and, outside it, the questions that take their dataset's inductive bias.

The authors' (``processing_scripts/subsample_dataset_and_remap_paras.py`` with ``dev_diff_size 500``;
``classifier/preprocess/preprocess_silver_train.py``, ``preprocess_binary_train.py``): the silver labels come from a
sample of 500 questions of each dataset (``random.seed(13370)``, then ``random.sample``), the bias labels from the first
400 questions of each dataset's train file — two sets that never overlap (the authors draw the sample from each
dataset's dev set, whose test sample it avoids). Ours: the sample is drawn from the train file, since our dev files
are the questions measured and never trained on, so the bias questions are the first 400 of each dataset *outside*
the sample, as disjoint as the authors'. The sample has the authors' size and seed; the draw is ours — a seeded
shuffle of each dataset's questions, the sample its first ``size``, so a larger sample holds a smaller one of the same
seed — and returns the questions in file order.

A labels folder keeps the sample it labels in ``sample.json`` (``{"size", "seed", "questions": [[dataset, id], ...]}``)
before any question is labelled, so ``multihop adaptiverag train`` leaves out of the bias labels every question of the
sample, the ones an interrupted job never reached included. Pure functions and the file, no LM.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import dspy

from multihop.data.paths import atomic_write_text

SAMPLE_FILE = "sample.json"
SAMPLE_SIZE, SAMPLE_SEED = 500, 13370  # the authors' dev_diff_size 500 and random.seed(13370)


def dataset_of(example) -> str:
    """A question's (or a labels row's) dataset, as a string (none: empty)."""
    return str(example.get("dataset") or "")


def held_out_sample(examples: Sequence[dspy.Example], size: int, seed: int = SAMPLE_SEED) -> list[dspy.Example]:
    """The ``size`` questions of each dataset of ``examples`` drawn with ``seed`` (every question of a dataset that
    has no more), in file order: each dataset's questions shuffled by a generator seeded with ``seed`` alone (so a
    dataset's sample does not depend on the others in the file), its sample the first ``size`` of the shuffle."""
    if size < 1:
        raise ValueError(f"a sample holds at least 1 question a dataset, not {size}")
    positions: dict[str, list[int]] = {}
    for index, example in enumerate(examples):
        positions.setdefault(dataset_of(example), []).append(index)
    kept: set[int] = set()
    for indices in positions.values():
        shuffled = list(indices)
        random.Random(seed).shuffle(shuffled)
        kept.update(shuffled[:size])
    return [example for index, example in enumerate(examples) if index in kept]


def write_sample(folder: str | Path, examples: Sequence[dspy.Example], size: int, seed: int) -> Path:
    """Record in ``folder`` the sample a labelling job labels (module docstring); returns the file."""
    path = Path(folder) / SAMPLE_FILE
    keys = [[dataset_of(example), str(example.get("id"))] for example in examples]
    atomic_write_text(path, json.dumps({"size": size, "seed": seed, "questions": keys}, indent=1))
    return path


def sampled_questions(folder: str | Path) -> set[tuple[str, str]]:
    """The questions (dataset, id) of the sample recorded in a labels folder (or beside its ``labels.jsonl``); none
    when the job labelled no sample (``--sample 0``, or a folder made by hand)."""
    folder = Path(folder)
    path = (folder if folder.is_dir() else folder.parent) / SAMPLE_FILE
    if not path.is_file():
        return set()
    return {(str(dataset), str(qid)) for dataset, qid in json.loads(path.read_text(encoding="utf-8"))["questions"]}
