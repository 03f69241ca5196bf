"""CIRAG's gold integration targets ("gold-derived" distillation rows: §3.5 distils a teacher's trajectories, which
no strong LM here can write).

A question's rounds are its annotated hops grouped by dependency depth
(:func:`multihop.programs.gold_builders.annotated_hops`), each hop a triple: 2Wiki's evidence triple, or a MuSiQue
``"E >> relation"`` step as ``[E, relation, answer]`` (a question whose steps are written as questions has no triple to
give, and no rows; HotpotQA has none).

Round r's candidates are built as the program would see them: the round's own gold triples and the earlier rounds'
(facts already known), and — when the program has an offline triple cache (``--set triple_cache=DIR``, built over the
train questions' paragraphs with ``multihop cirag extract TRAIN_FILE --questions N``) — the cached triples of the
question's other paragraphs, each gold triple in the extractor's wording when the cache holds a triple of its paragraph
with the same subject and object (as candidates at inference are worded), the paragraphs of later hops left out (their
facts would show an answer the target says is still missing); reranked by the encoder's cosine to the round's query and
cut to the program's N, the round's gold triples always kept (without the reranker: all of them, shuffled with the
question's seed). The target keeps the round's gold triples only — so the rows teach filtering exactly as far as the
cache gives noise —, a thought naming them, and the next round's questions (every hop of that round: a comparison asks
about both entities, as Table 7's "birth years of Michael Curtiz and Edith Carlmar") or "<no question>" after the last
round. The history is the earlier rounds exactly as the program writes it (:func:`.program.history_entry`).

The construction phase's extractors (Figs. 9–10) get rows too, ours: each supporting paragraph tied to a hop, with the
gold triples it states as its triples and their subjects and objects it names (the title first) as its entities. The
annotations hold a paragraph's supporting facts only, so these rows teach the format and the facts a question needs, not
every fact of a paragraph; they exist because SmolLM2-135M writes no triple at all from the prompt and its demo alone
(0 triples on the 10 paragraphs of a 2Wiki train question). ``multihop distill --preset cirag`` leaves them out (Eq. 8
distils the integrator); ``--all-stages`` trains the one student on them too.
"""

from __future__ import annotations

import dspy

from multihop.signatures.cirag import NO_QUESTION

from ..gold_builders import (
    GoldContext,
    GoldHop,
    Pairs,
    annotated_hops,
    register_gold_builder,
    register_no_gold,
    render_paragraph,
    substitute,
)
from .program import CIRAG, history_entry
from .triples import Triple, normalize_phrase, top_n


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


def as_extracted(program: CIRAG, triple: Triple) -> Triple:
    """The gold triple as the extractor worded it: the cached triple of its paragraph with the same subject and
    object (normal form), else the annotation's own wording."""
    cached = program.cached(triple.doc_id)
    for raw in cached.triples if cached is not None else []:
        found = Triple(*raw, doc_id=triple.doc_id)
        if (found.key[0], found.key[2]) == (triple.key[0], triple.key[2]):
            return found
    return triple


def cached_noise(program: CIRAG, example: dspy.Example, hidden: set[str], gold: list[Triple]) -> list[Triple]:
    """The cached triples of the question's paragraphs but the ``hidden`` ones, without the gold facts (nor another
    wording of one: the same subject and object)."""
    noise, seen = [], {(t.key[0], t.key[2]) for t in gold}
    for paragraph in example.get("paragraphs") or []:
        found = program.cached(paragraph.get("id")) if paragraph.get("id") not in hidden else None
        for raw in found.triples if found is not None else []:
            triple = Triple(*raw, doc_id=paragraph.get("id"))
            if triple.key not in seen and (triple.key[0], triple.key[2]) not in seen:
                seen.add(triple.key)
                noise.append(triple)
    return noise


def round_candidates(program: CIRAG, query: str, gold: list[Triple], noise: list[Triple]) -> list[Triple]:
    """The round's candidates as the program ranks them: by cosine to ``query``, cut to N with every gold triple
    kept."""
    pool = gold + noise
    if not program.reranker or len(pool) <= 1:
        return pool
    scores = (program.embed([t.words() for t in pool]) @ program.embed([query]).T)[:, 0].tolist()
    order = top_n(scores, len(pool))
    kept = set(range(len(gold))) | set([i for i in order if i >= len(gold)][:max(0, program.n_triples - len(gold))])
    return [pool[i] for i in order if i in kept]


@register_gold_builder("CIRAG", "integrate")
def _integrate_target(program: CIRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    paired = [(hop, as_extracted(program, t)) for hop, t in gold_triples(example)]
    if not paired:
        return []
    depth = max(hop.depth for hop, _ in paired)
    rounds = [[(hop, t) for hop, t in paired if hop.depth == d] for d in range(depth + 1)]
    rounds = [r for r in rounds if r]
    rng = context.rng(example)
    pairs, history, query = [], [], example.question
    for r, round_ in enumerate(rounds):
        own = [t for _, t in round_]
        gold = own + [t for earlier in rounds[:r] for _, t in earlier]
        later = {hop.paragraph_id for later_round in rounds[r + 1:] for hop, _ in later_round}
        noise = cached_noise(program, example, later, [t for _, t in paired])
        candidates = round_candidates(program, query, gold, noise)
        if not program.reranker:
            rng.shuffle(candidates)
        shown, core = [t.render() for t in candidates], [t.render() for t in own]
        question = " ".join(hop.query for hop, _ in rounds[r + 1]) if r + 1 < len(rounds) else NO_QUESTION
        thought = ("The useful facts are " + "; ".join(core) + (". They answer the question." if question == NO_QUESTION
                                                                else f". Still missing: {question}"))
        pairs.append(({"query": example.question, "fact_before_filter": shown, "historical_context": list(history)},
                      {"thought": thought, "fact_after_filter": [list(t.key) for t in own], "question": question}))
        history.append(history_entry(shown, thought, core, question))
        query = question
    return pairs


def paragraph_triples(example: dspy.Example) -> list[tuple[dict, list[Triple]]]:
    """Each supporting paragraph tied to an annotated hop, with the gold triples it states, in hop order."""
    paragraphs = {p.get("id"): p for p in example.get("paragraphs") or []}
    stated: dict[str, list[Triple]] = {}
    for hop, triple in gold_triples(example):
        if hop.paragraph_id in paragraphs and triple.key not in {t.key for t in stated.get(hop.paragraph_id, [])}:
            stated.setdefault(hop.paragraph_id, []).append(triple)
    return [(paragraphs[pid], triples) for pid, triples in stated.items()]


def stated_entities(paragraph: dict, triples: list[Triple]) -> list[str]:
    """The gold triples' subjects and objects the paragraph names (in normal form), the title first, each once."""
    text = normalize_phrase(f"{paragraph.get('title') or ''} {paragraph['text']}")
    names = [paragraph.get("title") or "", *(part for t in triples for part in (t.subject, t.obj))]
    kept, seen = [], set()
    for name in names:
        key = normalize_phrase(name)
        if key and key in text and key not in seen:
            seen.add(key)
            kept.append(name)
    return kept


@register_gold_builder("CIRAG", "extract_entities")
def _entities_target(program: CIRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    return [({"passage": render_paragraph(paragraph)}, {"named_entities": stated_entities(paragraph, triples)})
            for paragraph, triples in paragraph_triples(example)]


@register_gold_builder("CIRAG", "extract_triples")
def _triples_target(program: CIRAG, example: dspy.Example, context: GoldContext) -> Pairs:
    return [({"title": paragraph.get("title") or "", "text": paragraph["text"],
              "named_entities": stated_entities(paragraph, triples)},
             {"triples": [[t.subject, t.relation, t.obj] for t in triples]})
            for paragraph, triples in paragraph_triples(example)]


for _stage, _why in {
    "answer_triple": "§3.5 distils the integrator only; the answers stay on the base LM",
    "answer_sentence": "§3.5 distils the integrator only; the answers stay on the base LM",
    "answer_passage": "§3.5 distils the integrator only; the answers stay on the base LM",
}.items():
    register_no_gold("CIRAG", _stage, _why)
