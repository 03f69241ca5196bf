"""Signatures shared by the baselines: the papers' "Direct" and "NativeRAG" answerers, and a reader that reasons
before it answers (Iter-RetGen's generation, IRCoT's CoT reader)."""

import dspy


class DirectAnswer(dspy.Signature):
    """Answer the question from your own knowledge. Give the shortest answer that is correct: an entity, a date,
    a number, or yes/no. Do not explain."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short answer phrase")


class AnswerFromPassages(dspy.Signature):
    """Answer the question using the retrieved passages. Give the shortest answer that is correct: an entity, a
    date, a number, or yes/no. Do not explain."""

    passages: list[str] = dspy.InputField(desc="retrieved passages, most relevant first")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short answer phrase")


class AnswerWithReasoning(dspy.Signature):
    """Answer the question using the retrieved passages. First reason step by step in a few short sentences, then
    give the shortest answer that is correct: an entity, a date, a number, or yes/no."""

    passages: list[str] = dspy.InputField(desc="retrieved passages")
    question: str = dspy.InputField()
    reasoning: str = dspy.OutputField(desc="a few short sentences of reasoning")
    answer: str = dspy.OutputField(desc="a short answer phrase")
