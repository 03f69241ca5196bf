"""What every multihop program shares (DESIGN.md, "The contract every program keeps").

A :class:`MultihopProgram` records a :class:`~multihop.tracing.Trace` around each call, and returns the prediction
with its stage records (``prediction.stage_trace``) and per-question counts (``prediction.counts``: ``llm_calls``,
``retrieval_calls``, ``tokens``, ``passage_ids`` and every event the program counted with
:func:`multihop.tracing.count`). Its constructor settings are its ``__init__`` parameters, read back by
:meth:`~MultihopProgram.config`, so a new switch is one parameter kept as an attribute of the same name. Every
subclass registers itself by class name (:data:`PROGRAMS`), which is how a saved program is rebuilt. It also gives
every stage its own LM (``set_stage_lm``) and the retriever lookup that DSPy's own ``Retrieve`` uses (the
constructor's, else ``dspy.settings.rm``).
"""

from __future__ import annotations

import inspect
import logging
from typing import ClassVar

import dspy
from dspy.utils.exceptions import AdapterParseError

from multihop.tracing import TracedPrediction, count, record_trace

logger = logging.getLogger(__name__)

PROGRAMS: dict[str, type[MultihopProgram]] = {}
DISPLAYS = ("rate", "mean")


def takes_retriever(cls: type) -> bool:
    """Whether a program class is built with a retriever (a ``retriever`` constructor parameter)."""
    return "retriever" in inspect.signature(cls.__init__).parameters


class MultihopProgram(dspy.Module):
    """Base class of the five methods and the baselines.

    ``count_display`` maps an event the program counts to how evaluation tables show it: ``"rate"`` (a share of
    questions, in percent) or ``"mean"`` (per question). Evaluation keeps it in the summary and shows the declared
    counts in its default table; a count not declared is in the summary only.
    """

    count_display: ClassVar[dict[str, str]] = {}
    special_tokens: ClassVar[tuple[str, ...]] = ()  # markers the program writes into its queries, which the encoder of
    # an index built for it keeps whole (``multihop index build --markers PROGRAM``; an index built on the fly for it)
    index_pooling: ClassVar[str] = "mean"  # the first-stage pooling of an index built for it (same two ways)
    first_stage: ClassVar[str] = "dense"  # the first stage of an index built for it on the fly: dense or bm25

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        unknown = {name: display for name, display in cls.count_display.items() if display not in DISPLAYS}
        if unknown:
            raise TypeError(f"{cls.__name__}.count_display: {unknown} is not one of {', '.join(DISPLAYS)}")
        known = PROGRAMS.get(cls.__name__)
        if known is not None and _qualified(known) != _qualified(cls):
            raise TypeError(f"a program named {cls.__name__} is registered already ({_qualified(known)}); saved "
                            "programs and --program find programs by name: rename the class")
        PROGRAMS[cls.__name__] = cls

    def __init__(self, retriever: dspy.Module | None = None):
        super().__init__()
        self.retriever = retriever

    def __call__(self, *args, **kwargs) -> TracedPrediction:
        own_usage = dspy.settings.track_usage and dspy.settings.get("usage_tracker") is None
        with record_trace(self) as trace:
            prediction = super().__call__(*args, **kwargs)
        return TracedPrediction.from_trace(prediction, trace, with_usage=own_usage)

    @property
    def rm(self) -> dspy.Module:
        retriever = self.retriever if self.retriever is not None else dspy.settings.rm
        if retriever is None:
            raise ValueError(f"{type(self).__name__} needs a retriever: pass retriever=... or dspy.configure(rm=...)")
        return retriever

    def run_stage(self, predictor: dspy.Module, fallback: dict, retries: int = 0, **inputs) -> dspy.Prediction:
        """Call one LLM stage. A reply the adapter cannot parse is retried once by DSPy itself when the adapter is the
        ChatAdapter (it re-asks in JSON format), and ``retries`` more times here, sampled (temperature 1.0, a fresh
        rollout id so the cache does not replay the failure). When the stage still fails, it returns ``fallback``
        with ``failed=True`` instead of crashing the question; the trace records each error (``stage_errors``) and
        counts the fallback taken (``fallbacks``)."""
        for attempt in range(retries + 1):
            config = {"rollout_id": attempt, "temperature": 1.0} if attempt else {}
            try:
                return predictor(**inputs, **({"config": config} if config else {}))
            except AdapterParseError as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        logger.warning("%s: unparsable LM output, using fallback %s (%s)", type(self).__name__, fallback, reason)
        count("fallbacks")
        return dspy.Prediction(**fallback, failed=True)

    def prepare_examples(self, examples: list[dspy.Example]) -> list[dspy.Example]:
        """The examples as this program reads them, which evaluation applies before running: themselves, unless the
        program takes more of their annotations as inputs."""
        return list(examples)

    def trajectory_complete(self, prediction: dspy.Prediction) -> bool:
        """Whether a teacher's run is a complete trajectory to distil (``multihop trajectories --complete-only``):
        any run, unless the program's method defines completeness."""
        return True

    def stage_names(self) -> list[str]:
        return [name for name, _ in self.named_predictors()]

    def set_stage_lm(self, name: str, lm) -> None:
        """Run one stage on its own LM. ``name`` is a predictor path (``answer.predict``) or its first part
        (``answer``), which sets every predictor under it."""
        matched = [p for n, p in self.named_predictors() if n == name or n.split(".")[0] == name]
        if not matched:
            raise KeyError(f"{type(self).__name__} has no stage {name!r}; stages: {', '.join(self.stage_names())}")
        for predictor in matched:
            predictor.set_lm(lm)

    @classmethod
    def settings(cls) -> list[str]:
        """The constructor settings that define a program of this class: its ``__init__`` parameters but the
        retriever."""
        parameters = inspect.signature(cls.__init__).parameters.values()
        return [p.name for p in parameters if p.name not in ("self", "retriever")
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    def config(self) -> dict:
        """The constructor settings of this program, read from the attributes named like the parameters (saved next
        to a compiled program's state, and compared when it is loaded)."""
        missing = [name for name in self.settings() if not hasattr(self, name)]
        if missing:
            raise TypeError(f"{type(self).__name__} keeps no attribute for its constructor setting(s) {missing}: "
                            "store each setting as self.<name>")
        return {name: getattr(self, name) for name in self.settings()}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
