"""The library's docstrings as Markdown, for the generated pages (``multihop_docs.py``) and for mkdocstrings (this
file is also a Griffe extension, ``extensions:`` in ``mkdocs.yml``); and the signature a function takes from another
(``@signature_of(evaluate, threads=("in_flight", 8))``, :func:`multihop.evaluation.runner.signature_of`) shown as
``help()`` shows it.

The docstrings are written for readers of the source: Sphinx roles (:class:`~.base.MultihopProgram`) and
placeholders in angle brackets (``<FILL>`` outside code). As Markdown, a role becomes code (its last name with ``~``)
and ``<``/``>`` outside code spans are escaped, so no placeholder is taken for an HTML tag.
"""

from __future__ import annotations

import ast
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


class BorrowedSignatures(griffe.Extension):
    """A function decorated with ``signature_of(source, old=(new, default), ...)`` gets ``source``'s parameters
    (a sibling defined above it), as :func:`multihop.evaluation.runner.signature_of` gives them at run time: the
    renamed ones under their new names and defaults, those it takes as ``**options`` keyword-only."""

    def on_function_instance(self, *, node: ast.AST | griffe.ObjectNode, func: griffe.Function, **kwargs) -> None:
        for decorator in getattr(node, "decorator_list", []):
            if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name)
                    and decorator.func.id == "signature_of" and isinstance(decorator.args[0], ast.Name)):
                continue
            source = func.parent.members[decorator.args[0].id]
            renamed = {keyword.arg: ast.literal_eval(keyword.value) for keyword in decorator.keywords}
            own = {parameter.name for parameter in func.parameters}
            func.parameters = griffe.Parameters(*[
                griffe.Parameter(renamed[parameter.name][0], annotation=parameter.annotation, kind=parameter.kind,
                                 default=repr(renamed[parameter.name][1]))
                if parameter.name in renamed else parameter if parameter.name in own
                else griffe.Parameter(parameter.name, annotation=parameter.annotation,
                                      kind=griffe.ParameterKind.keyword_only, default=parameter.default)
                for parameter in source.parameters])
