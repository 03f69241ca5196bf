"""Adaptive-RAG's stages are its strategies' (NoRetrieval's, SingleStepRAG's, IRCoT's) under the strategy's name; the
method trains none of them (§3.2: only the classifier is trained), so their gold rows are the strategies' own: build
them for the strategy's program and serve the student on Adaptive-RAG's stage (``set_stage_lm``)."""

from __future__ import annotations

from ...gold_builders import register_no_gold
from .program import READERS, AdaptiveRAG

OWNERS = {"ClosedBookCoT": "NoRetrieval", "SingleStepCoT": "SingleStepRAG"}  # the CoT readers' programs


def register_strategy_stages() -> None:
    """Record every strategy stage (of either reader) as one without gold rows of Adaptive-RAG's own, naming the
    program whose are."""
    for reader in READERS:
        program = AdaptiveRAG(route="oracle", reader=reader)  # every strategy
        for stage in program.stage_names():
            strategy = stage.split(".")[0]
            owner = type(getattr(program, strategy)).__name__
            owner = OWNERS.get(owner, owner)
            register_no_gold("AdaptiveRAG", stage, f"Adaptive-RAG trains no strategy stage: build {owner}'s rows "
                             f"(`multihop trajectories --gold --program {owner}`) and set the student on {strategy}")


register_strategy_stages()
