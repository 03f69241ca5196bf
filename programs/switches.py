"""A program's switches typed by its ``__init__`` annotations: ``--set`` values and saved configs are coerced to the
annotated type (pydantic's lax validation: ``"3"`` → 3, ``"yes"`` → True, a list → a tuple), and a value that does
not fit is a :class:`SwitchTypeError` naming the switch and its type (``DualRAG's max_iterations is an integer``).
A switch that takes None takes it written ``none`` (any case: ``None``, ``NONE``) or ``null`` (:data:`NONE_WORDS`),
and ``false`` too when it takes no boolean. Ranges (``≥ 1``) stay the constructor's own checks. The values of
``--set key=value``, the option of every command that builds a program, are read here too (:func:`parse_settings`)."""

from __future__ import annotations

import inspect
import json
import types
import typing

import typer
from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError

NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a text", type(None): "none"}
NONE_WORDS = frozenset({"none", "null"})  # what a switch that takes None reads as None, in any case


class SwitchTypeError(ValueError):
    """A switch value that does not fit the switch's annotated type; for a switch that takes None the message says
    how to write it (``DualRAG's max_iterations is an integer or none (write none or null)``)."""

    def __init__(self, program: str, switch: str, annotation):
        how = " (write none or null)" if takes_none(annotation) else ""
        super().__init__(f"{program}'s {switch} is {describe(annotation)}{how}")
        self.switch = switch


def takes_none(annotation) -> bool:
    """Whether an annotation admits None (``str | None``, ``Optional[int]``)."""
    return annotation is type(None) or type(None) in typing.get_args(annotation)


def means_none(value) -> bool:
    """Whether a switch value is a written None: ``none`` in any case, or ``null``."""
    return isinstance(value, str) and value.strip().lower() in NONE_WORDS


def describe(annotation) -> str:
    """An annotation in words: ``int`` → "an integer", ``str | None`` → "a text or none", ``Literal["a", "b"]`` →
    "one of a, b", ``tuple[str, ...]`` → "a list of texts"."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(arg) for arg in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(str(arg) for arg in args)
    if origin in (list, tuple):
        item = args[0] if args else str
        return "a list of " + PLURALS.get(item, describe(item))
    return NAMES.get(annotation, f"a {getattr(annotation, '__name__', annotation)}")


PLURALS = {int: "integers", float: "numbers", bool: "booleans", str: "texts"}


def annotations(cls: type) -> dict:
    """The resolved ``__init__`` annotations of a program class (a wrapped ``__init__`` unwrapped); none when they do
    not resolve (a class defined where its annotations' names are not), so its switches stay untyped."""
    try:
        return typing.get_type_hints(inspect.unwrap(cls.__init__))
    except (NameError, TypeError):
        return {}


def typed(cls: type, settings: dict) -> dict:
    """``settings`` coerced to the annotations of ``cls.__init__``; a switch without an annotation (or one pydantic
    cannot check) is kept as it is. For a switch that takes None, ``none`` (any case) and ``null`` are None, and so is
    ``false`` when it takes no boolean (``--set rerank=none``, ``rerank=None``, ``rerank=null``, ``rerank=false``)."""
    hints = annotations(cls)
    coerced = {}
    for name, value in settings.items():
        hint = hints.get(name)
        if takes_none(hint) and (means_none(value) or value is False and bool not in typing.get_args(hint)):
            value = None
        try:
            adapter = TypeAdapter(hint) if hint is not None else None
        except PydanticSchemaGenerationError:
            adapter = None
        if adapter is None:
            coerced[name] = value
            continue
        try:
            coerced[name] = adapter.validate_python(value)
        except ValidationError:
            raise SwitchTypeError(cls.__name__, name, hint) from None
    return coerced


def parse_settings(pairs: list[str]) -> dict:
    """``--set key=value`` constructor switches; values are read as JSON (false, 3, null, "x"), else as text (``none``
    stays the text until :func:`typed` reads it as None for a switch that takes None); a pair without ``=`` is a
    ``typer.BadParameter`` (one line on the command line)."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--set takes key=value, got {pair!r}")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return settings
