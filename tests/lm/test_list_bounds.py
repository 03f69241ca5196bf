"""A list a stage must fill is declared with its bounds (``min_length=1``, ``max_length``), and the schema every LM
decodes under carries them as ``minItems``/``maxItems``: the response model's schema (DSPy's builder drops them), the
request a served LM gets, the schema a local engine decodes under, and a reply decoded so is never an empty list."""

import dspy
import pytest
from pydantic import BaseModel

import multihop
from multihop.lm.adapter import default_adapter, item_bounds, response_model, stage_schema, with_item_bounds
from multihop.lm.backends import make_lm
from multihop.lm.loopback import loopback_server
from multihop.programs import PROGRAMS
from multihop.signatures.cooprag import QuestionUnrolling
from multihop.signatures.shared import MOST_ITEMS

from helpers import spy_schemas, tiny_causal_lm

MUST_FILL = {  # program → stage → the list fields it must fill
    "CoopRAG": {"unroll": ("sub_questions", "reasoning_chain"), "complete": ("completed_chain",)},
    "ComposeRAG": {"improve_decomposition": ("new_decomposition",)},
    "HANRAG": {"decompose": ("sub_questions",)},
    "DualRAG": {"identify": ("entities",)},
    "CIRAG": {"extract_entities": ("named_entities",), "extract_triples": ("triples",)},
}
MAY_BE_EMPTY = {"ComposeRAG": {"decompose": "sub_questions"}, "CIRAG": {"integrate": "fact_after_filter"}}


class Bounded(dspy.Signature):
    """List things."""

    topic: str = dspy.InputField()
    things: list[str] = dspy.OutputField(min_length=1, max_length=4)
    maybe: list[str] = dspy.OutputField()
    count: int = dspy.OutputField()


def test_a_list_fields_declared_bounds_reach_its_schema_and_nothing_else_changes():
    assert item_bounds(Bounded.output_fields["things"]) == {"minItems": 1, "maxItems": 4}
    assert item_bounds(Bounded.output_fields["maybe"]) == {} == item_bounds(Bounded.output_fields["count"])
    properties = stage_schema(Bounded)["properties"]
    assert properties["things"] == {"items": {"type": "string"}, "title": "Things", "type": "array", "minItems": 1,
                                    "maxItems": 4}
    assert "minItems" not in properties["maybe"] and properties["count"] == {"title": "Count", "type": "integer"}
    assert response_model(Bounded) is response_model(Bounded)  # built once

    class Plain(dspy.Signature):
        """List things."""

        topic: str = dspy.InputField()
        things: list[str] = dspy.OutputField()

    class Model(BaseModel):
        things: list[str]

    assert with_item_bounds(Model, Plain) is Model and "minItems" not in str(response_model(Plain).model_json_schema())
    parsed = dspy.JSONAdapter().parse(Bounded, '{"things": [], "maybe": [], "count": 0}')
    assert parsed["things"] == []  # the bounds constrain decoding; a reply that slipped through still parses


@pytest.mark.parametrize("name", sorted(MUST_FILL))
def test_every_list_a_stage_must_fill_is_at_least_one_item_and_at_most_a_sane_number(name):
    stages = dict(PROGRAMS[name]().named_predictors())
    for stage, fields in MUST_FILL[name].items():
        properties = stage_schema(stages[stage].signature)["properties"]
        for field in fields:
            assert properties[field]["minItems"] == 1, f"{name}.{stage}.{field}"
            assert properties[field].get("maxItems", MOST_ITEMS) <= MOST_ITEMS, f"{name}.{stage}.{field}"
    for stage, field in MAY_BE_EMPTY.get(name, {}).items():
        assert "minItems" not in stage_schema(stages[stage].signature)["properties"][field]  # [] is an answer there
    if name == "DualRAG":  # each entity with one to three queries, as its prompt says
        queries = stage_schema(stages["identify"].signature)["$defs"]["EntityQueries"]["properties"]["queries"]
        assert (queries["minItems"], queries["maxItems"]) == (1, 3)


def test_a_served_lm_gets_the_bounds_and_its_reply_fills_the_list():
    with loopback_server(latency=0.0, lifetime=60) as server:
        lm = make_lm("hosted_vllm/qwen", api_base=server.api_base, cache=False)
        with dspy.context(lm=lm, adapter=default_adapter(lm)):
            unrolled = dspy.Predict(QuestionUnrolling)(question="Who founded the maker of the Xbox?")
        sent = server.requests[-1]["response_format"]["json_schema"]["schema"]["properties"]
    # the declared bound at most, shrunk with the other caps to fit the call's token budget
    assert sent["sub_questions"]["minItems"] == 1 and 1 <= sent["sub_questions"]["maxItems"] <= MOST_ITEMS
    assert sent["reasoning_chain"]["minItems"] == 1
    assert unrolled.sub_questions and unrolled.reasoning_chain  # drawn from the schema: never empty


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("tiny"), ["[] Paris is the capital of France. question"] * 5)


def test_a_local_engine_decodes_under_the_bounds_and_never_writes_an_empty_list(tiny, monkeypatch):

    schemas = spy_schemas(monkeypatch)
    lm = multihop.make_lm(f"local:{tiny}", engine="transformers", max_tokens=64, cache=False)
    program = PROGRAMS["HANRAG"]()
    with dspy.context(lm=lm):  # the stage runs under the adapter the LM decodes best with, as in a program
        result = program.run_stage(program.decompose, {"thought": "", "sub_questions": []},
                                   question="Who founded the maker of the Xbox and where was he born?")
    properties = schemas[0]["properties"]["sub_questions"]
    assert properties["minItems"] == 1 and 1 <= properties["maxItems"] <= MOST_ITEMS  # shrunk to the 64-token budget
    if not result.get("failed"):  # a tiny random model's reply may be cut at its budget; the schema is what counts
        assert 1 <= len(result.sub_questions) <= MOST_ITEMS
