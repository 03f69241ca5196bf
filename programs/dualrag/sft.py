"""DualRAG-FT's training sets from teacher runs (§3.2): the teacher's rows of the questions it answered right, with the
paper's two repairs.

1. Entity Identifier: each entity the teacher named is linked to the most similar of the question's gold supporting
   titles (the paper uses a cross-encoder, which does not ship offline: here the cosine of the project's encoder,
   MPNet by default, at least ``threshold``); names linked to one title are merged (their queries joined, without
   repeats) and an entity similar to no title is dropped. A row left with no entity is dropped. The question's
   Knowledge Summarizer rows then name the entity by the title it was linked to.
2. Knowledge Summarizer: a summary the teacher left empty, although a gold supporting document was among the
   documents it read, becomes that document's supporting sentences (2Wiki, HotpotQA), or its sentence stating the
   hop's answer (MuSiQue), or the document itself.

Every repaired row is rendered again by ``render`` (the command passes
:func:`multihop.optimize.trajectories.render_call` with the program's predictor of the stage and the adapter the row
was written with); the others are kept as the teacher wrote them. The Reasoner's
rows are kept as they are (Table 1: 0 processed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import dspy
import numpy as np

from ..gold import evidence_sentence
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


def gold_knowledge(example: dspy.Example, documents: list[str]) -> str:
    """The knowledge of the first gold supporting document among ``documents`` (rendered ``title: text``): its
    supporting sentences, else its sentence stating the answer of the hop it supports, else the document; empty when
    no gold document is among them."""
    sentences = example.get("supporting_sentences") or []
    support = example.get("decomposition_support") or []
    answers = example.get("decomposition_answers") or []
    for paragraph in example.get("paragraphs") or []:
        rendered = f"{paragraph['title']}: {paragraph['text']}" if paragraph.get("title") else paragraph["text"]
        if not paragraph.get("is_supporting") or rendered not in documents:
            continue
        stated = [s for s in sentences if s in paragraph["text"]]
        if stated:
            return " ".join(stated)
        hop = support.index(paragraph.get("id")) if paragraph.get("id") in support else None
        if hop is not None and hop < len(answers) and answers[hop]:
            return evidence_sentence(paragraph["text"], answers[hop])
        return paragraph["text"]
    return ""


def sft_rows(rows: dict[str, list[dict]], examples: dict[str, dspy.Example], similarity: Similarity, render: Render,
             threshold: float = 0.5, min_score: float = 1.0) -> tuple[dict[str, list[dict]], Counter]:
    """The DualRAG-FT rows of the teacher's ``rows`` (stage → rows with ``inputs`` and ``outputs``): those of
    questions scoring at least ``min_score`` (a question not in ``examples`` is dropped: its gold is unknown),
    entities linked and summaries repaired. Returns the rows and what was done (``Counter``)."""
    stats: Counter = Counter()
    kept = [(stage, row) for stage, stage_rows in rows.items() for row in stage_rows
            if float(row.get("score", 0.0)) >= min_score and row.get("question_id") in examples]
    stats["rows_dropped_score_or_unknown"] = sum(map(len, rows.values())) - len(kept)
    renamings: dict[str, dict[str, str]] = {}
    out: dict[str, list[dict]] = {}
    for stage, row in sorted(kept, key=lambda item: item[0] != "identify"):  # the renamings first
        example = examples[row["question_id"]]
        repaired = None
        if stage == "identify":
            titles = [p["title"] for p in example.get("paragraphs") or [] if p.get("is_supporting")]
            entities = (row["outputs"] or {}).get("entities") or []
            linked, renamed, dropped = link_to_titles(entities, list(dict.fromkeys(titles)), similarity, threshold)
            written = [{"entity": name, "queries": queries} for name, queries in linked.items()]
            renamings.setdefault(row["question_id"], {}).update(renamed)
            stats["entities_dropped"] += dropped
            stats["entities_merged"] += len(renamed) - len(linked)
            if not linked:
                stats["identify_rows_dropped"] += 1
                continue
            if written != entities:
                repaired = (row["inputs"], {**row["outputs"], "entities": written})
                stats["identify_rows_linked"] += 1
        elif stage == "summarize":
            inputs, outputs = dict(row["inputs"]), dict(row["outputs"])
            entity = renamings.get(row["question_id"], {}).get(inputs.get("entity"), inputs.get("entity"))
            if is_empty_fragment(outputs.get("knowledge") or ""):
                knowledge = gold_knowledge(example, list(inputs.get("documents") or []))
                if knowledge:
                    outputs["knowledge"] = knowledge
                    stats["summaries_repaired"] += 1
            if entity != inputs.get("entity") or outputs != row["outputs"]:
                repaired = ({**inputs, "entity": entity}, outputs)
        if repaired is not None:
            row = {**row, **render(row, *repaired)}
        out.setdefault(stage, []).append(row)
    return out, stats
