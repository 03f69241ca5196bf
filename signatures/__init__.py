"""DSPy signatures, one module per method; each docstring is the stage's instruction."""

from .shared import AnswerFromPassages, AnswerWithReasoning, DirectAnswer

__all__ = ["AnswerFromPassages", "AnswerWithReasoning", "DirectAnswer"]
