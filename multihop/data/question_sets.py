"""The question sets by dataset name: MuSiQue, HotpotQA and 2Wiki's train and dev files in ``MULTIHOP_DATA``, which
every command, benchmark, the comparison and :func:`multihop.load_dataset` accept as ``musique`` (a path is taken as
it is, or under ``MULTIHOP_DATA``). A command's question option reads here too: its help (:data:`TRAIN_QUESTIONS`,
:data:`DEV_QUESTIONS`), its value as a file that must exist (:func:`question_path`, a ``typer.BadParameter`` naming
``--data`` otherwise) and the file as a manifest records it (:func:`file_info`)."""

from __future__ import annotations

from pathlib import Path

from multihop.data.folders import sha256_file
from multihop.data.paths import data_dir

QUESTION_SETS = {
    "dev": {"musique": "musique/dev/musique_qa_100.json", "hotpotqa": "hotpotqa/dev/hotpot_dev100.jsonl",
            "2wiki": "2wikimultihopqa/dev/2wiki_dev100.jsonl"},
    "train": {"musique": "musique/train/musique_train.json", "hotpotqa": "hotpotqa/train/hotpotqa_train.json",
              "2wiki": "2wikimultihopqa/train/wikihop_train_preprocess.json"},
}
DATASETS = tuple(QUESTION_SETS["dev"])
TRAIN_QUESTIONS = f"a question file, or a dataset name ({', '.join(DATASETS)}) for its train file in MULTIHOP_DATA"
DEV_QUESTIONS = f"a question file, or a dataset name ({', '.join(DATASETS)}) for its dev file in MULTIHOP_DATA"


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


def question_path(data: str, split: str) -> Path:
    """A ``--data`` value as a file: a question file, or a dataset name for its ``split`` file in MULTIHOP_DATA; a
    file that is not there is a ``typer.BadParameter`` naming ``--data`` (one line on the command line)."""
    import typer

    try:
        path = question_file(data, split)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data") from exc
    if not path.is_file():
        raise typer.BadParameter(f"{path}: no such file; give a question file or one of {', '.join(DATASETS)}",
                                 param_hint="--data")
    return path


def file_info(path: Path, examples: list) -> dict:
    """A question file as a manifest records it: path, sha256 and the number of questions used."""
    return {"path": str(path), "sha256": sha256_file(path), "questions": len(examples)}
