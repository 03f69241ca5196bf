"""Distillation presets: the LoRA settings a method's paper trains its student with, by name.

Each method's package registers its paper's preset where the method lives (:func:`register_distill_preset`), and
:meth:`multihop.optimize.distill.DistillConfig.preset` reads :data:`DISTILL_PRESETS`, so no shared code names a
method. Settings are ``DistillConfig`` fields (checked when a preset is used); ``default`` is its defaults."""

from __future__ import annotations

DISTILL_PRESETS: dict[str, dict] = {"default": {}}


def register_distill_preset(name: str, **settings) -> None:
    """Register ``settings`` as the preset ``name``; the same name with other settings is refused."""
    if DISTILL_PRESETS.get(name, settings) != settings:
        raise ValueError(f"distillation preset {name!r} is registered already, as {DISTILL_PRESETS[name]}")
    DISTILL_PRESETS[name] = settings
