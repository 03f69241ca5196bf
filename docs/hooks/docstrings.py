"""The library's docstrings as Markdown, for the generated pages (``multihop_docs.py``) and for mkdocstrings (this
file is also a Griffe extension, ``extensions:`` in ``mkdocs.yml``).

The docstrings are written for readers of the source: Sphinx roles (:class:`~.base.MultihopProgram`) and
placeholders in angle brackets (``<FILL>`` outside code). As Markdown, a role becomes code (its last name with ``~``)
and ``<``/``>`` outside code spans are escaped, so no placeholder is taken for an HTML tag.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")
CODE = re.compile(r"(`+[^`]*?`+)")


def _role(match: re.Match) -> str:
    target = match.group(2).lstrip(".")
    return f"`{target.split('.')[-1] if match.group(1) else target}`"


def markdown(text: str) -> str:
    """A docstring's prose as Markdown (see the module's docstring)."""
    text = ROLE.sub(_role, text)
    return "".join(part if part.startswith("`") else part.replace("<", "&lt;").replace(">", "&gt;")
                   for part in CODE.split(text))


class SphinxRoles(griffe.Extension):
    """Rewrites every docstring Griffe reads with :func:`markdown` before mkdocstrings parses it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
