"""Compile a program against a train split with any of DSPy's optimizers, and save/load it with a manifest.

A saved program is a folder: ``program.json`` (DSPy's ``save`` of the predictors' state: instructions and demos)
and ``manifest.json`` (program class and constructor config, the retriever folder, the LM spec, the optimizer and
its settings, the data file with its checksum, and the score before/after). :func:`load` rebuilds the program from
the manifest and loads the state; a state saved from another program class or config is refused.
"""

from __future__ import annotations

import inspect
import json
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dspy

from multihop.metrics import dspy_metric
from multihop.paths import atomic_write_text

STATE, MANIFEST = "program.json", "manifest.json"
logger = logging.getLogger(__name__)


OPTIMIZERS = ("labeled", "bootstrap", "random-search", "mipro", "simba", "gepa")


def gepa_metric(name: str) -> Callable:
    """GEPA's five-argument feedback metric over one of our metrics: the score plus a sentence that tells the
    reflection LM what was expected and what came out (GEPA reads the feedback, the other optimizers the score)."""
    score_of = dspy_metric(name)

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        score = float(score_of(gold, pred))
        if name.startswith("recall@"):
            found = set(pred.get("passage_ids") or pred.get("ids") or []) & set(gold.gold_passage_ids)
            feedback = f"{name} = {score:.2f}: {len(found)} of {len(gold.gold_passage_ids)} gold passages retrieved."
        else:
            feedback = (f"{name} = {score:.2f}. Expected one of {list(gold.answers)!r}; "
                        f"the program answered {getattr(pred, 'answer', '')!r}.")
        return dspy.Prediction(score=score, feedback=feedback)

    return metric


def make_optimizer(name: str, metric: str, teacher_lm: dspy.LM | None = None, prompt_lm: dspy.LM | None = None,
                   seed: int = 0, **settings) -> tuple[Any, dict]:
    """The DSPy teleprompter called ``name`` and the keyword arguments its ``compile`` takes beyond the sets."""
    score = dspy_metric(metric)
    teacher = {"lm": teacher_lm} if teacher_lm else {}
    demos = {"max_bootstrapped_demos": settings.pop("max_bootstrapped_demos", 2),
             "max_labeled_demos": settings.pop("max_labeled_demos", 2)}
    if name == "labeled":
        return dspy.LabeledFewShot(k=settings.pop("k", demos["max_labeled_demos"]), **settings), {}
    if name == "bootstrap":
        return dspy.BootstrapFewShot(metric=score, metric_threshold=1e-9, teacher_settings=teacher, **demos,
                                     **settings), {}
    if name == "random-search":
        settings.setdefault("num_candidate_programs", 4)
        return dspy.BootstrapFewShotWithRandomSearch(metric=score, metric_threshold=1e-9, teacher_settings=teacher,
                                                     **demos, **settings), {}
    if name == "mipro":
        settings.setdefault("auto", "light")
        return dspy.MIPROv2(metric=score, prompt_model=prompt_lm, teacher_settings=teacher, seed=seed, **demos,
                            **settings), {"seed": seed}
    if name == "simba":
        settings.setdefault("bsize", 8)
        return dspy.SIMBA(metric=score, prompt_model=prompt_lm, teacher_settings=teacher, **settings), {"seed": seed}
    if name == "gepa":
        settings.setdefault("auto", "light")
        reflection = prompt_lm or dspy.settings.lm
        return dspy.GEPA(metric=gepa_metric(metric), reflection_lm=reflection, seed=seed, **settings), {}
    raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")


def validation_score(program: dspy.Module, examples: list[dspy.Example], metric: str) -> float:
    """Mean metric over ``examples`` (0–100), with DSPy's ``Evaluate``."""
    evaluate = dspy.Evaluate(devset=examples, metric=dspy_metric(metric), num_threads=1, display_progress=False)
    return float(evaluate(program).score)


def compile_program(
    program: dspy.Module,
    trainset: list[dspy.Example],
    optimizer: str = "bootstrap",
    metric: str = "f1",
    valset: list[dspy.Example] | None = None,
    teacher_lm: dspy.LM | None = None,
    prompt_lm: dspy.LM | None = None,
    seed: int = 0,
    **settings,
) -> tuple[dspy.Module, dict]:
    """Compile ``program`` with one of :data:`OPTIMIZERS` and return it with a report: optimizer, settings, metric,
    seed, and the validation score before and after (on ``valset`` when given). A compile that leaves the score
    where it was says so in ``report["unchanged"]`` and a warning."""
    random.seed(seed)
    teleprompter, compile_kwargs = make_optimizer(optimizer, metric, teacher_lm, prompt_lm, seed, **dict(settings))
    if optimizer in ("random-search", "mipro", "gepa") and valset:
        compile_kwargs["valset"] = valset
    report = {"optimizer": optimizer, "settings": settings, "metric": metric, "seed": seed}
    if valset:
        report["val_before"] = validation_score(program, valset, metric)
    compiled = teleprompter.compile(program, trainset=trainset, **compile_kwargs)
    if valset:
        report["val_after"] = validation_score(compiled, valset, metric)
        report["unchanged"] = report["val_after"] == report["val_before"]
        if report["unchanged"]:
            logger.warning("%s left the validation %s at %.1f: the metric never changed", optimizer, metric,
                           report["val_after"])
    return compiled, report


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
