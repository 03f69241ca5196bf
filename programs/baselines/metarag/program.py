"""MetaRAG (Zhou et al., WWW 2024): a question-answering "cognition" whose answer a "metacognition" monitors, evaluates
and plans to fix, round after round (§4, Fig. 3).

The cognition (``answer``) retrieves the top ``k`` documents for the question and answers from them, step by step.
Then, at most ``max_iterations`` times:

1. Monitoring (§4.1): an expert (``expert``) answers the question from the same documents; when the expert's answer
   and the cognition's are similar (above ``threshold``), the answer is satisfactory and the loop ends.
2. Evaluating (§4.2): procedural knowledge judges whether the LLM's own knowledge (``internal``) and the documents
   (``external``) suffice for the question, which sorts the question into one of four conditions; declarative
   knowledge (``critic``) checks the answer for the common errors ``error_types``.
3. Planning (§4.3) by condition: neither suffices (insufficient knowledge) → ``query`` asks a new query, whose top
   ``k`` documents join the references, and the cognition is told to break the question down; only the LLM's own
   knowledge suffices → a new query's documents join the references too, and the cognition is told to rely on itself
   where they do not help; only the documents suffice → the cognition is told to rely on the references only; both
   suffice (erroneous reasoning) → ``support`` judges whether the reasoning entails the answer, and the cognition is
   told to reason in several steps when it does not, else to check its final answer.
4. The cognition answers again with the plan's suggestion, followed by the critic's suggestion against the error it
   found, or "Please think step by step." when it found none.

The answer returned is the newest one: the answer the monitor approved, or at the cap the last one regenerated (the
authors' ``metarag.py`` returns the newest answer in both cases; its hedge and ten-word filter ``check_answer`` sets a
value that the loop's exit then overwrites, so it never decides the output, and it is not built).

Sources of the numbers. The authors' code (``main.py``, ``MetaRAG.__init__``): ``ref_num=5`` documents (``k``),
``max_iter=3`` (``max_iterations``: at most 3 regenerated answers), ``threshold=0.3``, the monitor passing when the
similarity is strictly above it (``score > threshold``); its README's example run uses ``--ref_num 3`` with the
SpanBERT expert. The paper (§5.3, as this library reads it): the top 5 documents, a
threshold of 0.4 and at most 5 iterations; the threshold and iteration sweeps (§6.2, §6.5) are these settings. The
defaults are the code's.

The paper's: the loop, the monitor's decision rule, the four conditions and their plans, the prompts (see
:mod:`multihop.signatures.metarag`), the ablations of Table 3 (``internal_knowledge=False`` "w/o Internal",
``external_knowledge=False`` "w/o External", both "w/o All"; ``error_types`` without one type "w/o Incomplete", "w/o
Redundance", "w/o Ambiguity", empty "w/o All"). The authors' code's, where the paper's text is silent or differs: a
new query for the internal-only condition as well; the reasoning check as one NLI call (premise the reasoning,
hypothesis the answer) rather than a check of each statement against the references; a critic that reads only the
question and the answer; "Please think step by step." with every plan when no error is found; a new query's documents
added to the references, repeats dropped; the monitor and the next evaluation reading the newest answer.

Ours, where the paper's models cannot run here or its text says nothing:

- The expert is a stage of the program (``expert``, an extractive answer from the documents) on the program's LM; the
  paper's fine-tuned T5-large (or SpanBERT, LLaMA2-chat, ChatGLM2 in Table 2) is any LM put there with
  ``set_stage_lm("expert", lm)``.
- The similarity is the token F1 of the two answers (SQuAD normalisation), not the cosine of their all-MiniLM-L6-v2
  mean-pooled embeddings (the authors' ``monitor.py``), so the threshold's meaning changed: the cosine of two short
  unrelated answers is rarely near 0, while their F1 is 0 without a shared word, so the same threshold makes our
  monitor fail (and evaluate) far more often than the authors'. Both are 1 for the same answer.
- The TRUE NLI model (T5-XXL) is the LLM judging as an NLI model (``support``); the documents' sufficiency
  (``external``) is asked of the LLM, as the authors' code does.
- Ablated knowledge: a source not evaluated is read as agreeing with the one that is (no conflict can be seen), so
  "w/o Internal" plans a new query or the reasoning check by the documents' sufficiency alone; with neither, every
  evaluation takes the erroneous-reasoning plan. With no error types (no critic), no error is found, so "Please think
  step by step." follows every plan.
- The monitor does not run after the last allowed answer (the authors' code runs it and returns that answer whatever
  it says), so a question makes at most ``max_iterations`` monitor calls and ``max_iterations + 1`` answers.

Parsing (``parsing``). The authors' code asks the two knowledge judgments and the new query for free text and reads
it (:mod:`.parsing`): a judgment is negative when "no" is anywhere in the reply (the internal one also on "sorry",
"couldn't", "don't have access", and case-sensitively), and the query is the reply up to the first "The rewrite query
is", cut to 64 characters. Its prompts ask for "yes or no" and for step-by-step thinking that ends with "The rewrite
query is ...", so that reading searches the opening of the model's thinking, never the query it writes after the
phrase, and reads "Yes, I know" or "Yes, the documents give enough" as "no" and a bare "No." as a yes for the
internal judgment. The default, ``parsing="typed"`` (ours), asks for typed fields instead — booleans for the judgments
and the query itself (:class:`~multihop.signatures.metarag.NewQuery`, whole, not cut) — so the plan follows what the
model meant; ``parsing="authors"`` asks the authors' free-text prompts (``JudgeInternalReply``, ``JudgeExternalReply``,
``NewQueryReply``) and reads them the authors' way, to reproduce their runs.

Switches: ``internal_knowledge``, ``external_knowledge``, ``error_types`` (above), ``threshold``, ``max_iterations``,
``k``, ``parsing`` (above), and ``rerank``/``n`` (default off): the top-``n`` → reranker → top-``k`` search of DualRAG's
App. H.4, which runs every baseline that way (the authors' code also reranks its BM25 top 100). Predictors exist only
for the stages the switches use (``query`` only while a knowledge evaluation can find a source insufficient; ``critic``
only with error types).

Counted per question: ``rounds`` (evaluations), ``monitor_passed`` (the monitor found an answer satisfactory before the
cap), ``plan.<condition>`` (``new_query``, ``only_internal``, ``only_external``, ``reasoning``), ``error.<type>``
(errors the critic found), ``reasoning_unsupported`` (reasoning checks that failed), ``references`` (documents read).
``prediction.passage_ids`` are the references the cognition read, in the order they were retrieved.
Fallbacks (``run_stage``, each counted ``<stage>.fallback``): an unparsable answer is empty (``answer.fallback``); an
unparsable expert answer is empty, so the monitor fails and evaluates (``expert.fallback``); an unparsable knowledge
judgment is "insufficient" (``internal.fallback``, ``external.fallback``: the plan then fetches or leans on the other
source; with the authors' parsing too, where only an unparsable reply, not its words, takes the fallback); an unparsable
critic finds no error (``critic.fallback``); an unparsable or empty new query is the question itself
(``query.fallback``, ``query_empty``); an unparsable entailment counts the reasoning as supported
(``support.fallback``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

import dspy

from multihop.evaluation.metrics import f1
from multihop.runtime.tracing import count
from multihop.signatures.metarag import (
    CHECK_FINAL_ANSWER,
    ERROR_TYPES,
    MULTI_STEP_REASONING,
    NEW_REFERENCES,
    NO_ERROR,
    RELY_ON_OWN_KNOWLEDGE,
    RELY_ON_REFERENCES,
    THINK_STEP_BY_STEP,
    Answer,
    CheckReasoning,
    CriticizeAnswer,
    ExpertAnswer,
    JudgeExternal,
    JudgeExternalReply,
    JudgeInternal,
    JudgeInternalReply,
    NewQuery,
    NewQueryReply,
)

from ...text import safe_answer
from ..rerankable import RerankableBaseline
from .parsing import authors_external, authors_internal, authors_rewrite_query

NEW_QUERY, ONLY_INTERNAL, ONLY_EXTERNAL, REASONING = "new_query", "only_internal", "only_external", "reasoning"
PLANS = (NEW_QUERY, ONLY_INTERNAL, ONLY_EXTERNAL, REASONING)  # §4.3: insufficient, conflicting (2), erroneous
PARSINGS = ("typed", "authors")


def condition(internal: bool | None, external: bool | None) -> str:
    """The plan for the knowledge evaluation's outcome (§4.3); a source not evaluated (None) agrees with the other."""
    internal = external if internal is None else internal
    external = internal if external is None else external
    if internal is None or internal and external:
        return REASONING
    if not internal and not external:
        return NEW_QUERY
    return ONLY_INTERNAL if internal else ONLY_EXTERNAL


@dataclass
class Round:
    """One metacognitive round: the monitor's verdict on the answer, the evaluation, the plan and what it did."""

    answer: str
    expert_answer: str
    similarity: float
    internal: bool | None = None
    external: bool | None = None
    error: str = NO_ERROR
    plan: str = ""
    query: str | None = None
    added_ids: list[str] = field(default_factory=list)
    reasoning_supported: bool | None = None
    suggestions: list[str] = field(default_factory=list)


class MetaRAG(RerankableBaseline):
    """MetaRAG: answer from retrieved documents, then monitor the answer against an expert's, evaluate the knowledge
    and the reasoning, and plan a fix (new query, one knowledge source, double-checked reasoning), until the monitor
    is satisfied or ``max_iterations`` rounds (Zhou et al., WWW 2024). The module docstring says what is the paper's
    and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: documents retrieved for the question and for each new query (the authors' code: 5; §5.3: 5).
        max_iterations: metacognitive rounds at most (the authors' code: 3; §5.3: 5).
        threshold: the monitor passes an answer whose token F1 with the expert's is above it (the authors' code:
            0.3, §5.3: 0.4, both for an embedding cosine; see the module docstring).
        internal_knowledge: evaluate the LLM's own knowledge (False: Table 3's "w/o Internal").
        external_knowledge: evaluate the documents' sufficiency (False: Table 3's "w/o External").
        error_types: the common errors the critic looks for (Table 3: drop one, or all with an empty list).
        rerank: a reranker of :data:`multihop.retrievers.RERANKERS` over the first stage's top ``n`` (None: off).
        n: first-stage candidates the reranker sees.
        parsing: how the knowledge judgments and the new query are asked and read: ``"typed"`` (ours: typed fields)
            or ``"authors"`` (the authors' free-text prompts and their keyword reading and 64-character query; see
            the module docstring for why the default is ours).

    Example:
        >>> prediction = MetaRAG(retriever=retriever)(question="Which film has the director who died later?")
        >>> prediction.answer, prediction.rounds, prediction.passage_ids
    """

    count_display = {"rounds": "mean", "monitor_passed": "rate", **{f"plan.{plan}": "mean" for plan in PLANS},
                     "references": "mean"}

    def __init__(
        self,
        retriever: dspy.Module | None = None,
        k: int = 5,
        max_iterations: int = 3,
        threshold: float = 0.3,
        internal_knowledge: bool = True,
        external_knowledge: bool = True,
        error_types: tuple[str, ...] = tuple(ERROR_TYPES),
        rerank: str | None = None,
        n: int = 50,
        parsing: Literal["typed", "authors"] = "typed",
    ):
        error_types = tuple(error_types)
        unknown = [name for name in error_types if name not in ERROR_TYPES]
        if unknown or len(set(error_types)) != len(error_types):
            raise ValueError(f"error_types must be distinct names among {', '.join(ERROR_TYPES)}, got {error_types}")
        if min(k, max_iterations) < 1:
            raise ValueError("k and max_iterations must be at least 1")
        if parsing not in PARSINGS:
            raise ValueError(f"unknown parsing {parsing!r}; choose one of {', '.join(PARSINGS)}")
        super().__init__(retriever, k, n, rerank)
        self.parsing = parsing
        typed = parsing == "typed"
        self.max_iterations, self.threshold = max_iterations, threshold
        self.internal_knowledge, self.external_knowledge = internal_knowledge, external_knowledge
        self.error_types = list(error_types)  # JSON's list, as a saved config reads it back
        evaluated = internal_knowledge or external_knowledge
        self.add_stages(answer=Answer, expert=ExpertAnswer,
                        internal=(JudgeInternal if typed else JudgeInternalReply) if internal_knowledge else None,
                        external=(JudgeExternal if typed else JudgeExternalReply) if external_knowledge else None,
                        critic=CriticizeAnswer if error_types else None,
                        query=(NewQuery if typed else NewQueryReply) if evaluated else None,
                        support=CheckReasoning)

    def forward(self, question: str) -> dspy.Prediction:
        hits = self.search(question, k=self.k)
        references = dict(zip(hits.ids, hits.passages, strict=True))
        reasoning, answer = self.respond(question, references, [])
        rounds, passed = [], False
        for _ in range(self.max_iterations):
            expert = safe_answer(self.run_stage(self.expert, {"answer": ""}, documents=list(references.values()),
                                                question=question).answer)
            similarity = f1(answer, expert)
            if similarity > self.threshold:  # the authors' code: score > threshold
                passed = True
                break
            current = Round(answer, expert, similarity)
            rounds.append(current)
            self.evaluate(question, references, current)
            self.plan(question, references, reasoning, current)
            reasoning, answer = self.respond(question, references, current.suggestions)
        count("rounds", len(rounds))
        count("monitor_passed", int(passed))
        for plan in PLANS:
            count(f"plan.{plan}", sum(r.plan == plan for r in rounds))
        count("references", len(references))
        return dspy.Prediction(answer=answer, reasoning=reasoning, monitor_passed=passed,
                               rounds=[asdict(r) for r in rounds], passages=list(references.values()),
                               passage_ids=list(references))

    def respond(self, question: str, references: dict[str, str], suggestions: list[str]) -> tuple[str, str]:
        """The cognition: reasoning and answer from the references, following the plan's suggestions."""
        result = self.run_stage(self.answer, {"reasoning": "", "answer": ""}, documents=list(references.values()),
                                question=question, suggestions=suggestions)
        return str(result.reasoning or "").strip(), safe_answer(result.answer)

    def evaluate(self, question: str, references: dict[str, str], current: Round) -> None:
        """Procedural knowledge (internal and external sufficiency) and declarative knowledge (the common errors)."""
        documents = list(references.values())
        if self.internal_knowledge:
            current.internal = self.judge(self.internal, "reliable", authors_internal, question=question)
        if self.external_knowledge:
            current.external = self.judge(self.external, "sufficient", authors_external, documents=documents,
                                          question=question)
        if self.error_types:
            described = [f"{name}: {ERROR_TYPES[name]}" for name in self.error_types]
            critique = self.run_stage(self.critic, {"error": NO_ERROR, "suggestion": ""}, error_types=described,
                                      question=question, answer=current.answer)
            if critique.error in self.error_types:  # an error type the critic was not told about is none
                current.error = critique.error
                count(f"error.{current.error}")
                current.suggestions.append(" ".join(str(critique.suggestion or "").split())
                                           or f"Avoid {current.error}: {ERROR_TYPES[current.error]}.")
        if current.error == NO_ERROR:  # the authors' code: the default hint, whatever the plan
            current.suggestions.append(THINK_STEP_BY_STEP)
        current.plan = condition(current.internal, current.external)

    def plan(self, question: str, references: dict[str, str], reasoning: str, current: Round) -> None:
        """§4.3's strategy for the round's condition (as the authors' code runs it), adding to the references and
        putting its suggestion before the critic's."""
        if current.plan in (NEW_QUERY, ONLY_INTERNAL):  # the documents do not suffice: fetch more
            current.query = self.new_query(question, references, current.answer)
            found = self.search(current.query, k=self.k)
            current.added_ids = [pid for pid in found.ids if pid not in references]
            references.update((pid, passage) for pid, passage in zip(found.ids, found.passages, strict=True)
                              if pid in current.added_ids)
        if current.plan == NEW_QUERY:
            suggestion = NEW_REFERENCES
        elif current.plan == ONLY_INTERNAL:
            suggestion = RELY_ON_OWN_KNOWLEDGE
        elif current.plan == ONLY_EXTERNAL:
            suggestion = RELY_ON_REFERENCES
        else:
            current.reasoning_supported = self.run_stage(self.support, {"entailed": True}, premise=reasoning,
                                                         hypothesis=current.answer).entailed is not False
            count("reasoning_unsupported", int(not current.reasoning_supported))
            suggestion = CHECK_FINAL_ANSWER if current.reasoning_supported else MULTI_STEP_REASONING
        current.suggestions.insert(0, suggestion)

    def judge(self, stage: dspy.Module, name: str, authors: Callable[[str], bool], **inputs) -> bool:
        """A knowledge judgment: the typed field ``name`` (True only when the model said so), or with the authors'
        parsing the free-text reply read by ``authors``; an unparsable reply is False."""
        if self.parsing == "typed":
            return self.run_stage(stage, {name: False}, **inputs).get(name) is True
        result = self.run_stage(stage, {"reply": ""}, **inputs)
        return not result.get("failed") and authors(str(result.reply or ""))

    def new_query(self, question: str, references: dict[str, str], answer: str) -> str:
        """The query for the missing knowledge: the typed query, or with the authors' parsing what their code takes
        from the reply (64 characters at most); an empty one is the question."""
        inputs = {"question": question, "documents": list(references.values()), "answer": answer}
        if self.parsing == "typed":
            result = self.run_stage(self.query, {"query": ""}, **inputs)
            written = str(result.query or "")
        else:
            result = self.run_stage(self.query, {"reply": ""}, **inputs)
            written = authors_rewrite_query(str(result.reply or ""))
        query = " ".join(written.split())
        count("query_empty", int(not query and not result.get("failed")))
        return query or question
