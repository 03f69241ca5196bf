"""DualRAG (seed 001): the program (:mod:`.program`), its outline, entity linking and document merging
(:mod:`.outline`), its gold stage targets (:mod:`.gold`) and the DualRAG-FT post-processing of teacher rows
(:mod:`.sft`)."""

from ..students import register_distill_preset
from . import gold  # noqa: F401 - registers DualRAG's gold stage targets
from .program import DualRAG

# App. B: a cosine learning-rate schedule (the rate itself was lost from the text); full-parameter training with
# DeepSpeed on 16 A100s is out of reach here, so the student is a LoRA adapter with DistillConfig's other defaults.
register_distill_preset("dualrag", scheduler="cosine")

__all__ = ["DualRAG"]
