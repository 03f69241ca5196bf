"""IRCoT (Trivedi et al., ACL 2023): interleave retrieval with a chain of thought, each new sentence of the chain the
query of the next retrieval, then read the collected paragraphs ("IRCoT QA").

The paper's: retrieve ``k`` paragraphs with the question (§3.1); then each step ``reason`` writes the next sentence of
the chain from the question, every paragraph collected so far and the chain so far (the paper keeps the first
generated sentence of a longer generation — here the output is one sentence by its field); a sentence that says "answer
is" ends the loop, else it retrieves ``k`` more paragraphs with that sentence, added to the collection (repeats
dropped); at most ``max_steps = 8`` reasoning steps and ``max_paragraphs = 15`` paragraphs in all (§3.1: "up to 8
steps", "at most 15 paragraphs"); the answer from a separate reader over the collected paragraphs (§3.2, the Direct
reader; ``reader=False``: the answer the chain states, the paper's CoT reader reading its own chain). ``k`` is tuned
over {2, 4, 6, 8} per dataset on dev in the paper; ours is 4 by default (the shared budget sets it in ``compare``).

Ours: a chain that reaches ``max_steps`` without stating the answer goes to the reader as it is (``reader=False``:
the answer is empty, never invented; counted ``step_cap``); paragraphs beyond ``max_paragraphs`` are not added (the
first ones collected stay); the optional ``rerank``/``n`` switches give it the top-``n`` → reranker → top-``k`` search
of DualRAG's App. H.4, which runs every baseline that way (default off, the paper's plain BM25 top ``k``).

Counted per question: ``steps`` (reasoning calls), ``step_cap`` (the loop ended at ``max_steps`` without the answer
phrase), ``paragraphs`` (collected, what the reader read). Fallbacks (``run_stage``): an unparsable reasoning step ends
the chain where it is (``reason.fallback``); an unparsable reader answer is empty (``answer.fallback``).
"""

from __future__ import annotations

import dspy

from multihop.retrievers import checked_reranker
from multihop.retrievers.query import merge_hits
from multihop.signatures import AnswerFromPassages
from multihop.signatures.ircot import ReasonStep
from multihop.tracing import count

from ..base import MultihopProgram
from ..text import safe_answer, stated_answer


class IRCoT(MultihopProgram):
    """IRCoT: a chain of thought whose every sentence retrieves the paragraphs for the next one, then a reader over
    the collected paragraphs. The module docstring says what is the paper's and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: paragraphs retrieved a step (the question's and each sentence's).
        max_steps: reasoning steps at most.
        max_paragraphs: paragraphs collected at most (the reader's and each step's context).
        reader: answer with a separate reader over the collected paragraphs (False: the answer the chain states).
        rerank: a reranker of :data:`multihop.retrievers.RERANKERS` over the first stage's top ``n`` (None: off).
        n: first-stage candidates the reranker sees.

    Example:
        >>> prediction = IRCoT(retriever=retriever, k=4)(question="In what country was Lost Gravity manufactured?")
        >>> prediction.reasoning, prediction.queries, prediction.answer
    """

    count_display = {"steps": "mean", "step_cap": "rate", "paragraphs": "mean"}

    def __init__(self, retriever: dspy.Module | None = None, k: int = 4, max_steps: int = 8,
                 max_paragraphs: int = 15, reader: bool = True, rerank: str | None = None, n: int = 50):
        if min(k, max_steps, max_paragraphs) < 1:
            raise ValueError("k, max_steps and max_paragraphs must be at least 1")
        super().__init__(retriever=retriever)
        self.k, self.max_steps, self.max_paragraphs, self.reader = k, max_steps, max_paragraphs, reader
        self.rerank, self.n = checked_reranker(rerank), n
        self.add_stages(reason=ReasonStep, answer=AnswerFromPassages if reader else None)

    def forward(self, question: str) -> dspy.Prediction:
        queries = [question]
        collected = self.search(question, k=self.k)
        reasoning: list[str] = []
        stated, steps = None, 0
        while steps < self.max_steps:
            steps += 1
            step = self.run_stage(self.reason, {"next_sentence": ""}, passages=collected.passages, question=question,
                                  reasoning=reasoning)
            sentence = " ".join(str(step.next_sentence or "").split())
            if not sentence:
                break
            reasoning.append(sentence)
            stated = stated_answer(sentence)
            if stated is not None:
                break
            queries.append(sentence)
            collected = merge_hits([collected, self.search(sentence, k=self.k)], self.max_paragraphs)
        count("steps", steps)
        count("step_cap", int(steps == self.max_steps and stated is None and len(reasoning) == steps))
        count("paragraphs", len(collected.ids))
        if self.reader:
            answer = self.run_stage(self.answer, {"answer": ""}, passages=collected.passages,
                                    question=question).answer
        else:
            answer = stated or ""
        return dspy.Prediction(answer=safe_answer(answer), reasoning=reasoning, queries=queries,
                               passages=collected.passages, passage_ids=collected.ids, scores=collected.scores)

