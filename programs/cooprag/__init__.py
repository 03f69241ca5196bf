"""CoopRAG (seed 000): the program (:mod:`.program`), its reasoning chains and unrolled query (:mod:`.chain`) and the
first step of its training loop, unrolling the train questions (:mod:`.training`)."""

from . import gold  # noqa: F401 - registers CoopRAG's gold stage targets
from .program import CoopRAG

__all__ = ["CoopRAG"]
