"""The budget of a comparison: what every program may spend (passages per retrieval, rounds of its loop, tokens per
LM call), shared by all or each program's own paper's."""

from __future__ import annotations

from dataclasses import asdict, dataclass

BUDGET_ITEMS = {"k": "passages per retrieval", "max_iterations": "iterations at most",
                "max_tokens": "tokens per LM call at most"}


BUDGET_MODES = ("shared", "paper")


@dataclass(frozen=True)
class Budget:
    """What every program of a comparison may spend. ``mode="shared"`` (the default): the same for all, applied
    wherever a program has the knob — ``k`` passages per retrieval, ``max_iterations`` rounds of its loop (a program's
    own name for it: max_steps, max_reflections...); ``mode="paper"``: each program as its own paper ran it (its
    defaults and its method's ``paper_settings``), ``k`` and ``max_iterations`` unused. ``max_tokens`` per LM call
    applies in both (None: the LM's own cap, which the comparison records)."""

    k: int = 5
    max_iterations: int = 4
    max_tokens: int | None = None
    mode: str = "shared"

    def __post_init__(self):
        if self.mode not in BUDGET_MODES:
            raise ValueError(f"budget mode must be one of {', '.join(BUDGET_MODES)}, got {self.mode!r}")
        for name, value in asdict(self).items():
            if name != "mode" and value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"budget {name} must be a whole number ≥ 1, got {value!r}")

    def as_dict(self) -> dict:
        return asdict(self)
