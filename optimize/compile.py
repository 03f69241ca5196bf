"""Compile a program against a train split with any of DSPy's optimizers.

The compiled program's demos keep only their signature's fields (``multihop.programs.saved.trim_demos``); save it
with ``multihop.programs.save``, which records the report returned here in the manifest.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import dspy

from multihop.evaluation.metrics import dspy_metric
from multihop.programs.saved import trim_demos

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
                   seed: int = 0, threads: int = 1, **settings) -> tuple[Any, dict]:
    """The DSPy teleprompter called ``name`` and the keyword arguments its ``compile`` takes beyond the sets; the
    optimizers that evaluate candidates in threads (random-search, mipro, simba, gepa) run ``threads`` at once (at
    1, their own default: DSPy's settings)."""
    score = dspy_metric(metric)
    parallel = {"num_threads": threads} if threads > 1 else {}
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
                                                     **parallel, **demos, **settings), {}
    if name == "mipro":
        settings.setdefault("auto", "light")
        return dspy.MIPROv2(metric=score, prompt_model=prompt_lm, teacher_settings=teacher, seed=seed,
                            **parallel, **demos, **settings), {"seed": seed}
    if name == "simba":
        settings.setdefault("bsize", 8)
        return dspy.SIMBA(metric=score, prompt_model=prompt_lm, teacher_settings=teacher, **parallel,
                          **settings), {"seed": seed}
    if name == "gepa":
        settings.setdefault("auto", "light")
        reflection = prompt_lm or dspy.settings.lm
        return dspy.GEPA(metric=gepa_metric(metric), reflection_lm=reflection, seed=seed, **parallel,
                         **settings), {}
    raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")


def validation_score(program: dspy.Module, examples: list[dspy.Example], metric: str, threads: int = 1) -> float:
    """Mean metric over ``examples`` (0–100), with DSPy's ``Evaluate`` running ``threads`` questions at once (each
    in the caller's DSPy settings; the score is the serial one)."""
    evaluate = dspy.Evaluate(devset=examples, metric=dspy_metric(metric), num_threads=threads,
                             display_progress=False)
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
    threads: int = 1,
    **settings,
) -> dspy.Module:
    """Compile ``program`` with one of :data:`OPTIMIZERS` and return the compiled program, as DSPy's ``compile``
    does, with its report as ``compiled.compile_report``: optimizer, settings, metric, seed, and the validation score
    before and after (on ``valset`` when given). A compile that leaves the score where it was says so in
    ``report["unchanged"]`` and a warning. ``threads`` questions run at once in the validation and in the optimizers
    that evaluate in threads (for a served LM); a speed setting, it is not in the report."""
    random.seed(seed)
    teleprompter, compile_kwargs = make_optimizer(optimizer, metric, teacher_lm, prompt_lm, seed, threads,
                                                  **dict(settings))
    if optimizer in ("random-search", "mipro", "gepa") and valset:
        compile_kwargs["valset"] = valset
    report = {"optimizer": optimizer, "settings": settings, "metric": metric, "seed": seed}
    if valset:
        report["val_before"] = validation_score(program, valset, metric, threads)
    compiled = trim_demos(teleprompter.compile(program, trainset=trainset, **compile_kwargs))
    if valset:
        report["val_after"] = validation_score(compiled, valset, metric, threads)
        report["unchanged"] = report["val_after"] == report["val_before"]
        if report["unchanged"]:
            logger.warning("%s left the validation %s at %.1f: the metric never changed", optimizer, metric,
                           report["val_after"])
    compiled.compile_report = report
    return compiled
