"""Saved programs: a folder with DSPy's ``program.json`` (the predictors' state: instructions and demos) and
``manifest.json`` (the program class and its :meth:`~.base.MultihopProgram.config`, plus whatever the saver adds:
the retriever folder, the LM spec, the optimizer and its scores, the data files).

:func:`load` rebuilds the program from the manifest through the registry of program classes and loads the state;
a state saved from another program class or config is refused. Stored demos keep only their signature's fields:
a labelled demo drawn from the train split carries the whole example (its paragraphs, ids, aliases), which no
adapter shows and which would only bloat ``program.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import dspy

from multihop.data.folders import locked, verify_inventory, write_inventory
from multihop.data.paths import atomic_write_text, read_json
from multihop.evaluation.runner import require_module

from .base import PROGRAMS, MultihopProgram, takes_retriever

STATE, MANIFEST = "program.json", "manifest.json"


def trim_demos(program: dspy.Module) -> dspy.Module:
    """Keep only each demo's signature fields (inputs and outputs), in place, and drop demos left with no output
    field (the adapters show a demo only with an input and an output); returns the program."""
    for _, predictor in program.named_predictors():
        signature = predictor.signature
        trimmed = [{k: demo[k] for k in signature.fields if k in demo} for demo in predictor.demos]
        predictor.demos = [dspy.Example(demo) for demo in trimmed if demo.keys() & signature.output_fields.keys()]
    return program


def save(program: MultihopProgram, directory: str | Path, **manifest) -> Path:
    """Save ``program``'s state (its demos trimmed, in place, to what a prompt shows: :func:`trim_demos`) and a
    manifest (class, config, plus any keyword given here, such as the ``retriever`` folder :func:`load` rebuilds
    the retriever from)."""
    require_module(program, "save")
    directory = Path(directory)
    with locked(directory):
        trim_demos(program).save(str(directory / STATE))
        info = {"program": type(program).__name__, "config": program.config(), **manifest}
        atomic_write_text(directory / MANIFEST, json.dumps(info, indent=2))
        write_inventory(directory)
        return directory


def read_manifest(directory: str | Path) -> dict:
    path = Path(directory) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{directory} is not a saved multihop program ({MANIFEST} missing)")
    return read_json(path)


def load(directory: str | Path, program: MultihopProgram | None = None, retriever: dspy.Module | None = None):
    """Rebuild a saved program (or load the state into ``program``, which must be of the saved class and config).
    The retriever is ``retriever``, else the folder the manifest names."""
    directory = Path(directory)
    info = read_manifest(directory)
    verify_inventory(directory)
    if info["program"] not in PROGRAMS:
        raise ValueError(f"{directory} holds a {info['program']}, which is no known program ({', '.join(PROGRAMS)})")
    saved_class, saved = PROGRAMS[info["program"]], info.get("config") or {}
    changed = sorted(set(saved) ^ set(saved_class.settings()))
    if changed:
        raise ValueError(f"{directory} was saved by another version of multihop: the settings of {info['program']} "
                         f"differ in {', '.join(changed)}; compile and save it again")
    if program is None:
        cls = saved_class
        kwargs = cls.typed_settings(saved)
        if takes_retriever(cls):
            if retriever is None and info.get("retriever"):
                from multihop.retrievers import load_retriever

                retriever = load_retriever(info["retriever"])
            kwargs["retriever"] = retriever
        program = cls(**kwargs)
    if type(program).__name__ != info["program"] or program.config() != saved:
        raise ValueError(
            f"{directory} holds a {info['program']} with config {info.get('config')}; it cannot be loaded into a "
            f"{type(program).__name__} with config {program.config()}"
        )
    program.load(str(directory / STATE))
    return program
