"""CIRAG's gold integration targets (issue 21's "gold-derived" distillation rows; §3.5 distils a teacher's
trajectories, which no strong LM here can write).

A question's rounds are its annotated hops grouped by dependency depth (:func:`multihop.programs.gold.annotated_hops`),
each hop a triple: 2Wiki's evidence triple, or a MuSiQue ``"E >> relation"`` step as ``[E, relation, answer]`` (a
question whose steps are written as questions has no triple to give, and no rows; HotpotQA has none). Round r's
candidates are its own triples among the earlier rounds' (facts already known: a later round's triple would show the
answer the target says is still missing), shuffled with the question's seed;
the target keeps the round's triples as the core facts, a thought naming them, and the next round's first question
(the hop's own sub-question, earlier answers substituted) or "<no question>" after the last round. The history is the
earlier rounds as the program writes it.
"""

from __future__ import annotations

import dspy

from multihop.signatures.cirag import NO_QUESTION

from ..gold import GoldContext, GoldHop, Pairs, annotated_hops, register_gold_builder, register_no_gold, substitute
from .program import CIRAG, history_entry
from .triples import Triple


def gold_triples(example: dspy.Example) -> list[tuple[GoldHop, Triple]]:
    """Each annotated hop with its triple, or none when a hop has no triple."""
    hops = annotated_hops(example)
    evidences = example.get("evidences") or []
    steps = example.get("decomposition") or []
    answers = example.get("decomposition_answers") or []
    paired = []
    for i, hop in enumerate(hops):
        if evidences:
            subject, relation, obj = evidences[i]
        elif i < len(steps) and ">>" in steps[i]:
            entity, relation = (part.strip() for part in steps[i].split(">>", 1))
            subject, obj = substitute(entity, answers[:i]), hop.answer
        else:
            return []
        paired.append((hop, Triple(subject, relation, obj, hop.paragraph_id or "")))
    return paired


@register_gold_builder("CIRAG", "integrate")
def _integrate_target(program: CIRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    paired = gold_triples(example)
    if not paired:
        return []
    depth = max(hop.depth for hop, _ in paired)
    rounds = [[(hop, t) for hop, t in paired if hop.depth == d] for d in range(depth + 1)]
    rounds = [r for r in rounds if r]
    rng = context.rng(example)
    pairs, history, query = [], [], example.question
    for r, round_ in enumerate(rounds):
        own = [t for _, t in round_]
        noise = [t for earlier in rounds[:r] for _, t in earlier]
        candidates = own + noise
        rng.shuffle(candidates)
        core = [t.render() for t in own]
        question = rounds[r + 1][0][0].query if r + 1 < len(rounds) else NO_QUESTION
        thought = ("The useful facts are " + "; ".join(core) + (". They answer the question." if question == NO_QUESTION
                                                                else f". Still missing: {question}"))
        pairs.append(({"query": example.question, "fact_before_filter": [t.render() for t in candidates],
                       "historical_context": list(history)},
                      {"thought": thought, "fact_after_filter": [list(t.key) for t in own], "question": question}))
        history.append(history_entry(query, thought, core, question))
        query = question
    return pairs


for _stage, _why in {
    "extract_entities": "no data here annotates a passage's entities",
    "extract_triples": "no data here annotates a passage's triples (2Wiki's evidences cover the supporting facts only)",
    "answer_triple": "§3.5 distils the integrator only; the answers stay on the base LM",
    "answer_sentence": "§3.5 distils the integrator only; the answers stay on the base LM",
    "answer_passage": "§3.5 distils the integrator only; the answers stay on the base LM",
}.items():
    register_no_gold("CIRAG", _stage, _why)
