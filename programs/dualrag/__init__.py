"""DualRAG (seed 001): the program (:mod:`.program`), its outline, entity linking and document merging
(:mod:`.outline`), its gold stage targets (:mod:`.gold`) and the DualRAG-FT post-processing of teacher rows
(:mod:`.sft`)."""

from . import gold  # noqa: F401 - registers DualRAG's gold stage targets
from .program import DualRAG

__all__ = ["DualRAG"]
