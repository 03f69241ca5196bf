"""What every multihop program shares (docs/design.md, "The contract every program keeps").

A :class:`MultihopProgram` records a :class:`~multihop.runtime.tracing.Trace` around each call, and returns the
prediction with its stage records (``prediction.stage_trace``) and per-question counts (``prediction.counts``:
``llm_calls``, ``retrieval_calls``, ``tokens``, ``passage_ids`` and every event the program counted with
:func:`multihop.runtime.tracing.count`). Its constructor settings are its ``__init__`` parameters, read back by
:meth:`~MultihopProgram.config` from the attributes of the same names, or, for one kept as no attribute, from the
constructor call (every program records it), so a new switch is one parameter. Every subclass registers itself by
class name in :data:`PROGRAM_CLASSES` (an abstract base says ``register=False``), which is how a saved program is
rebuilt; :data:`~.registry.PROGRAMS` reads it and adds each program's declaration. It also gives every stage its own
LM (``set_stage_lm``) and the retriever lookup that DSPy's own ``Retrieve`` uses (the constructor's, else
``dspy.settings.rm``): a multihop retriever, or a DSPy one or any function returning passages, searched through its
adapter (:func:`multihop.retrievers.as_retriever`).

The helpers every method builds on, so no method reaches retrieval, stages or fallbacks its own way:

- :meth:`~MultihopProgram.add_stages` creates the stages a configuration uses (``dspy.Predict`` over a signature,
  with their demos), so ``named_predictors()`` follows the switches;
- :meth:`~MultihopProgram.run_stage` calls a stage with one retry and a documented fallback, counting
  ``<stage>.fallback`` (0 or 1 a call) and the total ``fallbacks``;
- :meth:`~MultihopProgram.search` and :meth:`~MultihopProgram.rerank_hits` are the one doorway to retrieval: a
  program with a ``rerank`` switch (a name of :data:`multihop.retrievers.RERANKERS`, or None) searches its
  retriever's first stage for the top ``n`` and reranks them to ``k`` with that reranker, bound to the first stage
  (its encoder and token cache); one without it searches its retriever as it is. Every rerank is a ``rerank`` record
  of the stage trace.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import threading
from typing import ClassVar

import dspy
from dspy.utils.exceptions import AdapterParseError

from multihop.lm.adapter import default_adapter
from multihop.retrievers import RerankedRetriever, as_retriever, make_reranker
from multihop.retrievers.query import Hits, pick
from multihop.runtime.parallel import concurrency, fan_out
from multihop.runtime.tracing import TracedModule, count

from .switches import typed

logger = logging.getLogger(__name__)

DISPLAYS = ("rate", "mean")

PROGRAM_CLASSES: dict[str, type] = {}
"""Every registered program class by its name, added as the class is defined (:meth:`MultihopProgram.__init_subclass__`)
or imported by its path (:meth:`~.registry.ProgramRegistry.imported`); read through :data:`~.registry.PROGRAMS`."""


def qualified_name(cls: type) -> str:
    """``module.QualifiedName`` of a class: two classes of one name are the same program when this is equal (a module
    imported again, a notebook cell run again)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def add_program_class(cls: type) -> None:
    """Register a program class by its name in :data:`PROGRAM_CLASSES`; another class of the same name is refused
    (saved programs and ``--program`` find programs by name)."""
    known = PROGRAM_CLASSES.get(cls.__name__)
    if known is not None and qualified_name(known) != qualified_name(cls):
        raise TypeError(f"a program named {cls.__name__} is registered already ({qualified_name(known)}); saved "
                        "programs and --program find programs by name: rename the class")
    PROGRAM_CLASSES[cls.__name__] = cls


def takes_retriever(cls: type) -> bool:
    """Whether a program class is built with a retriever (a ``retriever`` constructor parameter)."""
    return "retriever" in inspect.signature(cls.__init__).parameters


def stage_adapter(predictor: dspy.Module):
    """A context in which ``predictor`` runs under its LM's default adapter
    (:func:`multihop.lm.adapter.default_adapter`) when no adapter is configured; a context that changes nothing when
    one is, or when that default is DSPy's own ``ChatAdapter``, which DSPy runs an unconfigured predictor under
    anyway."""
    if dspy.settings.adapter is not None:
        return contextlib.nullcontext()
    lm = next((p.lm for _, p in predictor.named_predictors() if p.lm is not None), None) or dspy.settings.lm
    adapter = default_adapter(lm)
    return contextlib.nullcontext() if type(adapter) is dspy.ChatAdapter else dspy.context(adapter=adapter)


class ConstructorCall:
    """The settings a program was built with, as its constructor was called (each of
    :meth:`MultihopProgram.settings` with its default when the call left it out). Not a dict, so DSPy's walks of a
    module (its predictors, its state) pass it by."""

    __slots__ = ("arguments",)

    def __init__(self, arguments: dict):
        self.arguments = arguments


class RecordedConstruction(type(dspy.Module)):
    """DSPy's metaclass of modules, also keeping each program's constructor call (:class:`ConstructorCall`) as its
    ``constructed_with``, which :meth:`MultihopProgram.config` reads for a setting kept as no attribute."""

    def __call__(cls, *args, **kwargs):
        program = super().__call__(*args, **kwargs)
        try:
            bound = inspect.signature(cls.__init__).bind(program, *args, **kwargs)
        except TypeError:  # a constructor that takes more than its signature says: nothing recorded
            return program
        bound.apply_defaults()
        settings = set(cls.settings())
        program.__dict__.setdefault("constructed_with", ConstructorCall(
            {name: value for name, value in bound.arguments.items() if name in settings}))
        return program


class MultihopProgram(TracedModule, metaclass=RecordedConstruction):
    """Base class of the five methods and the baselines.

    ``count_display`` maps an event the program counts to how evaluation tables show it: ``"rate"`` (a share of
    questions, in percent) or ``"mean"`` (per question). Evaluation keeps it in the summary and shows the declared
    counts in its default table; a count not declared is in the summary only.
    """

    count_display: ClassVar[dict[str, str]] = {}
    special_tokens: ClassVar[tuple[str, ...]] = ()  # markers the program writes into its queries, which the encoder of
    # an index built for it keeps whole (``multihop index build --markers PROGRAM``; an index built on the fly for it)
    index_pooling: ClassVar[str] = "mean"  # the first-stage pooling of an index built for it (same two ways)
    inner_threads: int | None = None  # independent calls of one question run at once (fan_out); None: by the LM
    stage_prefix: str = ""  # a program run as a part of another counts its stages under its path there ("multi_step.")

    def __init_subclass__(cls, register: bool = True, **kwargs):
        """Register the subclass by its name, unless it is an abstract base (``class Base(MultihopProgram,
        register=False)``), which no command offers as a program."""
        super().__init_subclass__(**kwargs)
        unknown = {name: display for name, display in cls.count_display.items() if display not in DISPLAYS}
        if unknown:
            raise TypeError(f"{cls.__name__}.count_display: {unknown} is not one of {', '.join(DISPLAYS)}")
        if register:
            add_program_class(cls)

    def __init__(self, retriever: dspy.Module | None = None):
        super().__init__()
        self.retriever = retriever
        self._searchers = _Searchers()

    @classmethod
    def typed_settings(cls, settings: dict) -> dict:
        """``settings`` (a saved config, ``--set`` switches) coerced to the constructor's annotations
        (:func:`.switches.typed`); a value that does not fit is a ``SwitchTypeError`` naming the switch and its
        type."""
        return typed(cls, settings)

    @property
    def rm(self) -> dspy.Module:
        retriever = self.retriever if self.retriever is not None else dspy.settings.rm
        if retriever is None:
            raise ValueError(f"{type(self).__name__} needs a retriever: pass retriever=... or dspy.configure(rm=...)")
        return retriever

    def add_stages(self, demos: dict[str, list[dspy.Example]] | None = None, **stages: type[dspy.Signature] | None
                   ) -> None:
        """Create each stage ``name=Signature`` as a ``dspy.Predict`` attribute of that name, with a copy of
        ``demos[name]`` as its demos; a stage given None is not created (its switch is off), so
        ``named_predictors()`` lists the stages this configuration runs."""
        for name, signature in stages.items():
            if signature is not None:
                predictor = dspy.Predict(signature)
                predictor.demos = [demo.copy() for demo in (demos or {}).get(name, [])]
                setattr(self, name, predictor)

    def run_stage(self, predictor: dspy.Module, fallback: dict, retries: int = 0, **inputs) -> dspy.Prediction:
        """Call one LLM stage. A reply the adapter cannot parse is retried once by DSPy itself when the adapter is the
        ChatAdapter (it re-asks in JSON format), and ``retries`` more times here, sampled (temperature 1.0, a fresh
        rollout id so the cache does not replay the failure). When the stage still fails, it returns ``fallback``
        with ``failed=True`` instead of crashing the question; the trace records each error (``stage_errors``).
        Every call counts ``<stage>.fallback`` (1 when the fallback was taken, else 0, so the count is there for
        every stage that ran) and each fallback taken adds to ``fallbacks``. With no adapter configured
        (``dspy.configure(lm=multihop.make_lm(...))`` alone), a stage on a multihop LM runs under that LM's default
        adapter (:func:`stage_adapter`: its engine then decodes under the stage's schema from the first attempt)
        instead of DSPy's ChatAdapter."""
        stage = self.stage_name(predictor)
        for attempt in range(retries + 1):
            config = {"rollout_id": attempt, "temperature": 1.0} if attempt else {}
            try:
                with stage_adapter(predictor):
                    result = predictor(**inputs, **({"config": config} if config else {}))
            except AdapterParseError as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            else:
                count(f"{stage}.fallback", 0)
                return result
        logger.warning("%s: unparsable LM output, using fallback %s (%s)", type(self).__name__, fallback, reason)
        count(f"{stage}.fallback")
        count("fallbacks")
        return dspy.Prediction(**fallback, failed=True)

    def fan_out(self, fn, items) -> list:
        """``[fn(item) for item in items]`` for calls the method makes independently of each other (a judgment per
        passage, an extraction per document), run at once: ``inner_threads`` of them, or by default as many as the
        LMs take (:func:`multihop.runtime.parallel.concurrency`: 8 for a served LM, 1 for an in-process engine, which
        runs one call at a time). Results, stage records and counts are those of the serial loop, in its order
        (:func:`multihop.runtime.parallel.fan_out`). ``inner_threads`` is not a setting of the method: it changes no
        result, so it is not in :meth:`config`."""
        threads = self.inner_threads
        if threads is None:
            threads = concurrency(*{id(p.lm): p.lm for _, p in self.named_predictors() if p.lm}.values(), None)
        return fan_out(fn, items, threads)

    def stage_name(self, predictor: dspy.Module) -> str:
        """The stage a predictor of this program is (its attribute name, ``answer`` for ``answer.predict``), under
        the program's ``stage_prefix`` when it runs as a part of another. A stage held as an attribute is found
        without walking the program (every LLM call asks)."""
        for name, value in vars(self).items():
            if value is predictor:
                return self.stage_prefix + name
        for name, candidate in self.named_predictors():
            if candidate is predictor:
                return self.stage_prefix + name.split(".")[0]
        raise KeyError(f"{type(self).__name__} has no stage {predictor!r}")

    def search(self, query: str, k: int) -> Hits:
        """The top ``k`` passages for ``query``: with a ``rerank`` switch, the retriever's first-stage top ``n``
        reranked by it (the first stage's top ``k`` when it is None); without one, the retriever's own."""
        return self.searcher()(query, k=k)

    def first_stage_search(self, query: str, k: int) -> Hits:
        """The top ``k`` of the first stage alone (for a program that merges several searches before reranking)."""
        searcher = self.searcher()
        return (searcher.first_stage if isinstance(searcher, RerankedRetriever) else searcher)(query, k=k)

    def rerank_hits(self, anchor: str, hits: dspy.Prediction, k: int) -> Hits:
        """``hits`` reranked against ``anchor`` by the program's reranker to the top ``k`` (a traced ``rerank``
        step); without a reranker, or no hits to rerank, the first ``k`` as they are."""
        searcher = self.searcher()
        if not hits.ids or not isinstance(searcher, RerankedRetriever) or searcher.rerank is None:
            first = range(min(k, len(hits.ids)))
            return pick(hits, first, [hits.scores[i] for i in first] if hits.get("scores") else [0.0] * len(first))
        return searcher.rerank(anchor, hits, k)

    def searcher(self) -> dspy.Module:
        """The module :meth:`search` calls, built once per retriever (a reranker may load an encoder): the retriever
        itself for a program with no ``rerank`` switch, else its first stage with this program's reranker, taking
        the program's ``n`` candidates and keeping ``k`` (a program with a ``rerank`` switch has both settings). A
        retriever that is not a multihop one (a DSPy retriever, a function) is searched through its adapter
        (:meth:`adapted`)."""
        rm = self.rm
        with self._searchers.lock:
            built = self._searchers.by_retriever.get(id(rm))
            if built is None or built[0] is not rm:
                built = self._searchers.by_retriever[id(rm)] = (rm, self.build_searcher(self.adapted(rm)))
        return built[1]

    def adapted(self, retriever) -> dspy.Module:
        """``retriever`` as a multihop retriever (:func:`multihop.retrievers.as_retriever`: DSPy's retrievers and any
        callable returning passages are wrapped, answering ``Hits``), its searches recorded under the stage name the
        retriever itself has in the program's trace (``retriever``, or ``rm`` for ``dspy.settings.rm``)."""
        wrapped = as_retriever(retriever)
        if wrapped is not retriever:
            wrapped.trace_stage = "retriever" if retriever is self.retriever else "rm"
        return wrapped

    def build_searcher(self, retriever: dspy.Module) -> dspy.Module:
        if "rerank" not in self.settings():
            return retriever
        first_stage = retriever.first_stage if isinstance(retriever, RerankedRetriever) else retriever
        if self.rerank is None:
            return first_stage
        reranker = make_reranker(self.rerank, **self.reranker_options())
        searcher = RerankedRetriever(first_stage, reranker, n=self.n, k=self.k)
        searcher.trace_stage = "search"  # its records' stage name
        return searcher

    def reranker_options(self) -> dict:
        """The options the program's reranker is built with (beyond its name): none by default."""
        return {}

    def setting_files(self) -> dict[str, str]:
        """The checksum of each file a setting names (a trained classifier, labels) by setting, which a run manifest
        keeps: none by default."""
        return {}

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

    @classmethod
    def defaults(cls) -> dict:
        """Each of :meth:`settings` with its default (None for a setting without one)."""
        parameters = inspect.signature(cls.__init__).parameters
        return {name: None if parameters[name].default is inspect.Parameter.empty else parameters[name].default
                for name in cls.settings()}

    def config(self) -> dict:
        """The constructor settings of this program (saved next to a compiled program's state, and compared when it
        is loaded): each read from the attribute named like its parameter, else as the constructor was called
        (``constructed_with``)."""
        called = self.__dict__.get("constructed_with")
        given = called.arguments if called is not None else {}
        missing = [name for name in self.settings() if not hasattr(self, name) and name not in given]
        if missing:
            raise TypeError(f"{type(self).__name__} keeps no attribute for its constructor setting(s) {missing} and "
                            "its constructor call was not recorded: store each setting as self.<name>")
        return {name: getattr(self, name) if hasattr(self, name) else given[name] for name in self.settings()}



class _Searchers:
    """A program's searchers by retriever, built once under a lock (questions run in threads). Copies of the program
    (an optimizer's candidates) share them, as they share the retriever, so no copy loads a reranker's encoder again;
    a pickled program starts with none."""

    def __init__(self):
        self.by_retriever: dict[int, tuple[dspy.Module, dspy.Module]] = {}
        self.lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> _Searchers:
        return self

    def __reduce__(self):
        return _Searchers, ()
