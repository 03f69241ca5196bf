"""GenGround (Shi et al., ACL 2024): generate-then-ground. The LLM alternates answer deduction — the next simple
single-hop sub-question and its answer from the LLM's own knowledge — and instructional knowledge grounding — the
answer revised against the documents retrieved for the sub-question — until it gives the final answer (§3, Fig. 2).
:class:`GenGround`'s docstring says what is the paper's, what is the authors' released code's and what is ours.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

import dspy

from multihop.evaluation.metrics import f1, normalize_answer
from multihop.runtime.tracing import count
from multihop.signatures.genground import (
    EMPTY,
    CiteBatch,
    Deduce,
    Ground,
    GroundWithQuestion,
    ImmediateAnswer,
    ReadAnswer,
    Revise,
)

from ...text import safe_answer, unique
from ..rerankable import RerankableBaseline

_NOT_CITED = {normalize_answer(text) for text in (EMPTY, "", "none", "insufficient information", "no evidence")}


@dataclass
class Round:
    """One generate-then-ground round: the sub-question, the immediate answer, its revision and the evidence its
    grounding cited (``first_cited``: the cited batch's, empty when none was; ``filtered``: the revision's), the
    documents retrieved and those shown to the LLM."""

    sub_question: str
    immediate_answer: str
    answer: str = ""
    evidence: str = ""
    cited_id: str | None = None
    batches: int = 0
    retrieved_ids: list[str] = field(default_factory=list)
    read_ids: list[str] = field(default_factory=list)


def render_round(number: int, done: Round) -> str:
    """A round as the next deduction reads it: the sub-question, its revised answer, and the evidence cited."""
    evidence = f" Evidence: {done.evidence}" if done.evidence else ""
    return f"Sub-question {number}: {done.sub_question} Answer {number}: {done.answer}{evidence}"


def cited_index(evidence: str, documents: list[str]) -> int | None:
    """The document of a batch that a citation quotes (the highest token F1), or None for the "Empty" signal or a
    citation that shares no word with any of them."""
    if normalize_answer(evidence) in _NOT_CITED or not documents:
        return None
    scores = [f1(evidence, document) for document in documents]
    best = max(range(len(documents)), key=scores.__getitem__)
    return best if scores[best] > 0 else None


class GenGround(RerankableBaseline):
    """GenGround: deduce a simple sub-question and answer it from the LLM's knowledge, then ground that answer in the
    documents retrieved for the sub-question, batch by batch, until the LLM gives the final answer (Shi et al., ACL
    2024).

    Each round: ``deduce`` writes the next sub-question from the question and the rounds so far, or says it is
    finished with the final answer, which ends the loop; ``answer`` answers the sub-question from the LLM's knowledge
    (the immediate answer); the top ``k`` documents are retrieved with the sub-question (Eq. 2) and the immediate
    answer is grounded in them by batches of ``batch_size`` (§3.3, "batch grounding"). The sub-question and its
    revised answer join the rounds the next deduction reads.

    Batch grounding, by default (``batch_revision="filtered"``) as the authors' released code runs it
    (``src/genground.py``, ``GenGround.grounding``): the retrieved documents are a queue; while it holds more than
    ``batch_size`` documents, the first ``batch_size`` leave it for one ``cite`` call, which sees the sub-question
    and that batch only — never the candidate answer nor the complex question (the authors' ``_batch_grounding``) —
    and cites the passage answering the sub-question, or says "Empty" (their "Insufficient information"); the
    document cited goes back at the end of the queue. No batch ends the grounding: the authors' early stop is
    commented out (their note: dropping it finds more reliable knowledge), so every batch is read. Then one
    ``ground`` call revises the immediate answer over what is left in the queue — the documents cited and the tail of
    the ranking never drawn into a batch — seeing the sub-question, the candidate (immediate) answer and those
    documents, with the authors' revision instructions (``_revise``: edit the answer using only the documents, cite
    what the edit uses, fewer than twenty words, nothing irrelevant; no "Empty" signal, :class:`Revise`); its revised
    answer is the round's. With no batch cited, that revision still reads the queue's tail; only with no document
    retrieved is the immediate answer kept unrevised. At the paper's ``k=10`` and batches of 3 the queue ends as the
    tenth document and the three cited, so a fourth ``cite`` call reads the tenth with two of them and the revision
    the rest (at the authors' ``n_docs=9``, three batches and a revision over what they cited).

    ``batch_revision="first_cited"`` (the paper's §3.3 text as this library reads it): each batch in
    rank order is a ``ground`` call that sees the sub-question, the immediate answer and the batch (Eq. 3 grounds the
    question–answer pair); the first batch whose content it cites revises the answer and ends the grounding, an
    "Empty" batch passes to the next, and when no batch is cited the immediate answer is kept as the backup.

    The paper's: the two phases and their loop, retrieval with the sub-question, batch grounding with its "Empty"
    signal, batches of 3 and the top 10 documents (§5.4; the authors' code defaults to ``n_docs=9``,
    ``batch_doc_size=3`` in ``run.py`` and ``src/genground.py``), the ablations of Table 4 (``deduction=False``
    "w/o deduction": the LLM answers the whole question directly and grounds that answer, one round;
    ``grounding=False`` "w/o grounding": each sub-question is answered from its retrieved documents by a reader,
    ``answer`` then reading them; ``batch_grounding=False`` "w/o batch": all ``k`` documents in one grounding call —
    under ``filtered`` no batch is drawn and the one revision reads all of them). The authors' code's: the default
    batch grounding above and the inputs of its calls, at most 7 deductions (``max_iterations``; the paper gives no
    cap). Not built: the paper's instructional grounding distillation (§4), which trains a smaller model on
    grounding trajectories distilled from a larger LLM; every stage here runs on the program's LM (an optimizer may
    tune it).

    Ours: the deduction is two calls (``deduce``, then ``answer``; see :mod:`multihop.signatures.genground`); a
    citation counts when it shares a word with a document of its batch and is tied to the one with the highest token
    F1 (the authors' code ties it to the highest-F1 document even when it shares no word; ours reads that as "Empty",
    counted ``uncited_evidence``), and the document the revision (``first_cited``: the cited batch) cites is the
    round's ``cited_id``; the loop ends at a sub-question asked already (``repeated_sub_question``: its documents and
    answer would be the same) and at ``max_iterations`` (``iteration_cap``), and then, as when the final answer is
    empty (``final_empty``), the answer is the last revised answer (the authors' code answers "NO ANSWER" at its
    cap); the evidence a round's grounding cited is shown with its sub-question and answer to the next deduction and
    immediate answer (the authors' code shows the sub-question and answer only); ``grounding_inputs="with_question"``
    (a variant of ours, for comparison) shows every
    grounding call the complex question as well, and a ``filtered`` batch the candidate answer too (each batch and
    the final revision then one ``ground`` stage, :class:`GroundWithQuestion`; no ``cite`` stage); the optional
    ``rerank``/``n`` switches give the top-``n`` → reranker → top-``k`` search of DualRAG's App. H.4, which runs
    every baseline that way (default off).

    Counted per question: ``sub_questions`` (rounds), ``grounding_batches`` (grounding calls, ``cite`` and
    ``ground``), ``ungrounded`` (rounds whose grounding cited no document: under ``filtered`` the revision cited
    none, under ``first_cited`` every batch was "Empty"), ``revised`` (rounds whose grounding changed the immediate
    answer, §7.2's revisions), ``iteration_cap``. ``prediction.passage_ids`` are the documents shown to ``cite`` and
    ``ground`` (or read by the reader), first shown first. Fallbacks (``run_stage``): an unparsable deduction at the
    first round asks the question itself as the sub-question and at a later round ends the loop with the last
    revised answer (``deduce.fallback``; an empty sub-question too, ``deduce_empty``); an unparsable immediate or
    read answer is empty (``answer.fallback``); an unparsable ``cite`` reply is an "Empty" batch (``cite.fallback``)
    and an unparsable ``ground`` reply keeps the candidate answer, citing nothing (``ground.fallback``; the authors'
    ``_revise`` returns the candidate answer when its reply does not parse).

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: documents retrieved for each sub-question (§5.4: 10).
        batch_size: documents a batch holds (§5.4: 3).
        max_iterations: sub-questions at most (the authors' code: 7).
        deduction: answer deduction (False: Table 4's "w/o deduction", the question answered directly, one round).
        grounding: instructional knowledge grounding (False: Table 4's "w/o grounding", a reader over the documents).
        batch_grounding: ground batch by batch (False: Table 4's "w/o batch", all ``k`` documents at once).
        batch_revision: ``"filtered"`` (the authors' code, the default: every batch a ``cite`` call keeping the
            document it cites, one revision over the queue left) or ``"first_cited"`` (the paper's text: each batch a
            ``ground`` call, the first cited batch revises the answer, the immediate answer the backup).
        grounding_inputs: ``"authors"`` (the authors' code: a revision reads the sub-question, the candidate answer
            and the documents; a ``filtered`` batch, the ``cite`` stage, the sub-question and the batch only) or
            ``"with_question"`` (ours before: every grounding call also reads the complex question, a ``filtered``
            batch the candidate answer too, all of them ``ground`` calls).
        rerank: a reranker of :data:`multihop.retrievers.RERANKERS` over the first stage's top ``n`` (None: off).
        n: first-stage candidates the reranker sees.

    Example:
        >>> prediction = GenGround(retriever=retriever)(question="Who wrote Turn Me On by the singer of Happy Pills?")
        >>> prediction.rounds, prediction.answer
    """

    count_display = {"sub_questions": "mean", "grounding_batches": "mean", "ungrounded": "mean", "revised": "mean",
                     "iteration_cap": "rate"}

    def __init__(
        self,
        retriever: dspy.Module | None = None,
        k: int = 10,
        batch_size: int = 3,
        max_iterations: int = 7,
        deduction: bool = True,
        grounding: bool = True,
        batch_grounding: bool = True,
        batch_revision: Literal["filtered", "first_cited"] = "filtered",
        grounding_inputs: Literal["authors", "with_question"] = "authors",
        rerank: str | None = None,
        n: int = 50,
    ):
        if min(k, batch_size, max_iterations) < 1:
            raise ValueError("k, batch_size and max_iterations must be at least 1")
        super().__init__(retriever, k, n, rerank)
        self.batch_size, self.max_iterations = batch_size, max_iterations
        self.deduction, self.grounding, self.batch_grounding = deduction, grounding, batch_grounding
        self.batch_revision, self.grounding_inputs = batch_revision, grounding_inputs
        authors = grounding_inputs == "authors"
        self.add_stages(deduce=Deduce if deduction else None,
                        answer=ImmediateAnswer if grounding else ReadAnswer,
                        cite=(CiteBatch if grounding and batch_grounding and authors and batch_revision == "filtered"
                              else None),
                        ground=((Revise if batch_revision == "filtered" else Ground) if authors else GroundWithQuestion)
                        if grounding else None)

    def forward(self, question: str) -> dspy.Prediction:
        rounds: list[Round] = []
        limit, final, ended = (self.max_iterations if self.deduction else 1), None, False
        while len(rounds) < limit and not ended:
            sub_question, final = self.deduced(question, rounds)
            ended = sub_question is None
            if not ended:
                rounds.append(self.round(question, sub_question, rounds))
        capped = self.deduction and not ended
        if final is not None:
            count("final_empty", int(not final))
        answer = final or (rounds[-1].answer if rounds else "")
        count("sub_questions", len(rounds))
        count("iteration_cap", int(capped))
        return dspy.Prediction(answer=answer, rounds=[asdict(r) for r in rounds],
                               passage_ids=unique(pid for r in rounds for pid in r.read_ids))

    def deduced(self, question: str, rounds: list[Round]) -> tuple[str | None, str | None]:
        """The next sub-question (None: the loop ends) and the final answer when the LLM gives it. Without deduction
        the question itself is the one sub-question."""
        if not self.deduction:
            return question, None
        decision = self.run_stage(self.deduce, {"finished": False, "sub_question": "", "final_answer": ""},
                                  question=question, steps=[render_round(i, r) for i, r in enumerate(rounds, 1)])
        if decision.finished is True:
            return None, safe_answer(decision.final_answer)
        sub_question = " ".join(str(decision.sub_question or "").split())
        count("deduce_empty", int(not sub_question and not decision.get("failed")))
        if not sub_question:
            return (None, None) if rounds else (question, None)
        if any(r.sub_question == sub_question for r in rounds):
            count("repeated_sub_question")
            return None, None
        return sub_question, None

    def round(self, question: str, sub_question: str, rounds: list[Round]) -> Round:
        hits = self.search(sub_question, k=self.k)
        if not self.grounding:  # "w/o grounding": the sub-question read from its documents
            read = self.run_stage(self.answer, {"answer": ""}, sub_question=sub_question, documents=hits.passages)
            answer = safe_answer(read.answer)
            for event in ("grounding_batches", "ungrounded", "revised"):
                count(event, 0)
            return Round(sub_question, answer, answer, retrieved_ids=list(hits.ids), read_ids=list(hits.ids))
        immediate = self.run_stage(self.answer, {"answer": ""}, question=question,
                                   steps=[render_round(i, r) for i, r in enumerate(rounds, 1)],
                                   sub_question=sub_question)
        current = Round(sub_question, safe_answer(immediate.answer), retrieved_ids=list(hits.ids))
        if self.batch_revision == "filtered":
            self.filter_then_revise(question, current, hits)
        else:
            self.ground_answer(question, current, hits)
        count("grounding_batches", current.batches)
        count("ungrounded", int(current.cited_id is None))
        count("revised", int(normalize_answer(current.answer) != normalize_answer(current.immediate_answer)))
        return current

    def grounded(self, question: str, current: Round, ids: list[str], documents: list[str], filtering: bool = False
                 ) -> tuple[str, str, int | None]:
        """One grounding call over documents: the evidence cited, the revised answer and the index of the document
        cited (None: "Empty"). ``filtering``: a batch of the ``filtered`` revision, which with the authors' inputs is
        a ``cite`` call (the sub-question and the batch alone; it only cites, so its revised answer is empty); any
        other is a ``ground`` call (the sub-question, the immediate answer and the documents), the complex question
        shown only with ``grounding_inputs="with_question"``."""
        current.batches += 1
        current.read_ids += [pid for pid in ids if pid not in current.read_ids]
        if filtering and self.grounding_inputs == "authors":
            reply = self.run_stage(self.cite, {"evidence": EMPTY}, sub_question=current.sub_question,
                                   documents=documents)
            revised = ""
        else:
            shown = {"question": question} if self.grounding_inputs == "with_question" else {}
            reply = self.run_stage(self.ground, {"evidence": EMPTY, "revised_answer": ""}, **shown,
                                   sub_question=current.sub_question, answer=current.immediate_answer,
                                   documents=documents)
            revised = safe_answer(reply.revised_answer)
        evidence = " ".join(str(reply.evidence or "").split())
        cited = cited_index(evidence, documents)
        count("uncited_evidence", int(cited is None and normalize_answer(evidence) not in _NOT_CITED))
        return evidence, revised, cited

    def ground_answer(self, question: str, current: Round, hits: dspy.Prediction) -> None:
        """``first_cited``, the paper's §3.3 text: batches in rank order, each a ``ground`` call, until one is cited,
        whose revision is the answer; none cited, the immediate answer is the backup."""
        size = self.batch_size if self.batch_grounding else max(1, len(hits.ids))
        current.answer = current.immediate_answer
        for start in range(0, len(hits.ids), size):
            ids, documents = hits.ids[start:start + size], hits.passages[start:start + size]
            evidence, revised, cited = self.grounded(question, current, ids, documents)
            if cited is not None:
                current.evidence, current.cited_id = evidence, ids[cited]
                current.answer = revised or current.immediate_answer
                break

    def filter_then_revise(self, question: str, current: Round, hits: dspy.Prediction) -> None:
        """``filtered``, the authors' code's grounding (the default): each batch off the front of the queue, a
        ``cite`` call, puts the document it cites at the back, with no early stop, until at most a batch is left; one
        ``ground`` revision of the immediate answer over what is left (nothing retrieved: the immediate answer)."""
        size = self.batch_size if self.batch_grounding else max(1, len(hits.ids))
        queue = list(zip(hits.ids, hits.passages, strict=True))
        while len(queue) > size:
            batch, queue = queue[:size], queue[size:]
            _, _, cited = self.grounded(question, current, [pid for pid, _ in batch], [doc for _, doc in batch],
                                        filtering=True)
            if cited is not None:
                queue.append(batch[cited])
        current.answer = current.immediate_answer
        if queue:
            ids, documents = [pid for pid, _ in queue], [doc for _, doc in queue]
            evidence, revised, cited = self.grounded(question, current, ids, documents)
            current.answer = revised or current.immediate_answer
            if cited is not None:
                current.evidence, current.cited_id = evidence, ids[cited]
