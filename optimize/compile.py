"""Compile a program against a train split with a DSPy optimizer, and save/load it with a manifest.

A saved program is a folder: ``program.json`` (DSPy's ``save`` of the predictors' state: instructions and demos)
and ``manifest.json`` (program class and constructor config, the retriever folder, the LM spec, the optimizer and
its settings, the data file with its checksum, and the score before/after). :func:`load` rebuilds the program from
the manifest and loads the state; a state saved from another program class or config is refused.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import dspy

from multihop.metrics import dspy_metric
from multihop.paths import atomic_write_text

STATE, MANIFEST = "program.json", "manifest.json"


def compile_program(
    program: dspy.Module,
    trainset: list[dspy.Example],
    metric: str = "f1",
    max_bootstrapped_demos: int = 2,
    max_labeled_demos: int = 2,
    teacher_lm: dspy.LM | None = None,
) -> dspy.Module:
    """BootstrapFewShot: run the program on the train questions, keep the stage traces of the ones the metric accepts
    (score > 0) as demos, and fill up with labelled examples. The full optimizer set arrives with the optimize issue."""
    optimizer = dspy.BootstrapFewShot(
        metric=dspy_metric(metric),
        metric_threshold=1e-9,
        max_bootstrapped_demos=max_bootstrapped_demos,
        max_labeled_demos=max_labeled_demos,
        teacher_settings={"lm": teacher_lm} if teacher_lm else {},
    )
    return optimizer.compile(program, trainset=trainset)


def save(program: dspy.Module, directory: str | Path, **manifest) -> Path:
    """Save ``program``'s state and a manifest (class, config, plus any keyword given here)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    program.save(str(directory / STATE))
    info = {"program": type(program).__name__, "config": program.config(), **manifest}
    atomic_write_text(directory / MANIFEST, json.dumps(info, indent=2))
    return directory


def read_manifest(directory: str | Path) -> dict:
    path = Path(directory) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{directory} is not a saved multihop program ({MANIFEST} missing)")
    return json.loads(path.read_text())


def load(directory: str | Path, program: dspy.Module | None = None, retriever: dspy.Module | None = None):
    """Rebuild a saved program (or load the state into ``program``, which must be of the saved class and config)."""
    from multihop.programs import PROGRAMS

    directory = Path(directory)
    info = read_manifest(directory)
    if program is None:
        cls = PROGRAMS[info["program"]]
        kwargs = dict(info.get("config") or {})
        if "retriever" in inspect.signature(cls.__init__).parameters:
            if retriever is None and info.get("retriever"):
                from multihop.retrievers import load_retriever

                retriever = load_retriever(info["retriever"])
            kwargs["retriever"] = retriever
        program = cls(**kwargs)
    if type(program).__name__ != info["program"] or program.config() != info.get("config", {}):
        raise ValueError(
            f"{directory} holds a {info['program']} with config {info.get('config')}; it cannot be loaded into a "
            f"{type(program).__name__} with config {program.config()}"
        )
    program.load(str(directory / STATE))
    return program
