"""Making programs better: prompt optimization with DSPy's optimizers, teacher trajectories, LoRA students."""

from .compile import OPTIMIZERS, compile_program

__all__ = ["OPTIMIZERS", "compile_program"]
