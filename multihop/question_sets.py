"""The question sets by dataset name: MuSiQue, HotpotQA and 2Wiki's train and dev files in ``MULTIHOP_DATA``, which
every command, benchmark and the comparison accept as ``--data musique`` (a path is taken as it is), and the dev
questions that are measured and never trained on (:func:`held_apart_ids`)."""

from __future__ import annotations

import logging
from pathlib import Path

from multihop.paths import data_dir

logger = logging.getLogger(__name__)

QUESTION_SETS = {
    "dev": {"musique": "musique/dev/musique_qa_100.json", "hotpotqa": "hotpotqa/dev/hotpot_dev100.jsonl",
            "2wiki": "2wikimultihopqa/dev/2wiki_dev100.jsonl"},
    "train": {"musique": "musique/train/musique_train.json", "hotpotqa": "hotpotqa/train/hotpotqa_train.json",
              "2wiki": "2wikimultihopqa/train/wikihop_train_preprocess.json"},
}
DATASETS = tuple(QUESTION_SETS["dev"])


def question_file(source: str | Path = "musique", split: str = "dev") -> Path:
    """A question file: ``source`` names a dataset (musique, hotpotqa, 2wiki: its ``split`` file in
    ``MULTIHOP_DATA``) or is a path, returned as it is."""
    if split not in QUESTION_SETS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(QUESTION_SETS)}")
    relative = QUESTION_SETS[split].get(str(source))
    return data_dir() / relative if relative else Path(source)


def held_apart_ids() -> set[str]:
    """The ids of every dev question file in ``MULTIHOP_DATA``: the questions measured, never trained on. Without
    ``MULTIHOP_DATA`` there are no dev files to hold apart: none, said in one log line (a user's own train file is
    never refused for that)."""
    from multihop.data import load_dataset

    try:
        root = data_dir()
    except FileNotFoundError:
        logger.warning("MULTIHOP_DATA is not set: no dev questions to hold apart from training")
        return set()
    files = [root / relative for relative in QUESTION_SETS["dev"].values()]
    return {str(example.get("id")) for path in files if path.exists() for example in load_dataset(path)}


def load_questions(source: str | Path = "musique", split: str = "dev", limit: int | None = None) -> list:
    """The first ``limit`` questions (all by default) of :func:`question_file`\\ ``(source, split)``."""
    from multihop.data import load_dataset

    return load_dataset(question_file(source, split), limit=limit)


def questions_with_corpus(source: str | Path = "musique", split: str = "dev", limit: int | None = None) -> tuple:
    """:func:`load_questions` and their IRCoT corpus (the union of their paragraphs, deduplicated)."""
    from multihop.data import build_corpus, load_dataset

    path = question_file(source, split)
    examples = load_dataset(path, limit=limit)
    return examples, build_corpus(examples, source=str(path))
