"""DualRAG-FT's training sets from teacher runs (§3.2): the teacher's rows of the questions it answered right, post-
processed as §3.2 describes in prose; the exact rules are our reading (the paper gives no procedure).

1. Entity Identifier: §3.2 links the teacher's entities with a cross-encoder's similarity and removes redundant
   ones. Here each entity is linked to the most similar of the question's gold supporting titles (the cosine of the
   project's encoder, MPNet by default, at least ``threshold``; no cross-encoder ships offline); names linked to one
   title are merged (their queries joined, without repeats) and an entity similar to no title is dropped. A row left
   with no entity is dropped. The question's later rows use the linked names: ``known_entities`` in Entity
   Identifier rows and ``entity`` in Knowledge Summarizer rows; a summarizer row of a dropped entity is dropped.
   (The outlines shown in the rows' inputs keep the teacher's names.)
2. Knowledge Summarizer: §3.2 compares the teacher's summaries with the gold documents so that latent information
   is kept. Here a summary the teacher left empty, although a gold supporting document was among the documents it
   read, becomes that document's supporting sentences (2Wiki, HotpotQA), or its sentence stating the hop's answer
   (MuSiQue), or the document itself; the gold document titled like the row's entity is preferred. A non-empty
   summary is kept as the teacher wrote it (a narrower repair than the paper's, which also fixes summaries that
   omit a fact).

Every kept row is rendered again by ``render`` (the command passes :func:`multihop.optimize.trajectories.render_call`
with the program's predictor of the stage and the student's adapter), so a teacher served with one adapter trains a
student prompted with another on the student's own format. The Reasoner's rows are otherwise kept as they are
(Table 1: 0 processed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import dspy
import numpy as np

from ..gold_builders import evidence_sentence
from .outline import entity_pairs, is_empty_fragment

Similarity = Callable[[list[str], list[str]], np.ndarray]  # (names, titles) -> cosine matrix
Render = Callable[[dict, dict, dict], dict]  # (row, new inputs, new outputs) -> the row's messages and completion


def encoder_similarity(encoder) -> Similarity:
    """Cosines of an :class:`~multihop.retrievers.Encoder`'s normalised embeddings."""
    return lambda names, titles: encoder.encode(names) @ encoder.encode(titles).T


def link_to_titles(entities, titles: list[str], similarity: Similarity, threshold: float
                   ) -> tuple[dict[str, list[str]], dict[str, str], int]:
    """Entities (any form :func:`~.outline.entity_pairs` reads) renamed to their most similar title (at least
    ``threshold``), merged when two share one, the others dropped. Returns the linked entities (title → queries),
    the renaming and how many were dropped."""
    queries_of: dict[str, list] = {}
    for name, queries in entity_pairs(entities):
        if name.strip():
            queries_of.setdefault(name, []).extend(queries)
    names = list(queries_of)
    if not names or not titles:
        return {}, {}, len(names)
    scores = np.asarray(similarity(names, titles))
    linked: dict[str, list[str]] = {}
    renamed: dict[str, str] = {}
    for name, row in zip(names, scores, strict=True):
        best = int(np.argmax(row))
        if row[best] < threshold:
            continue
        renamed[name] = titles[best]
        queries = linked.setdefault(titles[best], [])
        queries.extend(q for q in queries_of[name] if q not in queries)
    return linked, renamed, len(names) - len(renamed)


def gold_knowledge(example: dspy.Example, documents: list[str], entity: str | None = None) -> str:
    """The knowledge of a gold supporting document among ``documents`` (rendered ``title: text``; the one titled
    ``entity`` first, else the first found): its supporting sentences, else its sentence stating the answer of the
    hop it supports, else the document; empty when no gold document is among them."""
    sentences = example.get("supporting_sentences") or []
    support = example.get("decomposition_support") or []
    answers = example.get("decomposition_answers") or []
    read = [p for p in example.get("paragraphs") or [] if p.get("is_supporting") and _shown(p, documents)]
    read.sort(key=lambda p: (p.get("title") or "").lower() != (entity or "").lower())
    for paragraph in read[:1]:
        stated = [s for s in sentences if s in paragraph["text"]]
        if stated:
            return " ".join(stated)
        hop = support.index(paragraph.get("id")) if paragraph.get("id") in support else None
        if hop is not None and hop < len(answers) and answers[hop]:
            return evidence_sentence(paragraph["text"], answers[hop])
        return paragraph["text"]
    return ""


def _shown(paragraph: dict, documents: list[str]) -> bool:
    """Whether one of ``documents`` is ``paragraph``: its title and the start of its text, whitespace aside."""
    head = " ".join(f"{paragraph.get('title') or ''}: {paragraph['text'][:60]}".split()) if paragraph.get(
        "title") else " ".join(paragraph["text"][:60].split())
    return any(" ".join(document.split()).startswith(head) for document in documents)


def sft_rows(rows: dict[str, list[dict]], examples: dict[str, dspy.Example], similarity: Similarity, render: Render,
             threshold: float = 0.5, min_score: float = 1.0) -> tuple[dict[str, list[dict]], Counter]:
    """The DualRAG-FT rows of the teacher's ``rows`` (stage → rows with ``inputs`` and ``outputs``): those of
    questions scoring at least ``min_score`` (a question not in ``examples`` is dropped: its gold is unknown),
    entities linked, summaries repaired, every row rendered by ``render``. Returns the rows and what was done."""
    stats: Counter = Counter()
    kept = [(stage, row) for stage, stage_rows in rows.items() for row in stage_rows
            if float(row.get("score", 0.0)) >= min_score and row.get("question_id") in examples]
    stats["rows_dropped_score_or_unknown"] = sum(map(len, rows.values())) - len(kept)
    renamings: dict[str, dict[str, str]] = {}
    dropped_names: dict[str, set[str]] = {}
    linked_rows: dict[int, list[dict]] = {}
    for stage, row in kept:  # the renamings first: a summarizer row may come before its question's identify rows
        if stage != "identify":
            continue
        example = examples[row["question_id"]]
        titles = list(dict.fromkeys(p["title"] for p in example.get("paragraphs") or [] if p.get("is_supporting")))
        entities = (row["outputs"] or {}).get("entities") or []
        linked, renamed, dropped = link_to_titles(entities, titles, similarity, threshold)
        renamings.setdefault(row["question_id"], {}).update(renamed)
        dropped_names.setdefault(row["question_id"], set()).update(
            name for name, _ in entity_pairs(entities) if name not in renamed)
        stats["entities_dropped"] += dropped
        stats["entities_merged"] += len(renamed) - len(linked)
        linked_rows[id(row)] = [{"entity": name, "queries": queries} for name, queries in linked.items()]
        stats["identify_rows_linked"] += int(bool(linked) and linked_rows[id(row)] != entities)
    out: dict[str, list[dict]] = {}
    for stage, row in kept:
        qid = row["question_id"]
        names = renamings.get(qid, {})
        inputs, outputs = dict(row["inputs"] or {}), dict(row["outputs"] or {})
        if stage == "identify":
            if not linked_rows[id(row)]:
                stats["identify_rows_dropped"] += 1
                continue
            outputs["entities"] = linked_rows[id(row)]
            inputs["known_entities"] = list(dict.fromkeys(names.get(n, n) for n in inputs.get("known_entities") or []))
        elif stage == "summarize":
            entity = inputs.get("entity")
            if entity in dropped_names.get(qid, set()) and entity not in names:
                stats["summarize_rows_dropped"] += 1
                continue
            inputs["entity"] = names.get(entity, entity)
            if is_empty_fragment(outputs.get("knowledge") or ""):
                knowledge = gold_knowledge(examples[qid], list(inputs.get("documents") or []), inputs["entity"])
                if knowledge:
                    outputs["knowledge"] = knowledge
                    stats["summaries_repaired"] += 1
        out.setdefault(stage, []).append({**row, **render(row, inputs, outputs)})
    return out, stats
