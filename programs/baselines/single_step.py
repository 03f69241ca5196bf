"""The papers' two baselines: "Direct" (no retrieval) and "NativeRAG" (retrieve top-k once, then answer).

The papers report one or both (HANRAG's "No retrieval" and "Single-step Approach", DualRAG's and CIRAG's NativeRAG);
they are the floor every method is compared against on the same LM and retriever. DualRAG gives every baseline its own
retrieval: the top 50 reranked to the top 10 (Cheng et al., 2025, §4.3 and App. H.4, "fair comparison across
baselines"), which is ``SingleStepRAG(rerank=..., n=50, k=10)``; without ``rerank`` it reads the retriever as it is.
"""

from __future__ import annotations

import dspy

from multihop.signatures import AnswerFromPassages, DirectAnswer

from ..base import MultihopProgram
from ..gold_builders import GoldContext, Pairs, reader_pairs, register_gold_builder, register_no_gold
from ..registry import Declaration
from ..text import safe_answer
from .rerankable import RerankableBaseline


class NoRetrieval(MultihopProgram):
    """The papers' "Direct" baseline: answer from the LM's parametric knowledge alone (one LLM call, no retrieval).

    Example:
        >>> NoRetrieval()(question="What is the capital of France?").answer
    """

    def __init__(self):
        super().__init__(retriever=None)
        self.add_stages(answer=DirectAnswer)

    def forward(self, question: str) -> dspy.Prediction:
        result = self.run_stage(self.answer, {"answer": ""}, question=question)
        return dspy.Prediction(answer=safe_answer(result.answer), passage_ids=[])


class SingleStepRAG(RerankableBaseline):
    """The papers' "NativeRAG" baseline: retrieve the top ``k`` passages for the question once, then answer from them
    (one retrieval, one LLM call).

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: passages the answer reads.
        n: first-stage passages the reranker reads (with ``rerank`` only; DualRAG §4.3: 50).
        rerank: a reranker of :data:`multihop.retrievers.RERANKERS` that reranks the retriever's first-stage top
            ``n`` to ``k`` (DualRAG's baselines, App. H.4), or None: the retriever as it is.

    Example:
        >>> prediction = SingleStepRAG(retriever=retriever, k=5)(question="What is the capital of France?")
        >>> prediction.answer, prediction.passage_ids
        >>> SingleStepRAG(retriever=retriever, k=10, n=50, rerank="maxsim")  # DualRAG's NativeRAG
    """

    def __init__(self, retriever: dspy.Module | None = None, k: int = 5, n: int = 50, rerank: str | None = None):
        super().__init__(retriever, k, n, rerank)
        self.add_stages(answer=AnswerFromPassages)

    def forward(self, question: str) -> dspy.Prediction:
        hits = self.search(question, k=self.k)
        result = self.run_stage(self.answer, {"answer": ""}, passages=hits.passages, question=question)
        return dspy.Prediction(
            answer=safe_answer(result.answer), passages=hits.passages, passage_ids=hits.ids, scores=hits.scores
        )


@register_gold_builder("SingleStepRAG", "answer")
def _reader_target(program: SingleStepRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    """The reader: the gold passages among the question's distractors (``k`` of the program's) → the gold answer."""
    return reader_pairs(example, program.k, context)


register_no_gold("NoRetrieval", "answer", "a closed-book answer has no evidence to learn from: training it on the "
                 "train answers would only memorise them")


Declaration(NoRetrieval, kind="baseline")  # the papers' "Direct" row
Declaration(SingleStepRAG, kind="baseline")  # the papers' "NativeRAG" / "Single-step Approach" row
