"""JSON schemas bounded for constrained decoding: every string and list gets a length cap, so a reply decoded under
the schema ends when its fields are written instead of running to ``max_tokens``.

A signature field may set its own cap (``dspy.OutputField(max_length=...)`` for a string, ``max_length`` for a
list as well: pydantic writes ``maxLength`` / ``maxItems``); a field without one gets :data:`STRING_CAP` characters
or :data:`LIST_CAP` items. Pure functions over JSON-schema dictionaries.
"""

from __future__ import annotations

import copy

STRING_CAP = 400  # characters: a reasoning paragraph of a small model, a passage-long quote
LIST_CAP = 8  # items: more sub-questions, triples or ids than any stage of the five methods asks for


def bounded(schema: dict, string_cap: int = STRING_CAP, list_cap: int = LIST_CAP) -> dict:
    """A copy of ``schema`` where every string without ``maxLength`` (and no ``enum``/``const``/``pattern``) has
    ``maxLength: string_cap`` and every array without ``maxItems`` has ``maxItems: list_cap``."""
    schema = copy.deepcopy(schema)
    _bound(schema, string_cap, list_cap)
    return schema


def _bound(node, string_cap: int, list_cap: int) -> None:
    if isinstance(node, list):
        for item in node:
            _bound(item, string_cap, list_cap)
        return
    if not isinstance(node, dict):
        return
    kinds = node.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    if "string" in kinds and not node.keys() & {"maxLength", "enum", "const", "pattern", "format"}:
        node["maxLength"] = string_cap
    if "array" in kinds and "maxItems" not in node:
        node["maxItems"] = max(list_cap, node.get("minItems", 0))
    for value in node.values():
        _bound(value, string_cap, list_cap)
