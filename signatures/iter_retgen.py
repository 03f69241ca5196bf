"""Iter-RetGen's generation (Shao et al., Findings of EMNLP 2023, "Enhancing Retrieval-Augmented Large Language Models
with Iterative Retrieval-Generation Synergy").

The paper prompts with chain-of-thought demonstrations (its App. A): the retrieved paragraphs, the question, and a
step-by-step answer ending in "So the answer is". Ours: that format written out as the instruction, the reasoning and
the short answer as two typed fields (the reasoning is what the next iteration retrieves with).
"""

import dspy


class GenerateWithRetrieval(dspy.Signature):
    """Answer the question using the retrieved paragraphs. First reason step by step in a few short sentences, then
    give the shortest answer that is correct: an entity, a date, a number, or yes/no."""

    passages: list[str] = dspy.InputField(desc="retrieved paragraphs")
    question: str = dspy.InputField()
    reasoning: str = dspy.OutputField(desc="a few short sentences of reasoning")
    answer: str = dspy.OutputField(desc="a short answer phrase")
