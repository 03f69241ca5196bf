"""HANRAG (seed 003). For now this package holds only the paper's distillation preset; the program, its Revelator and
their training land in a later issue."""

from ..students import register_distill_preset

# App. D ("Implementation details"): LoRA, one epoch, initial learning rate 1e-4, cosine scheduler, 10% of the training
# samples for warm-up. Rank, α and batch size are not given: DistillConfig's defaults.
register_distill_preset("hanrag", epochs=1, lr=1e-4, scheduler="cosine", warmup=0.1)
