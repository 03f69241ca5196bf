"""Compiling programs with DSPy's optimizers (more optimizers and LoRA students come with the optimize issue)."""

from .compile import compile_program

__all__ = ["compile_program"]
