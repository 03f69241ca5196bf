"""Saved programs: a folder with DSPy's ``program.json`` (the predictors' state: instructions and demos) and
``manifest.json`` (the program class and its :meth:`~.base.MultihopProgram.config`, plus whatever the saver adds:
the retriever folder, the LM spec, the optimizer and its scores, the data files).

:func:`load` rebuilds the program from the manifest through the registry of program classes and loads the state;
a state saved from another program class or config is refused. Stored demos keep only their signature's fields:
a labelled demo drawn from the train split carries the whole example (its paragraphs, ids, aliases), which no
adapter shows and which would only bloat ``program.json``. Saving never changes the program saved: the trimmed demos
are written from a copy of its state.

Which way to save, when:

- ``multihop.save(program, folder, retriever=...)`` / ``multihop.load(folder)`` (this module): no pickle — JSON state
  plus a manifest naming the class and config, checked on load against the installed classes (a program saved by
  another version or config is refused) and against the folder's checksummed inventory; the retriever is rebuilt
  from its own saved folder. Portable across machines and versions of DSPy, and loads no code from the folder (a
  user's program class is imported from the installed packages and the current folder): use it to ship, share or
  archive a program; a stage LM it rebuilds is multihop's own engine with its saved endpoint.
- DSPy's own ``program.save("p.json")`` / ``program.load("p.json")`` on a program built the same way: the predictors'
  state only (instructions, demos), as for any ``dspy.Module``.
- DSPy's whole-program pickle, ``program.save(folder, save_program=True)`` / ``dspy.load(folder,
  allow_pickle=True)``: the program with its retriever inside (a BM25 index, a FAISS index as
  ``faiss.serialize_index`` bytes, token states, rerankers; an encoder's weights are loaded again from their path
  on first use; locks, threads and engines are rebuilt). Loading runs arbitrary code from the file: load only files
  you wrote or trust, on the same versions of Python, DSPy and multihop.
"""

from __future__ import annotations

import copy
import inspect
import json
from pathlib import Path

import dspy
import orjson

from multihop.data.folders import locked, verify_inventory, write_inventory
from multihop.data.paths import atomic_write_text, read_json
from multihop.evaluation.runner import require_module

from .base import MultihopProgram, qualified_name, takes_retriever
from .registry import PROGRAMS, import_path

STATE, MANIFEST = "program.json", "manifest.json"
ENGINE_KEYS = ("engine", "async_engine")  # where a saved DSPy LM records its engines (class and state)


def trimmed_demos(predictor) -> list[dspy.Example]:
    """``predictor``'s demos with only its signature's fields (inputs and outputs), less those left with no output
    field (the adapters show a demo only with an input and an output); new examples, the predictor's untouched."""
    signature = predictor.signature
    trimmed = [{k: demo[k] for k in signature.fields if k in demo} for demo in predictor.demos]
    return [dspy.Example(demo) for demo in trimmed if demo.keys() & signature.output_fields.keys()]


def trim_demos(program: dspy.Module) -> dspy.Module:
    """Keep only each demo's signature fields, in place (:func:`trimmed_demos`); returns the program."""
    for _, predictor in program.named_predictors():
        predictor.demos = trimmed_demos(predictor)
    return program


def trimmed_state(program: dspy.Module) -> dict:
    """``program.dump_state()`` with each predictor's demos trimmed (:func:`trimmed_demos`), the program untouched,
    plus DSPy's ``metadata`` (its dependency versions), as ``Module.save`` writes it. Each parameter's state is its
    ``dump_state(json_mode=True)``, or its ``dump_state()`` where it takes no ``json_mode``: ``dspy.Retrieve``'s, which
    ``program.dump_state()`` passes one and fails on (DSPy 3.4's ``Retrieve.dump_state``)."""
    from dspy.utils.saving import get_dependency_versions

    state = {name: parameter.dump_state(json_mode=True)
             if "json_mode" in inspect.signature(parameter.dump_state).parameters else parameter.dump_state()
             for name, parameter in program.named_parameters()}
    for name, predictor in program.named_predictors():
        twin = copy.copy(predictor)  # a shallow copy: its demos are serialised as the predictor's own would be
        twin.demos = trimmed_demos(predictor)
        state[name]["demos"] = twin.dump_state()["demos"]
    state["metadata"] = {"dependency_versions": get_dependency_versions()}
    return state


def save(program: dspy.Module, directory: str | Path, **manifest) -> Path:
    """Save ``program``'s state (its demos trimmed to what a prompt shows, the program itself unchanged:
    :func:`trimmed_state`) and a manifest (class, config, plus any keyword given here, such as the ``retriever``
    folder :func:`load` rebuilds the retriever from, kept as an absolute path so the folder loads from anywhere); a
    user's program records its ``import_path`` (:func:`~.registry.import_path`), which :func:`load` imports when no
    program of its name is registered. ``program`` is a multihop program or any ``dspy.Module`` whose class can be
    imported again (:func:`module_config` says what of a plain module's constructor settings is recorded); another is
    refused in one line before anything is written."""
    require_module(program, "save")
    if not isinstance(program, MultihopProgram):
        refuse_unloadable(type(program))
    config, unrecorded = module_config(program)
    directory = Path(directory)
    with locked(directory):
        state = orjson.dumps(trimmed_state(program), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        atomic_write_text(directory / STATE, state.decode())
        if manifest.get("retriever") is not None and Path(manifest["retriever"]).exists():
            manifest = {**manifest, "retriever": str(Path(manifest["retriever"]).resolve())}
        info = {"program": type(program).__name__, "config": config, **manifest}
        if unrecorded:
            info["unrecorded_settings"] = unrecorded
        path = import_path(type(program))
        if path:  # a user's program: load imports it again
            info["import_path"] = path
        atomic_write_text(directory / MANIFEST, json.dumps(info, indent=2))
        write_inventory(directory)
        return directory


def refuse_unloadable(cls: type) -> None:
    """Refuse, in one line, to save a plain ``dspy.Module`` that :func:`load` could not rebuild: its class cannot be
    imported again (one of ``__main__``, or defined in a function), or another registered program has its name."""
    if import_path(cls) is None:
        raise TypeError(f"save: {cls.__qualname__} is defined in {cls.__module__}, which load cannot import again: "
                        "define it in a module (package.module:ClassName), or save its state alone with "
                        "program.save(path)")
    known = PROGRAMS[cls.__name__] if cls.__name__ in PROGRAMS else None
    if known is not None and getattr(known, "__wrapped_module__", None) is not cls:
        raise TypeError(f"save: a program named {cls.__name__} is registered already ({qualified_name(known)}); "
                        "rename the class")


def module_config(program: dspy.Module) -> tuple[dict, list[str]]:
    """The constructor settings of ``program`` that :func:`save` records, and those it could not: a multihop
    program's :meth:`~.base.MultihopProgram.config` (each setting read from its attribute or its recorded constructor
    call), nothing left out. A plain ``dspy.Module``, built with no call multihop saw, records each ``__init__``
    parameter from the attribute of its name, else its default, which is then listed as unrecorded (a setting DSPy
    keeps in the state, such as a ``dspy.Retrieve``'s ``k``, is restored with it on load); a setting with neither
    attribute nor default is a one-line ``TypeError``."""
    if isinstance(program, MultihopProgram):
        return program.config(), []
    cls = type(program)
    parameters = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name not in ("self", "retriever")
                  and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    missing = [p.name for p in parameters if not hasattr(program, p.name) and p.default is p.empty]
    if missing:
        raise TypeError(f"save: {cls.__name__} keeps no attribute for its constructor setting(s) {missing}, which "
                        "have no default: store each as self.<name>")
    config = {p.name: getattr(program, p.name) if hasattr(program, p.name) else p.default for p in parameters}
    return config, [p.name for p in parameters if not hasattr(program, p.name)]


def read_manifest(directory: str | Path) -> dict:
    path = Path(directory) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{directory} is not a saved multihop program ({MANIFEST} missing)")
    return read_json(path)


def load(directory: str | Path, program: dspy.Module | None = None, retriever: dspy.Module | None = None):
    """Rebuild a saved program (or load the state into ``program``, which must be of the saved class and config).
    The retriever is ``retriever``, else the folder the manifest names. A plain ``dspy.Module`` saved by its import
    path comes back as a multihop program of its class (:meth:`~.registry.ProgramRegistry.imported`: traced, its
    ``forward`` its own), built with the recorded settings (an unrecorded one at its default) and the saved state.

    A stage set on an LM of its own (``set_stage_lm``, a student) comes back on it: DSPy refuses a saved LM whose
    engine class it would import unless told the file is trusted, and a state whose every saved engine is one of
    multihop's (:mod:`multihop.lm.engines`) is loaded as trusted, with the LM's endpoint; any other engine class is
    refused as DSPy refuses it."""
    directory = Path(directory)
    info = read_manifest(directory)
    verify_inventory(directory)
    if info["program"] not in PROGRAMS and info.get("import_path"):
        PROGRAMS.imported(info["import_path"])  # a user's program, importable here (never code from the folder)
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
    config = module_config(program)[0]
    if type(program).__name__ != info["program"] or config != saved:
        raise ValueError(
            f"{directory} holds a {info['program']} with config {info.get('config')}; it cannot be loaded into a "
            f"{type(program).__name__} with config {config}"
        )
    program.load(str(directory / STATE), allow_unsafe_lm_state=only_our_engines(read_json(directory / STATE)))
    return program


def only_our_engines(state) -> bool:
    """Whether the LMs ``state`` (a saved program's JSON) holds are multihop's own and nothing else: at least one LM
    whose engine is one of :mod:`multihop.lm.engines`, every LM of DSPy's own class with such an engine, and no
    endpoint (``api_base``, ``base_url``, ``model_list``) on an LM without one. Only then may :func:`load` rebuild
    them with their endpoints; any other saved LM is left to DSPy's refusal."""
    lms = []

    def walk(node):
        if isinstance(node, dict):
            lm = bool({"_dspy_lm_class", "engine", "api_base", "base_url", "model_list"} & set(node))
            if lm:
                lms.append(node)
            for key, value in node.items():
                if not (lm and key in ENGINE_KEYS):  # an engine's own state (its endpoint) is the engine's
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    def ours(lm: dict) -> bool:
        engines = [lm.get(key) for key in ENGINE_KEYS if key in lm]
        return (lm.get("_dspy_lm_class", "dspy.clients.lm.LM") == "dspy.clients.lm.LM" and "engine" in lm
                and all(isinstance(engine, dict) and str(engine.get("class", "")).startswith("multihop.lm.engines.")
                        for engine in engines))

    walk(state)
    return bool(lms) and all(ours(lm) for lm in lms)
