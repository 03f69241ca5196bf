"""DualRAG's stage targets from the data's annotations ("gold-derived" DualRAG-FT rows; §3.2 builds them from
a 72B teacher, which does not run offline).

A question's gold run is a list of retrieval rounds, each a list of hops that can be searched for together
(:func:`gold_rounds`). A hop is an entity, its query, its supporting paragraph and its knowledge:

- MuSiQue: a decomposition step that reads an earlier answer (``#n``) comes one round after the last step it reads;
  steps that read none share the first round (3hop2's and 4hop3's independent first steps are searched together).
  The entity is the title of the step's supporting paragraph, the query the step as a question with the earlier
  answers substituted, the knowledge the paragraph's sentence that states the step's answer.
- 2Wiki: one hop per evidence triple ``[head, relation, tail]``; a triple whose head is an earlier tail waits for
  that triple's round, so a comparison's two triples share one round (as Table 9's first step searches both films)
  and a composition's steps follow each other. The entity is the supporting paragraph titled like the head (else the
  head), the query the record's own sub-question (else "What is the relation of head?"), the knowledge the
  paragraph's supporting sentences (else its sentence stating the tail).
- HotpotQA has no order of its two paragraphs: it gives summarizer and answer rows only.

From the rounds (our rule: the retrieval flag follows the hop count): the Reasoner
asks for retrieval before each round (its thought names the round's queries) and concludes after the last one (its
thought states each query's answer and "So the answer is …", which also serves the IRCoT-style "w/o R" stage); the
Entity Identifier names each round's entities with their queries, the earlier rounds' entities given as known; the
Knowledge Summarizer turns each hop's paragraph, among the question's distractors (``k`` documents in all, as the
program keeps per entity), into its knowledge, and one more row per question shows it distractors alone, whose
target is an empty fragment; the answer reads the full outline and the reasoning. The outline an input shows is built
from the earlier rounds' knowledge and rendered as the program renders it (structured or flat; raw paragraphs
without the summarizer).
"""

from __future__ import annotations

import dspy

from ..gold_builders import (
    GoldContext,
    GoldHop,
    Pairs,
    annotated_hops,
    gold_documents,
    register_gold_builder,
    render_paragraph,
)
from .outline import Outline
from .program import DualRAG


def gold_rounds(example: dspy.Example) -> list[list[GoldHop]]:
    """The question's gold retrieval rounds (see the module docstring): its annotated hops grouped by the depth of
    the earlier hops they read; empty without a decomposition."""
    hops = annotated_hops(example)
    rounds: list[list[GoldHop]] = [[] for _ in range(max((hop.depth for hop in hops), default=-1) + 1)]
    for hop in hops:
        rounds[hop.depth].append(hop)
    return [round_ for round_ in rounds if round_]


def asking(round_: list[GoldHop]) -> str:
    """The Reasoner's thought before a round: the knowledge it lacks."""
    return "I need to find out: " + " ".join(hop.query for hop in round_)


def concluding(rounds: list[list[GoldHop]], answer: str) -> str:
    """The Reasoner's last thought: each query's answer, then the answer."""
    facts = "; ".join(f"{hop.query.rstrip('?')}: {hop.answer}" for round_ in rounds for hop in round_)
    return f"From the known knowledge, {facts}. So the answer is {answer}." if facts else f"So the answer is {answer}."


def gold_outline(program: DualRAG, rounds: list[list[GoldHop]]) -> str:
    """The outline after ``rounds``, as the program shows it: summaries by entity, or raw paragraphs flat."""
    outline = Outline()
    for round_ in rounds:
        for hop in round_:
            outline.add(hop.entity, hop.knowledge if program.knowledge_outline else hop.paragraph)
    return program.shown(outline)


def thoughts(rounds: list[list[GoldHop]], answer: str) -> list[str]:
    return [*(asking(round_) for round_ in rounds), concluding(rounds, answer)]


@register_gold_builder("DualRAG", "reason")
def _reason_target(program: DualRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    rounds = gold_rounds(example)
    if not rounds or not example.get("answer"):
        return []
    steps = thoughts(rounds, example.answer)
    pairs = []
    for r, thought in enumerate(steps):
        inputs = {"question": example.question, "knowledge_outline": gold_outline(program, rounds[:r]),
                  "reasoning_history": steps[:r]}
        outputs = {"thought": thought, **({"need_retrieval": r < len(rounds)} if program.reasoner else {})}
        pairs.append((inputs, outputs))
    return pairs


@register_gold_builder("DualRAG", "identify")
def _identify_target(program: DualRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    rounds = gold_rounds(example)
    if not rounds or not example.get("answer"):
        return []
    steps = thoughts(rounds, example.answer)
    pairs = []
    for r, round_ in enumerate(rounds):
        entities: dict[str, list[str]] = {}
        for hop in round_:
            entities.setdefault(hop.entity, []).append(hop.query)
        known = list(dict.fromkeys(hop.entity for earlier in rounds[:r] for hop in earlier))
        pairs.append(({"question": example.question, "knowledge_outline": gold_outline(program, rounds[:r]),
                       "reasoning_history": steps[: r + 1], "known_entities": known},
                      {"entities": [{"entity": name, "queries": queries} for name, queries in entities.items()]}))
    return pairs


@register_gold_builder("DualRAG", "summarize")
def _summarize_target(program: DualRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    """Each hop's paragraph among distractors → its knowledge; HotpotQA: each supporting paragraph → its supporting
    sentences; then one row of distractors alone → an empty fragment."""
    rounds = gold_rounds(example)
    steps = thoughts(rounds, example.answer) if rounds and example.get("answer") else [
        f"I need to find out: {example.question}"]
    hops = [(r, hop) for r, round_ in enumerate(rounds) for hop in round_] or [
        (0, hop) for hop in _supporting_hops(example)]
    pairs = []
    for r, hop in hops:
        documents = [p.render() for p in gold_documents(example, program.k, context, [hop.paragraph_id],
                                                        salt=hop.entity)]
        pairs.append(({"question": example.question, "reasoning_history": steps[: r + 1], "entity": hop.entity,
                       "queries": [hop.query], "documents": documents}, {"knowledge": hop.knowledge}))
    if hops:
        r, hop = hops[0]
        noise = [p.render() for p in gold_documents(example, program.k, context, [], salt=f"noise:{hop.entity}")]
        if noise:
            pairs.append(({"question": example.question, "reasoning_history": steps[: r + 1], "entity": hop.entity,
                           "queries": [hop.query], "documents": noise}, {"knowledge": ""}))
    return pairs


def _supporting_hops(example: dspy.Example) -> list[GoldHop]:
    """HotpotQA's supporting paragraphs as hops of the question itself, their supporting sentences as knowledge."""
    sentences = example.get("supporting_sentences") or []
    hops = []
    for paragraph in example.get("paragraphs") or []:
        stated = [s for s in sentences if s in paragraph["text"]]
        if paragraph.get("is_supporting") and stated:
            hops.append(GoldHop(paragraph["title"], example.question, example.get("answer") or "", paragraph.get("id"),
                                render_paragraph(paragraph), " ".join(stated)))
    return hops


@register_gold_builder("DualRAG", "answer")
def _answer_target(program: DualRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    if not example.get("answer"):
        return []
    rounds = gold_rounds(example)
    if rounds:
        return [({"question": example.question, "knowledge_outline": gold_outline(program, rounds),
                  "reasoning_history": thoughts(rounds, example.answer)}, {"answer": example.answer})]
    hops = _supporting_hops(example)
    if not hops:
        return []
    return [({"question": example.question, "knowledge_outline": gold_outline(program, [hops]),
              "reasoning_history": [f"I need to find out: {example.question}", concluding([], example.answer)]},
             {"answer": example.answer})]
