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
    defaults and its method's ``paper_settings``), or, with ``paper`` (a method's name), as that paper ran it (the
    settings of its first row in that paper's declared tables: how DualRAG ran IRCoT), ``k`` and ``max_iterations``
    unused. ``max_tokens`` per LM call applies in all (None: the LM's own cap, which the comparison records)."""

    k: int = 5
    max_iterations: int = 4
    max_tokens: int | None = None
    mode: str = "shared"
    paper: str | None = None

    def __post_init__(self):
        if self.mode not in BUDGET_MODES:
            raise ValueError(f"budget mode must be one of {', '.join(BUDGET_MODES)}, got {self.mode!r}")
        if self.paper is not None and self.mode != "paper":
            raise ValueError("a paper's settings (paper=...) are the paper budget's: give mode='paper' with it")
        for name, value in asdict(self).items():
            if name not in ("mode", "paper") and value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"budget {name} must be a whole number ≥ 1, got {value!r}")

    @classmethod
    def parse(cls, text: str, **items) -> Budget:
        """A budget from its command-line form: ``shared``, ``paper`` or ``paper:METHOD`` (``paper:DualRAG``)."""
        mode, _, paper = text.partition(":")
        return cls(mode=mode, paper=paper or None, **items)

    def as_dict(self) -> dict:
        return {name: value for name, value in asdict(self).items() if name != "paper" or value is not None}
