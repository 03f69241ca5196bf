"""Signatures shared by the baselines: the papers' "Direct" and "NativeRAG" answerers."""

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
