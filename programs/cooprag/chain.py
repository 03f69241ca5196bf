"""CoopRAG's reasoning chains (§3.2, Eq. 1): cleaning what a small LM returns, and the unrolled query U = Q ‖ S ‖ R.

A chain is a list of ``[head, relation, tail]`` triples. LMs — small ones above all — return triples with two or four
items, empty rows, or a last tail that is a guessed answer instead of ``<FILL>``; :func:`normalize_chain` makes every
row a triple and :func:`repair_fill` puts ``<FILL>`` back as the last tail (§3.2: the final tail is the answer
placeholder; a guessed entity there is exactly the low-confidence content the mask is meant to keep out of the query).
"""

from __future__ import annotations

import json

from multihop.signatures.cooprag import FILL, UNCERTAIN


def normalize_chain(raw, mask: bool = True) -> list[list[str]]:
    """Every row as a ``[head, relation, tail]`` of stripped strings: a row of four or more items keeps its first and
    last item and joins the middle ones as the relation; a row of two gets ``<UNCERTAIN>`` as its tail; empty rows are
    dropped. ``mask=False`` (the w/o-mask variant) erases every ``<UNCERTAIN>`` in place, the ones an LM writes
    anyway and the tail a row of two gets, so no uncertainty mask reaches its query and every item keeps its role."""
    chain = []
    for row in raw or []:
        items = [str(item).strip() for item in (row if isinstance(row, (list, tuple)) else [row])]
        items = [item for item in items if item]
        if len(items) < 2:
            continue
        if len(items) == 2:
            items.append(UNCERTAIN)
        chain.append([items[0], " ".join(items[1:-1]), items[-1]])
    return chain if mask else [[" ".join(item.replace(UNCERTAIN, " ").split()) for item in row] for row in chain]


def repair_fill(chain: list[list[str]]) -> tuple[list[list[str]], bool]:
    """The chain with ``<FILL>`` as the last tail, and whether it had to be put back."""
    if not chain or chain[-1][2] == FILL:
        return chain, False
    return [*chain[:-1], [chain[-1][0], chain[-1][1], FILL]], True


def chain_text(chain: list[list[str]]) -> str:
    """The chain as the prompts of App. H write it: ``[["head", "relation", "tail"], ...]``."""
    return json.dumps(chain, ensure_ascii=False)


QUERY_PARTS = ("MQ", "MQ+SQ", "MQ+RC", "MQ+SQ+RC")  # Table 16's rows: the main question, + sub-questions, + chain


def unrolled_query(question: str, sub_questions: list[str], chain: list[list[str]], parts: str = "MQ+SQ+RC") -> str:
    """U = Q ‖ S ‖ R (Eq. 1): the question, its sub-questions and the masked chain, concatenated with spaces; ``parts``
    keeps only some of them (Table 16: ``MQ``, ``MQ+SQ``, ``MQ+RC``, or the full ``MQ+SQ+RC``). The
    ``<UNCERTAIN>``/``<FILL>`` markers stay in the text: CoopRAG's encoder keeps them whole as special tokens
    (``signatures.cooprag.SPECIAL_TOKENS``)."""
    if parts not in QUERY_PARTS:
        raise ValueError(f"unknown query parts {parts!r}; choose one of {', '.join(QUERY_PARTS)}")
    pieces = [question.strip()]
    if "SQ" in parts:
        pieces += [s.strip() for s in sub_questions if s.strip()]
    if "RC" in parts and chain:
        pieces.append(chain_text(chain))
    return " ".join(pieces)

