"""HANRAG (seed 003): the program (:mod:`.program`), its routes and Steps (:mod:`.routes`), the App. G examples as
demos (:mod:`.demos`) and the Revelator's training data from the annotations (:mod:`.gold`)."""

from ..students import register_distill_preset
from . import gold  # noqa: F401 - registers the Revelator's gold stage targets
from .program import HANRAG, REVELATOR_STAGES
from .routes import gold_route, with_gold_routes

# App. D ("Implementation details"): LoRA, one epoch, initial learning rate 1e-4, cosine scheduler, 10% of the training
# samples for warm-up. Rank, α and batch size are not given: DistillConfig's defaults.
register_distill_preset("hanrag", epochs=1, lr=1e-4, scheduler="cosine", warmup=0.1)

__all__ = ["HANRAG", "REVELATOR_STAGES", "gold_route", "with_gold_routes"]
