"""How the authors' MetaRAG code reads its free-text judgments and rewrites (``critic.py``, ``metarag.py``), for
``MetaRAG(parsing="authors")``; pure functions, no LM.

- The LLM's own knowledge (``judge_internal``): the reply as written (not lowercased) is "not reliable" when it holds
  any of "sorry", "couldn't", "don't have access" or "no" anywhere — so a reply "No." reads as reliable (no lowercase
  "no" in it) and "Yes, I know" as not reliable ("know").
- The documents' sufficiency (``judge_external``): the reply stripped and lowercased is "insufficient" when "no" is
  anywhere in it — "not", "know", "cannot", "enough" and "none" included.
- The new query (``parse_llm_output_rewrite``, then ``rewrite_query[:64]``): the shortest start of the reply that ends
  with "The rewrite query is" (any case; the pattern's lazy tail matches nothing, so the query written after the phrase
  is left out), stripped; a reply without the phrase has its lowercase "the rewrite query is" removed; then the first
  64 characters.
"""

from __future__ import annotations

import re

INTERNAL_REFUSALS = ("sorry", "couldn't", "don't have access", "no")  # the authors' check_list
REWRITE_PHRASE = "The rewrite query is"
QUERY_CHARACTERS = 64  # the authors' rewrite_query[:64]


def authors_internal(reply: str) -> bool:
    """The authors' reading of the internal-knowledge judgment: reliable unless a refusal keyword is in the reply
    (case as written)."""
    return not any(keyword in reply for keyword in INTERNAL_REFUSALS)


def authors_external(reply: str) -> bool:
    """The authors' reading of the documents' sufficiency: sufficient unless "no" is in the lowercased reply."""
    return "no" not in reply.strip().lower()


def authors_rewrite_query(reply: str) -> str:
    """The search query the authors' code takes from a rewrite reply (module docstring)."""
    match = re.search(rf"(.*?{REWRITE_PHRASE}.*?)", reply, re.IGNORECASE | re.DOTALL)
    query = match.group(1).strip() if match else reply.replace(REWRITE_PHRASE.lower(), "")
    return query[:QUERY_CHARACTERS]
