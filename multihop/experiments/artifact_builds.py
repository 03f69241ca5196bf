"""The artifacts a reproduction's rows need (:class:`~multihop.programs.papers.Artifact`): those the user gives
(``--artifact NAME[@DATASET]=DIR``), those built by an earlier ``--build`` into the output folder (found again on
every run), and those ``--build`` makes now with the project's own commands, each in
``<out>/artifacts/<dataset or paper>/<name>/`` with a record of what made it (:data:`BUILT`), which a later build
on other terms refuses."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import dspy

from multihop.data.paths import atomic_write_text
from multihop.lm import models
from multihop.programs.papers import Artifact, PaperTable
from multihop.retrievers.cross_encoder import resolve_cross_encoder

BUILT = "built.json"  # in an artifact's folder once it is made: what made it


def paper_artifacts(tables: Iterable[PaperTable]) -> dict[str, Artifact]:
    """Every artifact the rows (and the tables' encoders) of ``tables`` need, by name."""
    found: dict[str, Artifact] = {}
    for table in tables:
        for artifact in (*(need for row in table.rows for need in row.needs), table.encoder):
            if artifact is not None:
                found.setdefault(artifact.name, artifact)
    return found


def given_artifacts(given: Mapping[str, str | Path], known: Mapping[str, Artifact],
                    datasets: Sequence[str]) -> dict[tuple[str, str | None], Path]:
    """The ``--artifact`` values (``NAME`` or ``NAME@DATASET`` → folder, or a reranker's model: a folder or a Hub id,
    pinned to its commit, :func:`pinned_model`) by ``(name, dataset)``: a per-dataset artifact given without a dataset
    serves every dataset of ``datasets``. An unknown name or dataset, a folder that is not there or a model not found
    is refused in one line."""
    out: dict[tuple[str, str | None], Path] = {}
    for key, folder in given.items():
        name, _, dataset = str(key).partition("@")
        if name not in known:
            raise ValueError(f"--artifact {key}: the tables run need no artifact {name!r}; they need "
                             f"{', '.join(sorted(known)) or 'none'}")
        artifact = known[name]
        if dataset and not artifact.per_dataset:
            raise ValueError(f"--artifact {key}: {name} is made once for the paper; give it as {name}=DIR")
        if dataset and dataset not in datasets:
            raise ValueError(f"--artifact {key}: {dataset} is not run here ({', '.join(datasets)})")
        if artifact.kind == "reranker":
            folder = pinned_model(key, str(folder))
        elif not Path(folder).is_dir():
            raise ValueError(f"--artifact {key}: {folder} is no folder")
        for each in ([dataset] if dataset else datasets) if artifact.per_dataset else [None]:
            out[name, each] = Path(folder)
    return out


def pinned_model(key: str, model: str) -> str:
    """A reranker model given as ``--artifact KEY=MODEL``, found before any row runs: a folder as it is, a Hub id (in
    huggingface_hub's cache, downloaded there when online) pinned to the commit it resolved to
    (``org/name@<commit>``), so that the rows' settings name the model that ran; one not found is refused in one
    line."""
    try:
        _, commit = resolve_cross_encoder(model)
    except FileNotFoundError as exc:  # the Hub's HubModelError included
        raise ValueError(f"--artifact {key}: {exc}") from None
    return f"{model.partition('@')[0]}@{commit}" if commit and models.is_hub_id(model) else model


def artifact_folder(out: Path, artifact: Artifact, dataset: str | None) -> Path:
    """Where ``--build`` makes ``artifact`` (for ``dataset``) under a reproduction's output folder ``out``."""
    return Path(out) / "artifacts" / (dataset if artifact.per_dataset else "paper") / artifact.name


def built_record(artifact: Artifact, dataset: str | None, limit: int | None, encoder: str, lm: str) -> dict:
    """What a build of ``artifact`` is made with: its switches, the dataset and train questions, the encoder it
    starts from and the LM that ran in it."""
    return {"artifact": artifact.name, "kind": artifact.kind, "switches": list(artifact.switches), "dataset": dataset,
            "train_questions": limit, "encoder": encoder, "lm": lm}


def built_artifacts(out: Path, known: Mapping[str, Artifact], datasets: Sequence[str]) -> dict[tuple, Path]:
    """The artifacts an earlier ``--build`` made under ``out`` (their folders hold :data:`BUILT`)."""
    found = {}
    for artifact in known.values():
        for dataset in datasets if artifact.per_dataset else [None]:
            folder = artifact_folder(out, artifact, dataset)
            if (folder / BUILT).is_file():
                found[artifact.name, dataset] = folder
    return found


def build_missing(out: Path, needed: Iterable[tuple[Artifact, str | None]], have: Mapping[tuple, Path],
                  limit: int | None, encoder: str, progress: bool = True, console=None) -> dict[tuple, Path]:
    """Make each artifact of ``needed`` (with its dataset) that ``have`` lacks and that can be made here, on
    ``limit`` train questions with the LM DSPy is configured with; returns the folders made. One that cannot be
    made here is left (its rows say how to make it); a folder left by an interrupted build resumes; one built on
    other terms is refused in one line."""
    made = {}
    lm = str(getattr(dspy.settings.lm, "model", None))
    for artifact, dataset in dict.fromkeys(needed):
        if (artifact.name, dataset) in have or artifact.build is None:
            continue
        folder = artifact_folder(out, artifact, dataset)
        record = built_record(artifact, dataset, limit, encoder, lm)
        if (folder / BUILT).is_file():
            earlier = json.loads((folder / BUILT).read_text(encoding="utf-8"))
            if {key: earlier.get(key) for key in record} != record:
                raise ValueError(f"{folder} was built with {earlier}, not {record}: remove it, or build with its "
                                 "terms (--build-limit, --lm, --encoder)")
            made[artifact.name, dataset] = folder
            continue
        if console is not None:
            console.print(f"building {artifact.name}{f' for {dataset}' if dataset else ''} on "
                          f"{limit or 'all'} train questions → {folder}")
        start = time.perf_counter()
        folder.mkdir(parents=True, exist_ok=True)
        artifact.build(folder, dataset=dataset, limit=limit, encoder=encoder, progress=progress)
        record["seconds"] = round(time.perf_counter() - start, 1)
        atomic_write_text(folder / BUILT, json.dumps(record, indent=2))
        made[artifact.name, dataset] = folder
    return made
