"""The Revelator's training data from the datasets' annotations (§4.2, App. B; issue 20): one gold builder per
Revelator stage, so ``multihop hanrag revelator-data`` (and ``multihop trajectories --program HANRAG --gold``) renders
each row exactly as the program's adapter sends it, demos included.

The paper builds these from its own compound benchmark, NQ, CommonsenseQA and a 72B annotator; ours, from the train
files' annotations alone (what the paper says each set holds, and our reading of it here):

- router ``<Q, CLS>``: each question with its :func:`~.routes.gold_route`, and one of its hops as a standalone
  question (the earlier answers substituted), drawn with the question's seed, labelled single-step (App. B.2's
  "sub-queries that make up the complex query");
- decomposer ``<Q, q1, q2, …>``: a compound (comparison) question → its record's own per-entity sub-questions (2Wiki;
  HotpotQA has none), with a thought in the style of Prompt 10's examples;
- refiner ``<Q, q1>``: each prefix of a complex question's hops → the next hop's question (App. B.4's "each
  reasoning step serves as a seed query"), and the drawn hop, asked alone with "nothing", → itself (App. B.4's
  single-step rows);
- relevance ``<Q, D, IS_REL>``: each hop's question with its supporting paragraph → true and with one of the
  question's unsupporting paragraphs → false (HotpotQA: the question with each supporting paragraph and as many
  distractors), the paper's annotator replaced by the data's support labels;
- ending ``<Q, q1, a1, …, IS_ENDING>``: each prefix of a complex question's hops → true at the last hop, else false.
"""

from __future__ import annotations

import dspy

from ..gold import (
    GoldContext,
    GoldHop,
    Pairs,
    annotated_hops,
    register_gold_builder,
    register_no_gold,
    render_paragraph,
)
from .program import HANRAG
from .routes import COMPLEX, COMPOUND, SINGLE_STEP, gold_route, render_steps


def drawn_hop(example: dspy.Example, context: GoldContext) -> GoldHop | None:
    """One hop of the question, drawn with its seed, that stands alone (no ``#n`` left): a single-step question."""
    hops = [hop for hop in annotated_hops(example) if "#" not in hop.query]
    return context.rng(example).choice(hops) if hops else None


def chain(example: dspy.Example) -> list[GoldHop]:
    """A complex question's hops as seed questions in order, or none for another route."""
    return annotated_hops(example) if gold_route(example) == COMPLEX else []


@register_gold_builder("HANRAG", "router")
def _router_target(program: HANRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    pairs = [({"question": example.question}, {"route": gold_route(example)})]
    hop = drawn_hop(example, context)
    if hop is not None and hop.query != example.question:
        pairs.append(({"question": hop.query}, {"route": SINGLE_STEP}))
    return pairs


@register_gold_builder("HANRAG", "decompose")
def _decompose_target(program: HANRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    sub_questions = list(example.get("decomposition") or [])
    if gold_route(example) != COMPOUND or len(sub_questions) < 2:
        return []
    thought = (f"This question consists of {len(sub_questions)} sub-questions that do not depend on each other: it "
               "asks the same about each thing it compares, so the original question can be decomposed into "
               f"{len(sub_questions)} sub-questions.")
    return [({"question": example.question}, {"thought": thought, "sub_questions": sub_questions})]


@register_gold_builder("HANRAG", "refine")
def _refine_target(program: HANRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    hops = chain(example)
    pairs = [({"question": example.question, "thought": render_steps([(h.query, h.answer) for h in hops[:j]])},
              {"seed_question": hop.query}) for j, hop in enumerate(hops)]
    single = drawn_hop(example, context)
    if single is not None:
        pairs.append(({"question": single.query, "thought": render_steps([])}, {"seed_question": single.query}))
    return pairs


@register_gold_builder("HANRAG", "ending")
def _ending_target(program: HANRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    hops = chain(example)
    return [({"question": example.question, "thought": render_steps([(h.query, h.answer) for h in hops[:j]])},
             {"finished": j == len(hops)}) for j in range(1, len(hops) + 1)]


@register_gold_builder("HANRAG", "relevance")
def _relevance_target(program: HANRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    paragraphs = list({p.get("id"): p for p in example.get("paragraphs") or []}.values())
    distractors = [p for p in paragraphs if not p.get("is_supporting")]
    hops = annotated_hops(example)
    asked = [(hop.query, hop.paragraph) for hop in hops] or [
        (example.question, render_paragraph(p)) for p in paragraphs if p.get("is_supporting")]
    rng = context.rng(example)
    drawn = rng.sample(distractors, min(len(distractors), len(asked)))
    pairs = [({"question": query, "document": document}, {"relevant": True}) for query, document in asked]
    pairs += [({"question": query, "document": render_paragraph(p)}, {"relevant": False})
              for (query, _), p in zip(asked, drawn, strict=False)]
    return pairs


for _stage, _why in {
    "answer": "the generator is not fine-tuned (§5): the Revelator's stages are",
    "aggregate": "the generator is not fine-tuned (§5): the Revelator's stages are",
    "direct_answer": "the generator is not fine-tuned (§5), and no data here holds a straightforward question",
}.items():
    register_no_gold("HANRAG", _stage, _why)
