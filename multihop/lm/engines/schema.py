"""JSON schemas bounded for constrained decoding: every string and list gets a length cap, small enough that the
longest reply the schema allows fits the generation budget, so a reply decoded under it ends when its fields are
written instead of running to ``max_tokens``. When even the smallest caps do not fit, the call's token budget is
raised to what they need (:func:`decoding_plan`), so no stage reply is cut at a budget its schema cannot fit.

A string's cap already in the schema is kept; a list's own ``maxItems`` (a stage's declared bound) is the most its
cap can be. The others start at :data:`STRING_CAP` characters and :data:`LIST_CAP` items and shrink — lists first
(their own caps with them), one item at a time down to :data:`MIN_LIST`, then strings by a quarter down to
:data:`MIN_STRING` — until :func:`worst_case_chars` of the schema fits the budget. The budget is ``max_tokens`` times
:data:`CHARS_PER_TOKEN`, a pessimistic rate for JSON text (English runs about four characters per token). Pure
functions over JSON-schema dictionaries.
"""

from __future__ import annotations

import copy
import functools
import json

POLICY = 7  # the bounding rules' version: part of a constrained LM's cache key, so a change never replays old replies
STRING_CAP = 200  # characters: a sentence or two of reasoning from a small model
LIST_CAP = 6  # items: the most sub-questions or triples a stage of the five methods asks for
MIN_STRING, MIN_LIST = 24, 3  # a list keeps room for a triple
CHARS_PER_TOKEN = 3
RAISE_LIMIT = 8  # a budget is raised to at most this many times the call's max_tokens (a schema part with no cap
# counts 10,000 characters: it never asks for more)
_SCALARS = {"integer": 20, "number": 52, "boolean": 5, "null": 4}  # the longest literals llama.cpp's grammar allows
_CHILDREN = ("properties", "$defs", "definitions")  # mappings of names to schemas
_SUBSCHEMAS = ("items", "additionalProperties")  # one schema
_ALTERNATIVES = ("anyOf", "oneOf", "allOf", "prefixItems")  # lists of schemas
SCHEMA_FORMS = ("json_schema", "json_object")  # the two ``response_format`` forms servers take a schema in


def wire_response_format(schema: dict, form: str = "json_schema") -> dict:
    """The ``response_format`` that sends ``schema`` to an OpenAI-compatible server in ``form``: ``json_schema``
    (``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``, the OpenAI form vLLM and SGLang take)
    or ``json_object`` (``{"type": "json_object", "schema": ...}``, llama-cpp-python's)."""
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    if form != "json_schema":
        raise ValueError(f"unknown schema form {form!r}; choose one of {', '.join(SCHEMA_FORMS)}")
    return {"type": "json_schema", "json_schema": {"name": "stage_reply", "schema": schema, "strict": True}}


def decoding_plan(response_format: dict | None, max_tokens: int) -> list[tuple[dict | None, int]]:
    """The ``(schema, token budget)`` decodes of a reply, in turn: the request's schema bounded for ``max_tokens``,
    then — for a reply that still reaches its budget (a run of one-character tokens, such as digits) — bounded for a
    character a token. Each budget is at least what its schema's longest reply needs (:func:`tokens_needed`), so a
    schema whose smallest caps exceed ``max_tokens`` raises the budget instead of being cut; the second budget counts
    a token a character, as its caps do. No budget exceeds
    :data:`RAISE_LIMIT` times ``max_tokens``. ``[(None, max_tokens)]`` when the request asks for no schema (free text
    or plain JSON)."""
    schema = response_schema(response_format)
    if schema is None:
        return [(None, max_tokens)]
    return list(_bounded_plan(json.dumps(schema), max_tokens))  # keys in order: a grammar writes them so


@functools.lru_cache(maxsize=1024)
def _bounded_plan(schema_json: str, max_tokens: int) -> tuple[tuple[dict, int], ...]:
    """:func:`decoding_plan` of one schema (its JSON text) and budget, computed once: a stage sends the same
    schema on every call. The schemas are shared between calls and never changed by their readers."""
    schema = json.loads(schema_json)
    first, second = bounded(schema, max_tokens), bounded(schema, max_tokens // CHARS_PER_TOKEN)
    ceiling = RAISE_LIMIT * max_tokens
    plan = ((first, min(ceiling, max(max_tokens, tokens_needed(first)))),
            (second, min(ceiling, max(max_tokens, worst_case_chars(second)))))
    return plan[:1] if plan[0] == plan[1] else plan


def tokens_needed(schema: dict) -> int:
    """The tokens the longest reply a bounded ``schema`` allows needs, at :data:`CHARS_PER_TOKEN` characters a
    token."""
    return -(-worst_case_chars(schema) // CHARS_PER_TOKEN)


def response_schema(response_format: dict | None) -> dict | None:
    """The JSON schema a request's ``response_format`` asks for (``{"type": "json_schema", "schema": ...}``), or None
    for free text or plain JSON mode."""
    if not response_format or response_format.get("type") != "json_schema":
        return None
    return response_format.get("schema")


def bounded(schema: dict, max_tokens: int | None = None) -> dict:
    """A copy of ``schema`` with a cap on every string (``maxLength``; not on an ``enum``, ``const``, ``pattern`` or
    ``format``) and every array (``maxItems``), shrunk until the longest reply fits ``max_tokens`` (no budget: the
    starting caps)."""
    string_cap, list_cap = STRING_CAP, LIST_CAP
    while True:
        capped = copy.deepcopy(schema)
        _cap(capped, string_cap, list_cap)
        fits = max_tokens is None or worst_case_chars(capped) <= max_tokens * CHARS_PER_TOKEN
        if fits or (string_cap, list_cap) == (MIN_STRING, MIN_LIST):
            return capped
        if list_cap > MIN_LIST:
            list_cap -= 1
        else:
            string_cap = max(MIN_STRING, string_cap * 3 // 4)


def _cap(node, string_cap: int, list_cap: int) -> None:
    if not isinstance(node, dict):
        return
    kinds = _kinds(node)
    if "string" in kinds and not node.keys() & {"maxLength", "enum", "const", "pattern", "format"}:
        node["maxLength"] = string_cap
    if "array" in kinds:  # a list's own cap shrinks with the others (a declared 6 sub-questions fits the budget too)
        node["maxItems"] = max(min(node.get("maxItems", list_cap), list_cap), node.get("minItems", 0))
    for child in _subschemas(node):
        _cap(child, string_cap, list_cap)


def _subschemas(node: dict) -> list:
    """The schemas directly inside ``node`` (its properties, items, alternatives, definitions), never its keywords."""
    children = [value for key in _CHILDREN for value in (node.get(key) or {}).values()]
    children += [node[key] for key in _SUBSCHEMAS if isinstance(node.get(key), dict)]
    children += [value for key in _ALTERNATIVES for value in node.get(key) or []]
    return children


def worst_case_chars(node: dict, defs: dict | None = None) -> int:
    """The characters of the longest JSON text ``node`` allows (keys quoted, one space after every separator as
    llama.cpp's grammar permits), an unbounded part — a string or list without a cap, a schema that says nothing —
    counting as 10,000; ``$ref``s resolve against the root's ``$defs``."""
    defs = node.get("$defs", {}) if defs is None else defs
    if "$ref" in node:
        return worst_case_chars(defs.get(node["$ref"].rsplit("/", 1)[-1], {}), defs)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return max(worst_case_chars(option, defs) for option in node[key])
    if "enum" in node or "const" in node:
        return max(len(str(value)) + 2 for value in node.get("enum", [node.get("const")]))
    kinds = _kinds(node)
    if "object" in kinds:
        properties = node.get("properties", {})
        return 2 + sum(len(name) + 6 + worst_case_chars(value, defs) for name, value in properties.items())
    if "array" in kinds:
        return 2 + node.get("maxItems", 10_000) * (worst_case_chars(node.get("items", {}), defs) + 2)
    if "string" in kinds:
        return node.get("maxLength", 10_000) + 2
    return max((_SCALARS.get(kind, 10_000) for kind in kinds), default=10_000)


def _kinds(node: dict) -> set:
    kinds = node.get("type")
    return set(kinds) if isinstance(kinds, list) else {kinds}
