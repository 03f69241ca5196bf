"""CIRAG (seed 004). For now this package holds only the paper's distillation preset; the program and its trajectory
distillation land in a later issue."""

from ..students import register_distill_preset

# App. B.4 ("Training Details"): LoRA rank 64, 2 epochs, batch size 2, learning rate 2e-4. LoRA α is not given: 2·r.
register_distill_preset("cirag", r=64, alpha=128, epochs=2, batch_size=2, lr=2e-4)
