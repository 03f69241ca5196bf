"""Adaptive-RAG (Jeong et al., NAACL 2024): a classifier of query complexity picks, for each question, the simplest
strategy that suits it — A: no retrieval, B: single-step retrieval, C: multi-step retrieval (§3.2, Fig. 2).

The paper's: the three labels and their strategies — the LM alone (``no_retrieval``, :class:`~..baselines.NoRetrieval`),
one retrieval then an answer (``single_step``, :class:`~..baselines.SingleStepRAG`), IRCoT with its separate reader
(``multi_step``, :class:`~..ircot.IRCoT`; the authors' ``ircot_qa``) —; a classifier trained on silver labels (the
simplest strategy that answered a train question correctly, else its dataset's inductive bias: :mod:`.complexity`,
:mod:`.labels`); BM25 as the retriever (§4.2; the method's declared ``first_stage``); Steps as HANRAG counts them for
Adaptive-RAG (0 for A, 1 for B, IRCoT's reasoning steps for C, the authors' ``stepNum``); the oracle row, every
question on its own silver label (the paper's "Adaptive-RAG w/ Oracle", an oracle classifier, §4.2).
Ours: the classifier — a frozen MiniLM encoder and a linear head in place of the paper's T5-Large
(:mod:`.classifier`) —; the strategies' prompts (the project's shared readers and IRCoT's signature, not the authors'
Flan-T5 prompts); what runs without a classifier: every question takes C, the label the inductive bias gives every
question of the multi-hop datasets here, which a classifier trained on the bias labels alone (the authors' "binary"
data) learns; the defaults ``k = 4`` and ``max_steps = 8`` (IRCoT's, so that route C is the IRCoT row), the authors'
own settings being ``k = 6`` a step for C, ``15`` for B and at most 10 reasoning sentences (``paper_settings``). C
keeps IRCoT's paragraph limits (a paragraph of more than 600 words dropped, each shown cut to 350: the authors' code's,
:mod:`~..ircot.paragraphs`); B reads whole paragraphs (ours: the authors' single-step runs through the same code and
limits).

The readers: the authors' released configurations read every strategy the same way, by LM — Direct with Flan-T5-XL
and XXL (``base_configs/{nor,oner,ircot}_qa_flan_t5_*.jsonnet``: ``rc_qa_type = "direct"``), a chain of thought with
GPT-3.5 (``gpt-3.5-turbo-instruct``; ``base_configs/{nor,oner,ircot}_qa_gpt_*.jsonnet``: ``rc_qa_type = "cot"``,
no-retrieval A included). ``reader="direct"`` (the default: the Flan-T5 setting, HANRAG-Fair's FLAN-T5-XL's; HANRAG
names no reader for its Llama-3.1-8B rows, and its No retrieval / Single-step / IRCoT rows read directly) answers
with the shared Direct readers; ``reader="cot"`` (the GPT-3.5 setting)
reasons first: A with :class:`~multihop.signatures.adaptive_rag.ClosedBookAnswerWithReasoning` (:class:`ClosedBookCoT`,
ours: the project's NoRetrieval has no CoT reader), B with
:class:`~multihop.signatures.shared.AnswerWithReasoning` over its passages (:class:`SingleStepCoT`, ours, likewise),
C with IRCoT's ``cot_reader``; each strategy's reader stage is then ``cot_answer``.

Switches: ``route`` (None: the classifier; ``"A"``, ``"B"`` or ``"C"``: every question takes that strategy, the
paper's No Retrieval / Single-step / Multi-step rows; ``"oracle"``: each question's ``gold_complexity`` input, its
silver label, read from ``oracle_labels`` by evaluation), ``classifier`` (a trained classifier folder), ``k``,
``single_step_k``, ``max_steps``, ``reader``. Only the strategies a question can reach exist, so
``named_predictors()`` lists their stages under the strategy's name (``single_step.answer``, ``multi_step.reason``;
``single_step.cot_answer`` with the CoT reader).

Counted per question: ``route.A``/``route.B``/``route.C`` (the label taken), ``steps`` and every count of the strategy
that ran (IRCoT's ``step_cap`` and ``paragraphs``, each stage's fallbacks). The prediction is the strategy's, with the
question's ``complexity`` label and, from a classifier, its ``complexity_probabilities``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import dspy

from multihop.data.folders import INVENTORY, sha256_file
from multihop.runtime.tracing import count
from multihop.signatures import AnswerWithReasoning
from multihop.signatures.adaptive_rag import ClosedBookAnswerWithReasoning

from ...base import MultihopProgram
from ...text import safe_answer
from ..ircot import IRCoT
from ..rerankable import RerankableBaseline
from ..single_step import NoRetrieval, SingleStepRAG
from .classifier import ComplexityClassifier
from .complexity import LABELS, MULTI_STEP, NO_RETRIEVAL, SINGLE_STEP
from .labels import LABELS_FILE, labels_by_question, read_labels, with_gold_complexity

logger = logging.getLogger(__name__)

ORACLE = "oracle"
STRATEGIES = {NO_RETRIEVAL: "no_retrieval", SINGLE_STEP: "single_step", MULTI_STEP: "multi_step"}  # label → attribute
FIXED_STEPS = {NO_RETRIEVAL: 0, SINGLE_STEP: 1}  # IRCoT counts its own steps
READERS = ("direct", "cot")
COT_FALLBACK = {"reasoning": "", "answer": ""}


class ClosedBookCoT(MultihopProgram, register=False):
    """Strategy A with the authors' GPT-3.5 reader: the LM reasons, then answers, from its own knowledge (one LLM
    call, no retrieval). Ours as a class (the project's :class:`~..single_step.NoRetrieval` reads directly); an
    unparsable reply is an empty answer (``cot_answer.fallback``)."""

    def __init__(self):
        super().__init__(retriever=None)
        self.add_stages(cot_answer=ClosedBookAnswerWithReasoning)

    def forward(self, question: str) -> dspy.Prediction:
        result = self.run_stage(self.cot_answer, COT_FALLBACK, question=question)
        return dspy.Prediction(answer=safe_answer(result.answer), reasoning=str(result.reasoning or ""),
                               passage_ids=[])


class SingleStepCoT(RerankableBaseline, register=False):
    """Strategy B with the authors' GPT-3.5 reader: the top ``k`` passages for the question, then a chain of thought
    over them and the answer (one retrieval, one LLM call). Ours as a class (the project's
    :class:`~..single_step.SingleStepRAG` reads directly); an unparsable reply is an empty answer
    (``cot_answer.fallback``)."""

    def __init__(self, retriever: dspy.Module | None = None, k: int = 5, n: int = 50, rerank: str | None = None):
        super().__init__(retriever, k, n, rerank)
        self.add_stages(cot_answer=AnswerWithReasoning)

    def forward(self, question: str) -> dspy.Prediction:
        hits = self.search(question, k=self.k)
        result = self.run_stage(self.cot_answer, COT_FALLBACK, passages=hits.passages, question=question)
        return dspy.Prediction(answer=safe_answer(result.answer), reasoning=str(result.reasoning or ""),
                               passages=hits.passages, passage_ids=hits.ids, scores=hits.scores)


class AdaptiveRAG(MultihopProgram):
    """Adaptive-RAG: a query-complexity classifier sends each question to no retrieval (A), single-step retrieval (B)
    or IRCoT (C). The module docstring says what is the paper's and what is ours.

    Args:
        retriever: the retriever (the method's first stage is BM25, §4.2); default ``dspy.settings.rm``.
        classifier: a classifier folder (``multihop adaptiverag train``); None: every question takes C.
        route: None (the classifier), ``"A"``, ``"B"`` or ``"C"`` for every question, or ``"oracle"`` (each
            question's silver label).
        k: paragraphs IRCoT retrieves a step (and single-step retrieval, unless ``single_step_k``).
        single_step_k: paragraphs single-step retrieval reads (None: ``k``).
        max_steps: IRCoT's reasoning steps at most.
        oracle_labels: the dev questions' silver labels (``multihop adaptiverag labels --split dev``) the oracle reads.
        reader: how every strategy reads: ``"direct"`` (the authors' Flan-T5 configurations) or ``"cot"`` (their
            GPT-3.5 ones: a chain of thought, then the answer).

    Example:
        >>> program = AdaptiveRAG(retriever=bm25, classifier="runs/adaptive-rag-classifier")
        >>> prediction = program(question="Who founded the company that makes the Xbox?")
        >>> prediction.complexity, prediction.answer, prediction.counts["steps"]
    """

    count_display = {"steps": "mean", **{f"route.{label}": "rate" for label in LABELS}}

    def __init__(
        self,
        retriever: dspy.Module | None = None,
        classifier: str | None = None,
        route: str | None = None,
        k: int = 4,
        single_step_k: int | None = None,
        max_steps: int = 8,
        oracle_labels: str | None = None,
        reader: Literal["direct", "cot"] = "direct",
    ):
        if route is not None and route not in (*LABELS, ORACLE):
            raise ValueError(f"unknown route {route!r}; choose None (the classifier), {ORACLE!r} or one of "
                             f"{', '.join(LABELS)}")
        if min(k, max_steps, k if single_step_k is None else single_step_k) < 1:
            raise ValueError("k, single_step_k and max_steps must be at least 1")
        if reader not in READERS:
            raise ValueError(f"unknown reader {reader!r}; choose one of {', '.join(READERS)}")
        super().__init__(retriever=retriever)
        self.classifier, self.route, self.oracle_labels = classifier, route, oracle_labels
        self.k, self.single_step_k, self.max_steps, self.reader = k, single_step_k, max_steps, reader
        self._classifier = ComplexityClassifier.load(classifier) if route is None and classifier else None
        if route is None and classifier is None:
            logger.warning("AdaptiveRAG has no classifier: every question takes C (multi-step); train one with "
                           "`multihop adaptiverag labels` and `multihop adaptiverag train`, then give its folder as "
                           "the classifier setting")
        for label in self.reachable():
            strategy = self.strategy_program(label)
            strategy.stage_prefix = f"{STRATEGIES[label]}."  # its counts name its stages as this program's do
            setattr(self, STRATEGIES[label], strategy)

    def reachable(self) -> tuple[str, ...]:
        """The labels a question can take under this configuration."""
        if self.route in LABELS:
            return (self.route,)
        return LABELS if self.route == ORACLE or self._classifier is not None else (MULTI_STEP,)

    def strategy_program(self, label: str) -> MultihopProgram:
        """The strategy of ``label``, on this program's retriever and settings, reading as ``reader`` says."""
        cot = self.reader == "cot"
        if label == NO_RETRIEVAL:
            return ClosedBookCoT() if cot else NoRetrieval()
        if label == SINGLE_STEP:
            return (SingleStepCoT if cot else SingleStepRAG)(
                retriever=self.retriever, k=self.k if self.single_step_k is None else self.single_step_k)
        return IRCoT(retriever=self.retriever, k=self.k, max_steps=self.max_steps, cot_reader=cot)

    def forward(self, question: str, gold_complexity: str | None = None) -> dspy.Prediction:
        label, probabilities = self.complexity(question, gold_complexity)
        count(f"route.{label}")
        if label in FIXED_STEPS:
            count("steps", FIXED_STEPS[label])
        # the strategy runs inside this question's trace (dspy.Module's call, not a traced program's own): its stage
        # records and counts are this question's, under its name
        prediction = dspy.Module.__call__(getattr(self, STRATEGIES[label]), question=question)
        return dspy.Prediction(**dict(prediction.items()), complexity=label,
                               complexity_probabilities=probabilities)

    def complexity(self, question: str, gold_complexity: str | None = None) -> tuple[str, dict | None]:
        """The question's label, and the classifier's probability of each label when the classifier gave it."""
        if self.route == ORACLE:
            if gold_complexity not in LABELS:
                raise ValueError(f"AdaptiveRAG(route='oracle') follows each question's gold_complexity, got "
                                 f"{gold_complexity!r}: evaluate it with the oracle_labels setting (or examples "
                                 "passed through multihop.programs.baselines.adaptive_rag.with_gold_complexity)")
            return gold_complexity, None
        if self.route in LABELS:
            return self.route, None
        if self._classifier is None:
            return MULTI_STEP, None
        probabilities = self._classifier.probabilities([question])[0]
        return LABELS[int(probabilities.argmax())], {label: float(p) for label, p in zip(LABELS, probabilities,
                                                                                           strict=True)}

    def setting_files(self) -> dict[str, str]:
        """The checksums of the classifier (its file list) and of the oracle's labels, which a run manifest keeps: a
        classifier retrained into the same folder, or labels made again, are another run."""
        files = {"classifier": Path(self.classifier) / INVENTORY if self.classifier else None,
                 "oracle_labels": Path(self.oracle_labels) / LABELS_FILE if self.oracle_labels else None}
        return {setting: sha256_file(path)[:16] for setting, path in files.items() if path and path.is_file()}

    def prepare_examples(self, examples: list[dspy.Example]) -> list[dspy.Example]:
        """The oracle reads each example's silver label (its ``gold_complexity`` field, else ``oracle_labels``); the
        other routes the question."""
        if self.route != ORACLE:
            return list(examples)
        labels = labels_by_question(read_labels(self.oracle_labels)) if self.oracle_labels else {}
        return with_gold_complexity(examples, labels)
