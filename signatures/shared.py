"""Signatures shared by the baselines: the papers' "Direct" and "NativeRAG" answerers, and a reader that reasons
before it answers (Iter-RetGen's generation, IRCoT's CoT reader); and the bound every stage's list shares.

A list a stage must fill — sub-questions, a reasoning chain, entities to search — is declared
``dspy.OutputField(min_length=1, max_length=MOST_ITEMS)``: the prompt states the bounds, and the schema a constrained
LM decodes under carries them (``minItems``/``maxItems``, :func:`multihop.lm.adapter.with_item_bounds`), so the reply
never leaves the list empty. A list a stage may leave empty (ComposeRAG's sub-questions of a simple question, CIRAG's
facts kept) has no lower bound.
"""

import dspy

MOST_ITEMS = 6  # items a stage's list holds at most: the most sub-questions or triples a method's stage asks for


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
