"""ComposeRAG (seed 002): the program (:mod:`.program`) and the text plumbing between its modules
(:mod:`.composition`)."""

from . import gold  # noqa: F401 - registers ComposeRAG's gold stage targets
from .program import ComposeRAG

__all__ = ["ComposeRAG"]
