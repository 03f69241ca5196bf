"""HANRAG's routes and the pure helpers around them: the router's labels, the refiner's "Thought" (the seed queries
answered so far), the route a question's annotations give (the router's training label and HANRAG-Oracle's route) and
the paper's Steps.

The route of an annotated question is ours (our reading of App. B.2 on this project's data; App. B.2 labels
CommonsenseQA straightforward, NQ and MuSiQue's sub-questions single-step, MuSiQue complex and its own benchmark
compound, and App. C's oracle treats whole multi-hop datasets as complex): a ``route`` field the record carries wins;
a comparison (HotpotQA and 2Wiki ``comparison``, 2Wiki ``bridge_comparison``) is compound, its parts asked
independently and compared by the aggregator (a bridge comparison's last hop is a date, not the answer, so a seed
chain would end on the wrong answer); every other multi-hop question (MuSiQue, HotpotQA ``bridge``, 2Wiki
``compositional`` and ``inference``) is complex; a question of one hop, or without hop annotations, is single-step.
None of the project's data holds a straightforward question (CommonsenseQA does not ship here), so only a record's
own ``route`` field can say so. Our oracle's Steps are therefore not the paper's Tables 3–5 setting.
"""

from __future__ import annotations

from typing import get_args

import dspy

from multihop.signatures.hanrag import NOTHING, RouteLabel

LABELS: tuple[str, ...] = get_args(RouteLabel)
ROUTES: tuple[str, ...] = tuple(label.removesuffix(" question") for label in LABELS)
STRAIGHTFORWARD, SINGLE_STEP, COMPOUND, COMPLEX = ROUTES
COMPARISON_TYPES = frozenset({"comparison", "bridge_comparison"})  # HotpotQA's and 2Wiki's comparison questions


def render_steps(steps: list[tuple[str, str]]) -> str:
    """The refiner's and ending discriminator's "Thought": each answered seed query and its answer as Prompt 12's
    Example-3 writes them, or "nothing" before the first step."""
    if not steps:
        return NOTHING
    return "\n".join(f"**seed query-{i}**: {query}\n**answer-{i}**: {answer}"
                     for i, (query, answer) in enumerate(steps, start=1))


def route_label(route: str) -> str:
    """The router's label of a route ("complex" → "complex question", Prompt 11's wording)."""
    return f"{route} question"


def route_of(text: str | None) -> str | None:
    """The route a router label names, or None."""
    route = str(text or "").removesuffix(" question")
    return route if route in ROUTES else None


def gold_route(example: dspy.Example) -> str:
    """The route an annotated question takes (the module docstring's rules)."""
    if example.get("route") in ROUTES:
        return example.route
    if str(example.get("type") or "") in COMPARISON_TYPES:
        return COMPOUND
    hops = int(example.get("hops") or len(example.get("decomposition") or []) or 1)
    return SINGLE_STEP if hops <= 1 else COMPLEX


def with_gold_routes(examples: list[dspy.Example]) -> list[dspy.Example]:
    """``examples`` with their :func:`gold_route` as the input ``gold_route``, which HANRAG-Oracle
    (``HANRAG(route="oracle")``) follows."""
    return [example.copy(gold_route=gold_route(example)).with_inputs(*example.inputs().keys(), "gold_route")
            for example in examples]


def step_count(route: str, seeds: int) -> int:
    """The paper's Steps (§5: retrieval–generation cycles): none for a straightforward question, one for a single-step
    or a compound one (its sub-questions are retrieved for together, App. C and F), one per seed question of a
    complex one."""
    return {STRAIGHTFORWARD: 0, SINGLE_STEP: 1, COMPOUND: 1}.get(route, seeds)
