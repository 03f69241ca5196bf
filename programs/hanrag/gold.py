"""The Revelator's training data from the datasets' annotations (§4.2, App. B): one gold builder per
Revelator stage, so ``multihop hanrag revelator-data`` (and ``multihop trajectories --program HANRAG --gold``) renders
each row exactly as the program's adapter sends it, demos included.

The paper builds these from its own compound benchmark, NQ, CommonsenseQA and a 72B annotator; ours, from the train
files' annotations alone (what the paper says each set holds, and our reading of it here):

- router ``<Q, CLS>``: each question with the label of its :func:`~.routes.gold_route`, and one of its hops as a
  standalone question (the earlier answers substituted), drawn with the question's seed, labelled single-step (App.
  B.2's "sub-queries that make up the complex query");
- decomposer ``<Q, q1, q2, …>``: a comparison → its record's own per-entity sub-questions (2Wiki ``comparison``;
  HotpotQA has none, and a bridge comparison's are hops, not parts), with a thought in the style of Prompt 10's
  examples, and the drawn hop → itself (Prompt 10's Rule 2). The paper's compound questions ask several things of one
  entity; ours compare two, the only independent parts the data holds;
- refiner ``<Q, q1>``: each prefix of a complex question's hops → the next hop's question (App. B.4's "each
  reasoning step serves as a seed query"), and the drawn hop, asked alone with "nothing", → itself (App. B.4's
  single-step rows); a chain whose last hop does not answer the question is left out;
- relevance ``<Q, D, IS_REL>``: each hop's question with its supporting paragraph → true and with one of the
  question's unsupporting paragraphs → false (HotpotQA: the question with each supporting paragraph and as many
  distractors), the paper's annotator replaced by the data's support labels;
- ending ``<Q, q1, a1, …, IS_ENDING>``: each prefix of a complex question's hops → true at the last hop, else false.

Relevance pairs are the most numerous (two a hop), ending rows are one true to n-1 false: a multi-task student sees
the tasks in these proportions (``multihop distill`` reports the rows per stage).
"""

from __future__ import annotations

import dspy

from multihop.evaluation.metrics import exact_match

from ..gold_builders import (
    PLACEHOLDER,
    GoldContext,
    GoldHop,
    Pairs,
    annotated_hops,
    register_gold_builder,
    register_no_gold,
    render_paragraph,
)
from .program import HANRAG
from .routes import COMPLEX, SINGLE_STEP, gold_route, render_steps, route_label


def drawn_hop(example: dspy.Example, context: GoldContext) -> GoldHop | None:
    """One hop of the question, drawn with its seed, that stands alone (no ``#n`` left): a single-step question."""
    hops = [hop for hop in annotated_hops(example) if not PLACEHOLDER.search(hop.query)]
    return context.rng(example).choice(hops) if hops else None


def chain(example: dspy.Example) -> list[GoldHop]:
    """A complex question's hops as seed questions in order, or none for another route or a chain whose last answer
    is not the question's (the program answers with the last seed answer, Eq. 9)."""
    hops = annotated_hops(example) if gold_route(example) == COMPLEX else []
    return hops if hops and exact_match(hops[-1].answer, example.get("answers") or example.get("answer") or "") \
        else []


@register_gold_builder("HANRAG", "router")
def _router_target(program: HANRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    pairs = [({"question": example.question}, {"route": route_label(gold_route(example))})]
    hop = drawn_hop(example, context)
    if hop is not None and hop.query != example.question:
        pairs.append(({"question": hop.query}, {"route": route_label(SINGLE_STEP)}))
    return pairs


@register_gold_builder("HANRAG", "decompose")
def _decompose_target(program: HANRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    pairs = []
    sub_questions = list(example.get("decomposition") or [])
    if str(example.get("type") or "") == "comparison" and len(sub_questions) >= 2:
        thought = (f"This question consists of {len(sub_questions)} sub-questions that do not depend on each other: "
                   "it asks the same about each thing it compares, so the original question can be decomposed into "
                   f"{len(sub_questions)} sub-questions.")
        pairs.append(({"question": example.question}, {"thought": thought, "sub_questions": sub_questions}))
    single = drawn_hop(example, context)
    if single is not None:
        thought = ("This question is a very direct and simple question. There is no need to decompose it. It itself "
                   "consists of only one sub-problem")
        pairs.append(({"question": single.query}, {"thought": thought, "sub_questions": [single.query]}))
    return pairs


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
