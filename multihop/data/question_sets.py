"""The question sets by dataset name: MuSiQue, HotpotQA and 2Wiki's train and dev files in ``MULTIHOP_DATA``, which
every command, benchmark, the comparison and :func:`multihop.load_dataset` accept as ``musique`` (a path is taken as
it is, or under ``MULTIHOP_DATA``)."""

from __future__ import annotations

from pathlib import Path

from multihop.data.paths import data_dir

QUESTION_SETS = {
    "dev": {"musique": "musique/dev/musique_qa_100.json", "hotpotqa": "hotpotqa/dev/hotpot_dev100.jsonl",
            "2wiki": "2wikimultihopqa/dev/2wiki_dev100.jsonl"},
    "train": {"musique": "musique/train/musique_train.json", "hotpotqa": "hotpotqa/train/hotpotqa_train.json",
              "2wiki": "2wikimultihopqa/train/wikihop_train_preprocess.json"},
}
DATASETS = tuple(QUESTION_SETS["dev"])


def question_file(source: str | Path = "musique", split: str = "dev") -> Path:
    """A question file: ``source`` names a dataset (musique, hotpotqa, 2wiki: its ``split`` file in
    ``MULTIHOP_DATA``) or is a path — as it is when it exists, else, when relative, under ``MULTIHOP_DATA`` when it is
    there (``musique/dev/musique_qa_100.json`` from any working folder)."""
    if split not in QUESTION_SETS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(QUESTION_SETS)}")
    relative = QUESTION_SETS[split].get(str(source))
    if relative:
        return data_dir() / relative
    path = Path(source)
    if path.exists() or path.is_absolute():
        return path
    try:
        under = data_dir() / path
    except FileNotFoundError:  # no MULTIHOP_DATA: the path as given, which the reader names when it is missing
        return path
    return under if under.exists() else path
