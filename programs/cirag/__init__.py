"""CIRAG (seed 004): the program (:mod:`.program`), its triples with their provenance (:mod:`.triples`), its offline
triple cache (:mod:`.cache`), App. A's demos (:mod:`.demos`) and the gold rows its students train on (:mod:`.gold`);
the teacher-trajectory path is ``multihop trajectories --program CIRAG --complete-only``."""

from ..students import register_distill_preset
from . import gold  # noqa: F401 - registers the integrator's gold targets
from .program import CIRAG

# App. B.4 ("Training Details"): LoRA rank 64, 2 epochs, batch size 2, learning rate 2e-4. LoRA α is not given: 2·r
# is ours.
register_distill_preset("cirag", r=64, alpha=128, epochs=2, batch_size=2, lr=2e-4)

__all__ = ["CIRAG"]
