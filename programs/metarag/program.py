"""MetaRAG (Zhou et al., WWW 2024): a question-answering "cognition" whose answer a "metacognition" monitors, evaluates
and plans to fix, round after round (§4, Fig. 3).

The cognition (``answer``) retrieves the top ``k`` documents for the question and answers from them, step by step.
Then, at most ``max_iterations`` times:

1. Monitoring (§4.1): an expert (``expert``) answers the question from the same documents; when the expert's answer
   and the cognition's are similar (at least ``threshold``), the answer is satisfactory and the loop ends.
2. Evaluating (§4.2): procedural knowledge judges whether the LLM's own knowledge (``internal``) and the documents
   (``external``) suffice for the question, which sorts the question into one of four conditions; declarative
   knowledge (``critic``) checks the answer for the common errors ``error_types``.
3. Planning (§4.3) by condition: neither suffices (insufficient knowledge) → ``query`` asks a new query, whose top
   ``k`` documents join the references; only one suffices (conflicting knowledge) → the cognition is told to rely on
   its own knowledge only, or on the references only; both suffice (erroneous reasoning) → ``support`` checks each
   sentence of the reasoning against the references and the unsupported ones are sent back to be double-checked, with
   the critic's suggestion against the error it found ("Please think step by step." when none).
4. The cognition answers again with the plan's suggestions (the critic's suggestion joins every plan, as in the
   authors' code).

The paper's: the loop, the monitor's decision rule (evaluate when the similarity is below ``k``), the four conditions
and the plans, the prompts (see :mod:`multihop.signatures.metarag`), ``k = 5`` documents, threshold 0.4 and at most
5 iterations (§5.3), the ablations of Table 3 (``internal_knowledge=False`` "w/o Internal", ``external_knowledge=False``
"w/o External", both "w/o All"; ``error_types`` without one type "w/o Incomplete", "w/o Redundance", "w/o Ambiguity",
empty "w/o All"), the threshold and iteration sweeps (§6.2, §6.5) as settings. The authors' code's: a regenerated
answer that hedges ("unknown", "cannot determine") or runs past ten words does not replace the answer kept
(``answer_kept``; nor, ours, an empty answer or an abstention such as "not enough information"); the monitor and the
next evaluation read the newest answer; a new query's documents are added to the references, repeats dropped.

Ours, where the paper's models cannot run here or its text says nothing:

- The expert is a stage of the program (``expert``, an extractive answer from the documents) on the program's LM; the
  paper's fine-tuned T5-large (or SpanBERT, LLaMA2-chat, ChatGLM2 in Table 2) is any LM put there with
  ``set_stage_lm("expert", lm)``. The similarity is the token F1 of the two answers (SQuAD normalisation) against the
  threshold, in place of the cosine of their MiniLM embeddings: both are 1 for the same answer and fall as the
  answers part.
- The TRUE NLI model (T5-XXL) is the LLM judging as an NLI model: whether the documents suffice for the question
  (``external``, as the authors' code asks its LLM) and whether they entail each sentence of the reasoning
  (``support``, one judgment a sentence, sent at once to a served LM).
- Ablated knowledge: a source not evaluated is read as agreeing with the one that is (no conflict can be seen), so
  "w/o Internal" plans a new query or the reasoning check by the documents' sufficiency alone; with neither, every
  evaluation takes the erroneous-reasoning plan.
- The monitor does not run after the last allowed answer (it could change nothing), so a question makes at most
  ``max_iterations`` monitor calls and ``max_iterations + 1`` answers.

Switches: ``internal_knowledge``, ``external_knowledge``, ``error_types`` (above), ``threshold``, ``max_iterations``,
``k``, and ``rerank``/``n`` (default off): the top-``n`` → reranker → top-``k`` search of DualRAG's App. H.4, which
runs every baseline that way (the authors' code also reranks its BM25 top 100). Predictors exist only for the stages
the switches use (``query`` only while a knowledge evaluation can find both sources insufficient; ``critic`` only with
error types).

Counted per question: ``rounds`` (evaluations), ``monitor_passed`` (the monitor found an answer satisfactory before the
cap), ``plan.<condition>`` (``new_query``, ``only_internal``, ``only_external``, ``reasoning``), ``error.<type>``
(errors the critic found), ``unsupported_statements``, ``answer_kept``, ``references`` (documents read).
``prediction.passage_ids`` are the references the cognition read, in the order they were retrieved.
Fallbacks (``run_stage``, each counted ``<stage>.fallback``): an unparsable answer is empty (``answer.fallback``; an
empty answer never replaces a kept one); an unparsable expert answer is empty, so the monitor fails and evaluates
(``expert.fallback``); an unparsable knowledge judgment is "insufficient" (``internal.fallback``,
``external.fallback``: the plan then fetches or leans on the other source); an unparsable critic finds no error
(``critic.fallback``); an unparsable or empty new query is the question itself (``query.fallback``,
``query_empty``); an unparsable entailment counts the statement as supported (``support.fallback``: nothing to
double-check).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import dspy

from multihop.metrics import f1
from multihop.retrievers import checked_reranker
from multihop.signatures.metarag import (
    DOUBLE_CHECK,
    ERROR_TYPES,
    NEW_REFERENCES,
    NO_ERROR,
    RELY_ON_OWN_KNOWLEDGE,
    RELY_ON_REFERENCES,
    THINK_STEP_BY_STEP,
    Answer,
    CheckStatement,
    CriticizeAnswer,
    ExpertAnswer,
    JudgeExternal,
    JudgeInternal,
    NewQuery,
)
from multihop.tracing import count

from ..base import MultihopProgram
from ..text import is_abstention, safe_answer, split_sentences

NEW_QUERY, ONLY_INTERNAL, ONLY_EXTERNAL, REASONING = "new_query", "only_internal", "only_external", "reasoning"
PLANS = (NEW_QUERY, ONLY_INTERNAL, ONLY_EXTERNAL, REASONING)  # §4.3: insufficient, conflicting (2), erroneous
_HEDGES = re.compile(r"can'?t determin|cannot determin|unknown", re.IGNORECASE)
MAX_ANSWER_WORDS = 10  # the authors' code keeps an answer of at most ten words


def condition(internal: bool | None, external: bool | None) -> str:
    """The plan for the knowledge evaluation's outcome (§4.3); a source not evaluated (None) agrees with the other."""
    internal = external if internal is None else internal
    external = internal if external is None else external
    if internal is None or internal and external:
        return REASONING
    if not internal and not external:
        return NEW_QUERY
    return ONLY_INTERNAL if internal else ONLY_EXTERNAL


def acceptable(answer: str) -> bool:
    """Whether a regenerated answer replaces the one kept (the authors' code): no hedge, ten words at most; nor empty
    or an abstention (:func:`~..text.is_abstention`, ours)."""
    return not is_abstention(answer) and not _HEDGES.search(answer) and len(answer.split()) <= MAX_ANSWER_WORDS


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
    unsupported: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)


class MetaRAG(MultihopProgram):
    """MetaRAG: answer from retrieved documents, then monitor the answer against an expert's, evaluate the knowledge
    and the reasoning, and plan a fix (new query, one knowledge source, double-checked reasoning), until the monitor
    is satisfied or ``max_iterations`` rounds (Zhou et al., WWW 2024). The module docstring says what is the paper's
    and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: documents retrieved for the question and for each new query (§5.3: 5).
        max_iterations: metacognitive rounds at most (§5.3: 5).
        threshold: the monitor's similarity threshold k (§5.3: 0.4); below it the answer is evaluated.
        internal_knowledge: evaluate the LLM's own knowledge (False: Table 3's "w/o Internal").
        external_knowledge: evaluate the documents' sufficiency (False: Table 3's "w/o External").
        error_types: the common errors the critic looks for (Table 3: drop one, or all with an empty list).
        rerank: a reranker of :data:`multihop.retrievers.RERANKERS` over the first stage's top ``n`` (None: off).
        n: first-stage candidates the reranker sees.

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
        max_iterations: int = 5,
        threshold: float = 0.4,
        internal_knowledge: bool = True,
        external_knowledge: bool = True,
        error_types: tuple[str, ...] = tuple(ERROR_TYPES),
        rerank: str | None = None,
        n: int = 50,
    ):
        error_types = tuple(error_types)
        unknown = [name for name in error_types if name not in ERROR_TYPES]
        if unknown or len(set(error_types)) != len(error_types):
            raise ValueError(f"error_types must be distinct names among {', '.join(ERROR_TYPES)}, got {error_types}")
        if min(k, max_iterations) < 1:
            raise ValueError("k and max_iterations must be at least 1")
        rerank = checked_reranker(rerank)
        if rerank is not None and n < k:
            raise ValueError(f"the first stage must return at least k documents per query (n={n} < k={k})")
        super().__init__(retriever=retriever)
        self.k, self.max_iterations, self.threshold = k, max_iterations, threshold
        self.internal_knowledge, self.external_knowledge = internal_knowledge, external_knowledge
        self.error_types = list(error_types)  # JSON's list, as a saved config reads it back
        self.rerank, self.n = rerank, n
        evaluated = internal_knowledge or external_knowledge
        self.add_stages(answer=Answer, expert=ExpertAnswer,
                        internal=JudgeInternal if internal_knowledge else None,
                        external=JudgeExternal if external_knowledge else None,
                        critic=CriticizeAnswer if error_types else None,
                        query=NewQuery if evaluated else None,
                        support=CheckStatement)

    def forward(self, question: str) -> dspy.Prediction:
        hits = self.search(question, k=self.k)
        references = dict(zip(hits.ids, hits.passages, strict=True))
        reasoning, answer = self.respond(question, references, [])
        kept, rounds, passed = answer, [], False
        for _ in range(self.max_iterations):
            expert = safe_answer(self.run_stage(self.expert, {"answer": ""}, documents=list(references.values()),
                                                question=question).answer)
            similarity = f1(answer, expert)
            if similarity >= self.threshold:
                passed = True
                break
            current = Round(answer, expert, similarity)
            rounds.append(current)
            self.evaluate(question, references, reasoning, current)
            self.plan(question, references, reasoning, current)
            reasoning, answer = self.respond(question, references, current.suggestions)
            if acceptable(answer):
                kept = answer
            count("answer_kept", int(answer != kept))
        count("rounds", len(rounds))
        count("monitor_passed", int(passed))
        for plan in PLANS:
            count(f"plan.{plan}", sum(r.plan == plan for r in rounds))
        count("references", len(references))
        return dspy.Prediction(answer=kept, reasoning=reasoning, monitor_passed=passed,
                               rounds=[asdict(r) for r in rounds], passages=list(references.values()),
                               passage_ids=list(references))

    def respond(self, question: str, references: dict[str, str], suggestions: list[str]) -> tuple[str, str]:
        """The cognition: reasoning and answer from the references, following the plan's suggestions."""
        result = self.run_stage(self.answer, {"reasoning": "", "answer": ""}, documents=list(references.values()),
                                question=question, suggestions=suggestions)
        return str(result.reasoning or "").strip(), safe_answer(result.answer)

    def evaluate(self, question: str, references: dict[str, str], reasoning: str, current: Round) -> None:
        """Procedural knowledge (internal and external sufficiency) and declarative knowledge (the common errors)."""
        documents = list(references.values())
        if self.internal_knowledge:
            current.internal = self.run_stage(self.internal, {"reliable": False}, question=question).reliable is True
        if self.external_knowledge:
            current.external = self.run_stage(self.external, {"sufficient": False}, documents=documents,
                                              question=question).sufficient is True
        if self.error_types:
            described = [f"{name}: {ERROR_TYPES[name]}" for name in self.error_types]
            critique = self.run_stage(self.critic, {"error": NO_ERROR, "suggestion": ""}, error_types=described,
                                      references=documents, question=question, reasoning=reasoning,
                                      answer=current.answer)
            if critique.error in self.error_types:  # an error type the critic was not told about is none
                current.error = critique.error
                count(f"error.{current.error}")
                current.suggestions.append(" ".join(str(critique.suggestion or "").split())
                                           or f"Avoid {current.error}: {ERROR_TYPES[current.error]}.")
        current.plan = condition(current.internal, current.external)

    def plan(self, question: str, references: dict[str, str], reasoning: str, current: Round) -> None:
        """§4.3's strategy for the round's condition, adding to the references or to the suggestions."""
        if current.plan == NEW_QUERY:
            current.query = self.new_query(question, references, current.answer)
            found = self.search(current.query, k=self.k)
            current.added_ids = [pid for pid in found.ids if pid not in references]
            references.update((pid, passage) for pid, passage in zip(found.ids, found.passages, strict=True)
                              if pid in current.added_ids)
            current.suggestions.insert(0, NEW_REFERENCES)
        elif current.plan == ONLY_INTERNAL:
            current.suggestions.insert(0, RELY_ON_OWN_KNOWLEDGE)
        elif current.plan == ONLY_EXTERNAL:
            current.suggestions.insert(0, RELY_ON_REFERENCES)
        else:
            current.unsupported = self.unsupported(references, reasoning)
            count("unsupported_statements", len(current.unsupported))
            if current.unsupported:
                current.suggestions.insert(0, DOUBLE_CHECK.format(statements=" ".join(current.unsupported)))
            if current.error == NO_ERROR:
                current.suggestions.append(THINK_STEP_BY_STEP)

    def new_query(self, question: str, references: dict[str, str], answer: str) -> str:
        result = self.run_stage(self.query, {"query": ""}, question=question, documents=list(references.values()),
                                answer=answer)
        query = " ".join(str(result.query or "").split())
        count("query_empty", int(not query and not result.get("failed")))
        return query or question

    def unsupported(self, references: dict[str, str], reasoning: str) -> list[str]:
        """The sentences of the reasoning the references do not entail (one judgment a sentence, sent at once)."""
        documents = list(references.values())
        statements = split_sentences(reasoning)
        verdicts = self.fan_out(lambda statement: self.run_stage(
            self.support, {"supported": True}, documents=documents, statement=statement).supported is not False,
            statements)
        return [statement for statement, supported in zip(statements, verdicts, strict=True) if not supported]
