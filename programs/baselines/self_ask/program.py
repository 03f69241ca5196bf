"""Self-Ask (Press et al., Findings of EMNLP 2023) with retrieval: the LM asks itself follow-up questions, each
answered from the passages retrieved for it, until it gives the final answer.

The paper's: the scaffold "Are follow up questions needed here" → "Follow up: …" → "Intermediate answer: …" → … →
"So the final answer is: …" (Fig. 3), and "Self-Ask + Search Engine" (§3.2): every follow-up question goes to the
search engine, whose answer is the intermediate answer; without it (``retrieval=False``) the LM writes the intermediate
answers itself (Self-Ask alone). The authors' code's (``self-ask_plus_search-engine_demo.ipynb``, ``promptf``): when
the search engine has no answer for a follow-up (``get_answer`` returns None), the LM writes that intermediate answer
itself; here, when the retrieval returns no passage, ``own_answer`` answers the follow-up from the LM's knowledge
(``own_answer_fallback=True``, the default; False: the reader answers from no passage). The LM's own answer, there and
without retrieval (``intermediate``), is the authors' model continuing the whole scaffold after "Intermediate
answer:": with ``own_answer_context="chain"`` (the default) the stage reads the question, the follow-ups asked so far
with their answers and the follow-up just asked (:class:`ChainedIntermediateAnswer`; the authors' prompt also holds
its demonstrations, which here are the stage's own, none until an optimizer adds them); ``"follow_up"`` (ours) reads
the follow-up alone (:class:`ClosedBookIntermediateAnswer`). In the copies of ``promptf`` read, the branch where the
LM answers a follow-up itself does not refresh the text it continues, so the literal loop would ask the same
follow-up again; ours goes on to the next decision, as the notebook intends.

Ours: the search engine is the project's retriever (``k`` passages a follow-up) and a reader (``intermediate``) that
answers the follow-up from them (a passage index has no answer box); the scaffold's decision is one typed stage
(``follow_up``: whether one is needed, the question, or the final answer); at most ``max_follow_ups`` follow-ups
(the paper's prompts stop on their own; 4 is ours): a decision that still asks for one at the cap, asks a follow-up
it asked already, or asks none and gives no final answer ends the scaffold, and ``conclude`` writes the final answer
from the follow-ups answered (the authors' code appends "So the final answer is:" and lets the model finish); an
unparsable decision does the same (``follow_up.fallback``); an unparsable final or intermediate answer is empty,
never invented (``conclude.fallback``, ``intermediate.fallback``, ``own_answer.fallback``).

Counted per question: ``follow_ups`` (asked), ``follow_up_cap`` (a follow-up was still wanted at the cap),
``repeated_follow_up``, ``concluded`` (the final answer came from ``conclude``), ``own_answers`` (follow-ups the LM
answered itself, the retrieval having returned nothing).
``prediction.passage_ids`` are the passages every follow-up read, first seen first.
"""

from __future__ import annotations

from typing import Literal

import dspy

from multihop.retrievers.query import merge_hits
from multihop.runtime.tracing import count
from multihop.signatures.self_ask import (
    ChainedIntermediateAnswer,
    ClosedBookIntermediateAnswer,
    FinalAnswer,
    FollowUp,
    IntermediateAnswer,
)

from ...base import MultihopProgram
from ...text import safe_answer

OWN_ANSWER_CONTEXTS = ("chain", "follow_up")


def follow_up_line(question: str, answer: str) -> str:
    """One asked follow-up as the scaffold writes it."""
    return f"Follow up: {question} Intermediate answer: {answer}"


class SelfAsk(MultihopProgram):
    """Self-Ask with a retriever: follow-up questions answered from retrieved passages, then the final answer. The
    module docstring says what is the paper's and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm`` (unused with ``retrieval=False``).
        k: passages retrieved a follow-up question.
        max_follow_ups: follow-up questions at most.
        retrieval: answer each follow-up from retrieved passages (False: from the LM's knowledge, Self-Ask
            alone).
        own_answer_fallback: a follow-up whose retrieval returns nothing is answered from the LM's knowledge, as the
            authors' code lets the LM write the intermediate answer the search engine lacks (False: the reader
            answers it from no passage).
        own_answer_context: what the LM's own intermediate answer reads: ``"chain"`` (the authors': the question and
            the follow-ups so far with their answers, then the follow-up) or ``"follow_up"`` (ours: the follow-up
            alone).

    Example:
        >>> prediction = SelfAsk(retriever=retriever)(question="Who was president when the Eiffel Tower was built?")
        >>> prediction.follow_ups, prediction.answer
    """

    count_display = {"follow_ups": "mean", "follow_up_cap": "rate", "repeated_follow_up": "rate", "concluded": "rate",
                     "own_answers": "mean"}

    def __init__(self, retriever: dspy.Module | None = None, k: int = 5, max_follow_ups: int = 4,
                 retrieval: bool = True, own_answer_fallback: bool = True,
                 own_answer_context: Literal["chain", "follow_up"] = "chain"):
        if min(k, max_follow_ups) < 1:
            raise ValueError("k and max_follow_ups must be at least 1")
        if own_answer_context not in OWN_ANSWER_CONTEXTS:
            raise ValueError(f"unknown own_answer_context {own_answer_context!r}; choose one of "
                             f"{', '.join(OWN_ANSWER_CONTEXTS)}")
        super().__init__(retriever=retriever)
        self.k, self.max_follow_ups, self.retrieval = k, max_follow_ups, retrieval
        self.own_answer_fallback, self.own_answer_context = own_answer_fallback, own_answer_context
        own = ChainedIntermediateAnswer if own_answer_context == "chain" else ClosedBookIntermediateAnswer
        self.add_stages(follow_up=FollowUp, conclude=FinalAnswer, intermediate=IntermediateAnswer if retrieval else own,
                        own_answer=own if retrieval and own_answer_fallback else None)

    def forward(self, question: str) -> dspy.Prediction:
        asked: list[dict] = []
        read: list = []
        count("own_answers", 0)  # each follow-up the LM answers itself adds one (answer_follow_up)
        while True:
            lines = [follow_up_line(step["question"], step["answer"]) for step in asked]
            decision = self.run_stage(self.follow_up, {"follow_up_needed": False, "follow_up": "", "final_answer": ""},
                                      question=question, follow_ups=lines)
            follow_up = " ".join(str(decision.follow_up or "").split())
            wanted = bool(decision.follow_up_needed and follow_up and not decision.get("failed"))
            capped = wanted and len(asked) == self.max_follow_ups
            repeated = wanted and follow_up in (step["question"] for step in asked)
            if not wanted or capped or repeated:
                break
            asked.append({"question": follow_up, "answer": self.answer_follow_up(question, asked, follow_up, read)})
        final = "" if wanted else safe_answer(decision.final_answer)
        concluded = not final
        if concluded:
            lines = [follow_up_line(step["question"], step["answer"]) for step in asked]
            final = safe_answer(self.run_stage(self.conclude, {"final_answer": ""}, question=question,
                                               follow_ups=lines).final_answer)
        count("concluded", int(concluded))
        count("follow_ups", len(asked))
        count("follow_up_cap", int(capped))
        count("repeated_follow_up", int(repeated))
        passages = merge_hits(read, self.k * max(1, len(read))) if read else None
        return dspy.Prediction(answer=final, follow_ups=asked, passages=passages.passages if passages else [],
                               passage_ids=passages.ids if passages else [])

    def answer_follow_up(self, question: str, asked: list[dict], follow_up: str, read: list) -> str:
        """A follow-up's intermediate answer: from its retrieved passages (kept in ``read``), or the LM's own (without
        retrieval, or with ``own_answer_fallback`` when the retrieval returned nothing), which reads what
        ``own_answer_context`` says."""
        if not self.retrieval:
            return self.own(self.intermediate, question, asked, follow_up)
        hits = self.search(follow_up, k=self.k)
        if not hits.ids and self.own_answer_fallback:
            count("own_answers")
            return self.own(self.own_answer, question, asked, follow_up)
        read.append(hits)
        return safe_answer(self.run_stage(self.intermediate, {"intermediate_answer": ""}, passages=hits.passages,
                                          follow_up=follow_up).intermediate_answer)

    def own(self, stage: dspy.Module, question: str, asked: list[dict], follow_up: str) -> str:
        """The LM's own intermediate answer to ``follow_up``: after the question and the follow-ups ``asked`` so far
        (``own_answer_context="chain"``), or from the follow-up alone."""
        chain = {"question": question, "follow_ups": [follow_up_line(step["question"], step["answer"])
                                                      for step in asked]} if self.own_answer_context == "chain" else {}
        return safe_answer(self.run_stage(stage, {"intermediate_answer": ""}, **chain,
                                          follow_up=follow_up).intermediate_answer)
