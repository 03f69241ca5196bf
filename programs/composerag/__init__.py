"""ComposeRAG (seed 002): the program (:mod:`.program`) and the text plumbing between its modules
(:mod:`.composition`)."""

from .program import ComposeRAG

__all__ = ["ComposeRAG"]
