"""DSPy signatures, one module per method; each docstring is the stage's instruction."""

from .shared import AnswerFromPassages, DirectAnswer

__all__ = ["AnswerFromPassages", "DirectAnswer"]
