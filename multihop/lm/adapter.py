"""The bounded JSON adapter: DSPy's ``JSONAdapter`` that sends each stage's bounded JSON schema to the server, so any
``dspy.LM`` reaching an OpenAI-compatible server (vLLM, SGLang, llama-cpp-python's server, ``multihop serve``) decodes
every stage as multihop's served engine does::

    lm = dspy.LM("hosted_vllm/<model>", api_base="http://host:8000/v1")
    dspy.configure(lm=lm, adapter=multihop.BoundedJSONAdapter())

Each call's signature schema (the one ``JSONAdapter`` builds) is bounded for the call's ``max_tokens``
(:func:`~multihop.lm.engines.schema.decoding_plan`: a cap on every string and list, so the longest reply fits), sent
as ``response_format`` in ``schema_form`` (``json_schema``: the OpenAI form vLLM and SGLang take; ``json_object``:
llama-cpp-python's), with ``max_tokens`` raised to what the schema needs; a reply that does not parse (it was cut at
its budget) is asked once more under the tighter caps of the plan's second decode. An LM on one of multihop's own
engines (``multihop.make_lm``) bounds the schema itself: the adapter then sends DSPy's schema as ``JSONAdapter``
does, and the engine plans its decodes.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import dspy
import pydantic
from dspy.adapters.chat_adapter import ChatAdapter
from dspy.adapters.json_adapter import _get_structured_outputs_response_format, _has_open_ended_mapping
from dspy.adapters.types.tool import ToolCalls
from dspy.clients.capabilities import with_capability_planning
from dspy.utils.callback import with_callbacks
from dspy.utils.exceptions import AdapterParseError

from multihop.lm.defaults import DEFAULT_MAX_TOKENS
from multihop.lm.engines.local_engine import LocalEngine
from multihop.lm.engines.schema import SCHEMA_FORMS, decoding_plan, wire_response_format


def plans_itself(lm) -> bool:
    """Whether ``lm`` runs on one of multihop's engines, which bound each stage's schema themselves."""
    return isinstance(getattr(lm, "engine", None), LocalEngine)


CACHED_SIGNATURES = 1024  # stage signatures whose system message and response model are kept
_SYSTEM_MESSAGES: dict[tuple, str] = {}
_RESPONSE_MODELS: dict[tuple, type[pydantic.BaseModel]] = {}


def _cached(cache: dict, key: tuple | None, build):
    """``cache[key]``, built with ``build()`` the first time; ``key`` None (a part of the signature that does not
    hash) builds every time. A full cache starts again (signatures made on the fly)."""
    if key is None:
        return build()
    value = cache.get(key)
    if value is None:
        value = build()
        if len(cache) >= CACHED_SIGNATURES:
            cache.clear()
        cache[key] = value
    return value


def _hashable(key: tuple) -> tuple | None:
    """``key``, or None when a part of it does not hash."""
    try:
        hash(key)
    except TypeError:
        return None
    return key


def response_model(signature: type[dspy.Signature], native_function_calling: bool = True) -> type[pydantic.BaseModel]:
    """The pydantic model of ``signature``'s outputs that ``JSONAdapter`` sends as ``response_format``, with each list
    field's item bounds (:func:`with_item_bounds`), built once per set of output fields (their names, types, defaults
    and bounds: all the model reads; DSPy builds a new model class, and pydantic its schema, on every call). Raises as
    DSPy's builder does (an open-ended mapping, a type pydantic cannot write a schema for)."""
    key = _hashable((native_function_calling, *((name, field.annotation, field.default, repr(field.metadata))
                                                 for name, field in signature.output_fields.items())))
    return _cached(_RESPONSE_MODELS, key, lambda: with_item_bounds(
        _get_structured_outputs_response_format(signature, native_function_calling), signature))


def item_bounds(field: pydantic.fields.FieldInfo) -> dict[str, int]:
    """The ``minItems``/``maxItems`` of a list output field declared ``dspy.OutputField(min_length=...,
    max_length=...)`` (the bounds pydantic keeps in the field's metadata)."""
    bounds = {}
    for constraint in field.metadata:  # annotated_types' MinLen, MaxLen (or Len): their lengths by name
        for attribute, keyword in (("min_length", "minItems"), ("max_length", "maxItems")):
            if getattr(constraint, attribute, None) is not None:
                bounds[keyword] = getattr(constraint, attribute)
    return bounds


def with_item_bounds(model: type[pydantic.BaseModel], signature: type[dspy.Signature]) -> type[pydantic.BaseModel]:
    """``model`` (DSPy's response model of ``signature``) whose schema carries each list output field's item bounds
    (:func:`item_bounds`), which DSPy's builder drops (it reads a field's type and default only): a stage that must
    fill a list (``min_length=1``) is decoded under ``minItems: 1``, so a constrained reply never leaves it empty."""
    bounds = {name: item_bounds(field) for name, field in signature.output_fields.items()}
    bounds = {name: found for name, found in bounds.items() if found}
    if not bounds:
        return model
    schema = copy.deepcopy(model.model_json_schema())
    for name, found in bounds.items():
        prop = schema.get("properties", {}).get(name)
        if prop is not None and prop.get("type") == "array":
            prop.update(found)
    model.model_json_schema = lambda *args, **kwargs: copy.deepcopy(schema)  # a caller may edit its copy in place
    return model


def prompt_key(signature: type[dspy.Signature]) -> tuple:
    """What a system message is written from: the instructions and every field's name, type and DSPy extras
    (description, prefix, input or output), in order. A signature changed in place (``instructions`` set by an
    optimizer) has another key."""
    return (signature.instructions, *((name, field.annotation, repr(sorted((field.json_schema_extra or {}).items())))
                                      for name, field in signature.fields.items()))


def stage_schema(signature: type[dspy.Signature], native_function_calling: bool = True) -> dict | None:
    """The JSON schema of ``signature``'s outputs that ``JSONAdapter`` would send, or None where it sends none (an
    open-ended mapping, a schema pydantic cannot write)."""
    if _has_open_ended_mapping(signature):
        return None
    try:
        return response_model(signature, native_function_calling).model_json_schema()
    except Exception:  # noqa: BLE001 - JSONAdapter falls back to plain JSON mode on the same failures
        return None


class StageJSONAdapter(dspy.JSONAdapter):
    """``dspy.JSONAdapter`` that builds what depends on a stage's signature alone — its system message and its
    response format's pydantic model — once per signature content (:func:`prompt_key`, :func:`response_model`)
    instead of on every call. The prompts and the requests are ``JSONAdapter``'s: only the repeated work is gone. A
    subclass that formats the system message from anything but the signature overrides
    :meth:`format_system_message` without calling this one.

    DSPy names an adapter's format by its class name (a streaming listener looks the name up), so this class is
    named ``JSONAdapter``, the format it writes; import it as ``multihop.StageJSONAdapter``. DSPy wraps an adapter
    class's ``format`` and ``parse`` in its callbacks again at every subclass, so an inherited one would report each
    call once per level (twice under DSPy's ``JSONAdapter``: two adapter spans in an MLflow trace); here, and in
    subclasses, each is reported once."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        _wrap_inherited_once(cls)

    def format_system_message(self, signature: type[dspy.Signature]) -> str:
        key = _hashable((type(self), self.use_native_function_calling, *prompt_key(signature)))
        return _cached(_SYSTEM_MESSAGES, key, lambda: super(StageJSONAdapter, self).format_system_message(signature))

    def _prepare_response_format(self, lm, lm_kwargs, signature):
        """``JSONAdapter``'s choice of response format, its structured-output model built once per set of output
        fields."""
        if "response_format" not in lm.supported_params:
            return
        tool_calls = any(field.annotation == ToolCalls for field in signature.output_fields.values())
        if (_has_open_ended_mapping(signature) or (tool_calls and not self.use_native_function_calling)
                or not lm.supports_response_schema):
            lm_kwargs["response_format"] = {"type": "json_object"}
            return
        try:
            lm_kwargs["response_format"] = response_model(signature, self.use_native_function_calling)
        except (ValueError, pydantic.PydanticInvalidForJsonSchema, pydantic.PydanticSchemaGenerationError):
            super()._prepare_response_format(lm, lm_kwargs, signature)  # DSPy's warning and its JSON-mode fallback


def _wrap_inherited_once(cls: type[dspy.Adapter]) -> None:
    """``cls.format`` and ``cls.parse``, where inherited, as the parent's (wrapped once) rather than wrapped again;
    for this module's base, the innermost method in one wrapper (DSPy's ``JSONAdapter`` has two)."""
    for name in ("format", "parse"):
        method = cls.__dict__[name]
        if method.__wrapped__ is getattr(super(cls, cls), name):  # not defined in the class body
            setattr(cls, name, with_callbacks(inspect.unwrap(method)) if cls is StageJSONAdapter else
                    method.__wrapped__)


_wrap_inherited_once(StageJSONAdapter)
StageJSONAdapter.__name__ = "JSONAdapter"


class BoundedJSONAdapter(StageJSONAdapter):
    """``dspy.JSONAdapter`` sending each stage's bounded schema as ``response_format`` (``schema_form``:
    ``json_schema`` or ``json_object``), its token budget raised to what the schema needs, and one retry under
    tighter caps for a reply that does not parse (what depends on the signature alone is built once, as
    :class:`StageJSONAdapter` does). Any ``dspy.LM`` runs under it (``dspy.configure(lm=lm,
    adapter=BoundedJSONAdapter())`` or ``dspy.context``); it pickles and deep-copies as any adapter."""

    def __init__(self, schema_form: str = "json_schema", callbacks=None, use_native_function_calling: bool = True,
                 parallel_tool_calls: bool | None = None):
        if schema_form not in SCHEMA_FORMS:
            raise ValueError(f"unknown schema form {schema_form!r}; choose one of {', '.join(SCHEMA_FORMS)}")
        super().__init__(callbacks=callbacks, use_native_function_calling=use_native_function_calling,
                         parallel_tool_calls=parallel_tool_calls)
        self.schema_form = schema_form

    def plan(self, lm, lm_kwargs: dict[str, Any], signature) -> list[dict[str, Any]]:
        """The ``lm_kwargs`` of each decode a call may take: its bounded schema in ``schema_form`` and its budget
        (:func:`~multihop.lm.engines.schema.decoding_plan`); one plain JSON-mode call where the signature has no
        schema."""
        schema = stage_schema(signature, self.use_native_function_calling)
        if schema is None:
            return [{**lm_kwargs, "response_format": {"type": "json_object"}}]
        max_tokens = lm_kwargs.get("max_tokens") or getattr(lm, "kwargs", {}).get("max_tokens") or DEFAULT_MAX_TOKENS
        plan = decoding_plan({"type": "json_schema", "schema": schema}, max_tokens)
        return [{**lm_kwargs, "max_tokens": budget, "response_format": wire_response_format(bounded, self.schema_form)}
                for bounded, budget in plan]

    @with_capability_planning
    def __call__(self, lm, lm_kwargs, signature, demos, inputs) -> list[dict[str, Any]]:
        if plans_itself(lm):
            return super().__call__(lm, lm_kwargs, signature, demos, inputs)
        decodes = self.plan(lm, lm_kwargs, signature)
        for number, kwargs in enumerate(decodes, 1):
            try:
                return ChatAdapter.__call__(self, lm, kwargs, signature, demos, inputs)
            except AdapterParseError:
                if number == len(decodes):
                    raise
        raise AssertionError("unreachable")

    @with_capability_planning
    async def acall(self, lm, lm_kwargs, signature, demos, inputs) -> list[dict[str, Any]]:
        if plans_itself(lm):
            return await super().acall(lm, lm_kwargs, signature, demos, inputs)
        decodes = self.plan(lm, lm_kwargs, signature)
        for number, kwargs in enumerate(decodes, 1):
            try:
                return await ChatAdapter.acall(self, lm, kwargs, signature, demos, inputs)
            except AdapterParseError:
                if number == len(decodes):
                    raise
        raise AssertionError("unreachable")


def choose_adapter(local_model: bool, decodes_schemas: bool) -> dspy.Adapter:
    """The adapter an LM runs its stages under when its caller names none: the one place multihop chooses it, from
    what the LM is (:func:`default_adapter` reads it from a built LM, :func:`multihop.lm.backends.spec_adapter` from
    an LM spec). A local model (``local_model``, served by ``multihop serve`` or not) gets DSPy's ``JSONAdapter`` (a
    new :class:`StageJSONAdapter`): SmolLM2-135M degenerates on the ChatAdapter's ``[[ ## field ## ]]`` markers
    (measured: it repeats the header line until ``max_tokens``) but writes JSON objects, so the ChatAdapter's first
    attempt would be a wasted generation on every call. An LM decoding under its stages' schemas
    (``decodes_schemas``) gets it too: it is what sends the schema. Any other LM gets a new ``dspy.ChatAdapter``, the
    adapter DSPy runs a predictor under when none is configured."""
    return StageJSONAdapter() if local_model or decodes_schemas else dspy.ChatAdapter()


def default_adapter(lm: dspy.BaseLM | None) -> dspy.Adapter:
    """:func:`choose_adapter` for a built LM: an LM on one of multihop's engines (:func:`multihop.lm.backends.make_lm`)
    runs a local model when its model string starts ``local/`` and decodes under schemas when its engine is
    constrained; any other LM (or None) neither."""
    engine = getattr(lm, "engine", None)
    ours = isinstance(engine, LocalEngine)
    return choose_adapter(local_model=ours and str(lm.model).startswith("local/"),
                          decodes_schemas=ours and engine.constrained)
