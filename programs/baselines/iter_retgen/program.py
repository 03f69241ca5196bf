"""Iter-RetGen (Shao et al., Findings of EMNLP 2023): T rounds of retrieval and generation, each round retrieving
with the question and the previous round's generation.

The paper's: round 1 retrieves with the question; round t > 1 retrieves with the previous generation y_{t−1}
concatenated with the question; each round generates with chain-of-thought from that round's paragraphs alone, as a
whole (no interleaving inside a generation), its demonstrations ending in "So the answer is"; the last round's answer
is the answer. ``k`` paragraphs a round, ``iterations`` T (the paper evaluates T from 1 to 7).

Ours: ``k = 5`` and T = 2 as defaults (the shared budget of ``compare`` sets both); the generation is an instruction
and two typed fields, the reasoning and the short answer (:class:`~multihop.signatures.shared.AnswerWithReasoning`),
where the paper has demonstrations; the query is the reasoning, then the answer, then the question; an unparsable
generation keeps the previous round's (``generate.fallback``; its query is then the previous one) and an empty answer
is never invented; the ``rerank``/``n`` switches (:class:`~..baselines.RerankableBaseline`) give DualRAG's App. H.4
search (top ``n`` → reranker → top ``k``; default off). Not built: the paper's generation-augmented retrieval
adaptation (distilling the re-ranker from the generations), a training step of its own. ``prediction.passage_ids``
are the paragraphs of every round (first seen first), what the rounds read.

Counted per question: ``rounds``; ``answer_changed`` (rounds whose answer differs from the round before).
"""

from __future__ import annotations

import dspy

from multihop.retrievers.query import merge_hits
from multihop.runtime.tracing import count
from multihop.signatures import AnswerWithReasoning

from ...text import safe_answer
from ..rerankable import RerankableBaseline


def next_query(question: str, reasoning: str, answer: str) -> str:
    """Round t's query: the previous generation (its reasoning and answer) followed by the question."""
    return " ".join(" ".join(part.split()) for part in (reasoning, answer, question) if part and part.strip())


class IterRetGen(RerankableBaseline):
    """Iter-RetGen: retrieve with the question and the last generation, generate again, ``iterations`` times. The
    module docstring says what is the paper's and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: paragraphs retrieved a round.
        iterations: rounds of retrieval and generation (T).
        rerank: a reranker of :data:`multihop.retrievers.RERANKERS` over the first stage's top ``n`` (None: off).
        n: first-stage candidates the reranker sees.

    Example:
        >>> prediction = IterRetGen(retriever=retriever, iterations=2)(question="Who directed the film ...?")
        >>> prediction.queries, prediction.generations, prediction.answer
    """

    count_display = {"rounds": "mean", "answer_changed": "mean"}

    def __init__(self, retriever: dspy.Module | None = None, k: int = 5, iterations: int = 2,
                 rerank: str | None = None, n: int = 50):
        if min(k, iterations) < 1:
            raise ValueError("k and iterations must be at least 1")
        super().__init__(retriever, k, n, rerank)
        self.iterations = iterations
        self.add_stages(generate=AnswerWithReasoning)

    def forward(self, question: str) -> dspy.Prediction:
        query, reasoning, answer = question, "", ""
        queries, generations, read, changed = [], [], [], 0
        for _ in range(self.iterations):
            hits = self.search(query, k=self.k)
            queries.append(query)
            read.append(hits)
            result = self.run_stage(self.generate, {"reasoning": reasoning, "answer": answer}, passages=hits.passages,
                                    question=question)
            new_answer = safe_answer(result.answer)
            changed += int(bool(generations) and new_answer != answer)
            reasoning, answer = str(result.reasoning or ""), new_answer
            generations.append({"reasoning": reasoning, "answer": answer})
            query = next_query(question, reasoning, answer)
        count("rounds", len(generations))
        count("answer_changed", changed)
        passages = merge_hits(read, self.k * self.iterations)
        return dspy.Prediction(answer=answer, queries=queries, generations=generations, passages=passages.passages,
                               passage_ids=passages.ids, scores=passages.scores)
