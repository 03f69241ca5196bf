"""``multihop.BoundedJSONAdapter``: any ``dspy.LM`` sends each stage's bounded schema to an OpenAI-compatible server
(the loopback one), with raised budgets and one retry under tighter caps; and a multihop LM configured without an
adapter still decodes its stages under their schemas."""

from __future__ import annotations

import logging

import dspy
import pytest
from dspy.lm15 import Message, Response, TextPart, Usage
from dspy.utils.exceptions import AdapterParseError

import multihop
from multihop.data.corpus import Passage
from multihop.lm.loopback import loopback_server

from helpers import StaticRetriever, example, spy_schemas, tiny_causal_lm


def stage_requests(server) -> list[dict]:
    return [body for body in server.requests if body.get("messages")]


def schema_of(body: dict) -> dict:
    form = body["response_format"]
    assert form["type"] == "json_schema", form
    return form["json_schema"]["schema"]


def bounded(schema: dict) -> bool:
    """Whether ``schema`` is a stage's schema as the bounding leaves it (every string and list capped)."""
    from multihop.lm.engines.schema import bounded as bound

    return "properties" in schema and bound(schema) == schema


@pytest.mark.parametrize("name", ["SingleStepRAG", "HANRAG"])
def test_a_program_runs_on_dspy_lm_with_the_bounded_adapter_end_to_end(name, tmp_path):
    from multihop.programs import PROGRAMS

    retriever = StaticRetriever([Passage.make(f"T{i}", f"text {i} about Paris") for i in range(6)])
    with loopback_server() as server:
        lm = dspy.LM("hosted_vllm/loopback", api_base=server.api_base, cache=False, max_tokens=256)
        dspy.configure(lm=lm, adapter=multihop.BoundedJSONAdapter())
        program = PROGRAMS[name](retriever=retriever)
        devset = [example(i, answer="Paris") for i in range(3)]

        def metric(gold, pred, trace=None):
            return float(isinstance(pred.answer, str))

        result = dspy.Evaluate(devset=devset, metric=metric, num_threads=2, display_progress=False)(program)
        assert result.score == 100.0
        sent = stage_requests(server)
        assert sent and all(bounded(schema_of(body)) for body in sent)  # every stage request sent its schema
        assert any("maxLength" in repr(schema_of(body)) for body in sent)
        first = program(question=devset[0].question).answer

        program.save(str(tmp_path / "whole"), save_program=True)
        loaded = dspy.load(str(tmp_path / "whole"), allow_pickle=True)
        before = len(server.requests)
        assert loaded(question=devset[0].question).answer == first
        assert all(bounded(schema_of(body)) for body in server.requests[before:])


def test_json_object_form_and_dspy_context():
    class Out(dspy.Signature):
        """Answer."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()
        hops: list[str] = dspy.OutputField()

    with loopback_server() as server:
        lm = dspy.LM("hosted_vllm/loopback", api_base=server.api_base, cache=False, max_tokens=100)
        with dspy.context(lm=lm, adapter=multihop.BoundedJSONAdapter(schema_form="json_object")):
            result = dspy.Predict(Out)(question="q")
        assert isinstance(result.hops, list)
        form = server.requests[-1]["response_format"]
        assert form["type"] == "json_object" and form["schema"]["properties"]["hops"]["maxItems"] >= 1
    with pytest.raises(ValueError, match="unknown schema form"):
        multihop.BoundedJSONAdapter(schema_form="grammar")


class Unparsable:
    """An engine (not multihop's) that answers every call with text no adapter parses, recording each request."""

    def __init__(self):
        self.configs = []

    def complete(self, request) -> Response:
        self.configs.append(request.config)
        return Response(id=None, model="x", message=Message.assistant((TextPart("not json at all"),)),
                        finish_reason="length", usage=Usage(input_tokens=1, output_tokens=1))


def test_budget_raised_and_one_retry_under_tighter_caps():
    class Many(dspy.Signature):
        """List things."""

        question: str = dspy.InputField()
        things: list[str] = dspy.OutputField()
        reasons: list[str] = dspy.OutputField()

    engine = Unparsable()
    lm = dspy.LM("openai/unparsable", engine=engine, cache=False, max_tokens=20)
    with dspy.context(lm=lm, adapter=multihop.BoundedJSONAdapter()), pytest.raises(AdapterParseError):
        dspy.Predict(Many)(question="q")
    assert len(engine.configs) == 2  # the bounded decode, then one under tighter caps
    first, second = (c.response_format["json_schema"]["schema"] if "json_schema" in c.response_format
                     else c.response_format["schema"] for c in engine.configs)
    assert engine.configs[0].max_tokens > 20  # the smallest caps need more than 20 tokens: the budget is raised
    assert second["properties"]["things"]["items"]["maxLength"] <= first["properties"]["things"]["items"]["maxLength"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_causal_lm(tmp_path_factory.mktemp("tiny"), ["Paris is the capital of France. answer question"] * 5)


def test_a_multihop_lm_configured_without_an_adapter_decodes_stages_under_their_schemas(tiny, monkeypatch):
    from multihop.programs import PROGRAMS

    schemas = spy_schemas(monkeypatch)
    lm = multihop.make_lm(f"local:{tiny}", engine="transformers", max_tokens=24, cache=False)
    dspy.configure(lm=lm)  # no adapter: DSPy's default would be the ChatAdapter
    program = PROGRAMS["NoRetrieval"]()
    program(question="What is the capital of France?")
    assert len(lm.history) == 1  # one LM request for the one stage call
    assert schemas and all(schema is not None for schema in schemas)


def test_a_stage_in_chat_format_on_a_constrained_engine_warns_once(tiny, caplog):
    lm = multihop.make_lm(f"local:{tiny}", engine="transformers", max_tokens=8, cache=False)
    with caplog.at_level(logging.WARNING, logger="multihop.lm.engines.local_engine"):
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            for question in ("a?", "b?"):
                try:
                    dspy.Predict("question -> answer")(question=question)
                except Exception:  # noqa: BLE001 - a tiny model's reply may not parse; the warning is what counts
                    pass
    lines = [r for r in caplog.records if "ChatAdapter format" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0].getMessage()


def test_the_stage_adapter_sends_what_json_adapter_sends_and_builds_it_once_per_signature(monkeypatch):
    from multihop.lm import adapter as adapter_module
    from multihop.signatures import AnswerFromPassages

    signature = dspy.ChainOfThought(AnswerFromPassages).predict.signature
    demos = [{"question": "Capital of Italy?", "passages": ["Rome is a city."], "reasoning": "r", "answer": "Rome"}]
    inputs = {"question": "Who?", "passages": ["Paris is a city."]}
    lm = multihop.make_lm("openai/loopback", api_base="http://127.0.0.1:9/v1", api_key="x", cache=False)
    ours, dspys = adapter_module.StageJSONAdapter(), dspy.JSONAdapter()

    def sent(adapter, sig):
        kwargs = {}
        adapter._prepare_response_format(lm, kwargs, sig)
        return adapter.format(sig, demos, inputs), kwargs["response_format"].model_json_schema()

    assert sent(ours, signature) == sent(dspys, signature)
    built = []
    real = adapter_module._get_structured_outputs_response_format
    monkeypatch.setattr(adapter_module, "_get_structured_outputs_response_format",
                        lambda *args: built.append(args) or real(*args))
    monkeypatch.setattr(adapter_module, "_RESPONSE_MODELS", {})
    other = signature.with_instructions("Answer in one word.")
    for sig in (signature, signature, other, other):
        sent(ours, sig)
    assert len(built) == 1  # the same output fields: one model, whatever the instructions
    assert "Answer in one word." in ours.format_system_message(other)
    assert "Answer in one word." not in ours.format_system_message(signature)

    class Changed(dspy.Signature):
        """Answer."""

        question: str = dspy.InputField()
        answer: str = dspy.OutputField()

    before = ours.format_system_message(Changed)
    Changed.instructions = "Answer with a date."  # in place, as an optimizer may
    assert ours.format_system_message(Changed) == dspys.format_system_message(Changed) != before
    assert sent(ours, Changed) == sent(dspys, Changed)


class Mixin:
    pass


class Loud(multihop.StageJSONAdapter):
    def format(self, signature, demos, inputs):  # a user's own format
        return super().format(signature, demos, inputs)


class Quiet(Loud):
    pass


@pytest.mark.parametrize("adapter", [multihop.StageJSONAdapter(), multihop.BoundedJSONAdapter(),
                                     type("Mixed", (Mixin, multihop.StageJSONAdapter), {})(), Quiet()],
                         ids=["StageJSONAdapter", "BoundedJSONAdapter", "a mixin subclass", "a user's format"])
def test_a_callback_sees_each_format_and_parse_once(adapter):
    from dspy.utils.callback import BaseCallback

    from multihop.signatures import DirectAnswer

    seen = []

    class Count(BaseCallback):
        def on_adapter_format_start(self, call_id, instance, inputs):
            seen.append("format")

        def on_adapter_parse_start(self, call_id, instance, inputs):
            seen.append("parse")

    with dspy.context(callbacks=[Count()]):
        adapter.format(DirectAnswer, [], {"question": "Who?"})
        adapter.parse(DirectAnswer, '{"answer": "Paris"}')
    # DSPy's own JSONAdapter reports its format twice; a user's format calling ours is reported at each (DSPy's rule)
    assert seen == (["format", "format", "parse"] if isinstance(adapter, Loud) else ["format", "parse"])


def test_a_streaming_listener_takes_the_stage_adapter_as_json():
    from dspy.streaming import StreamListener

    listener = StreamListener(signature_field_name="answer")
    assert type(multihop.StageJSONAdapter()).__name__ in listener.adapter_identifiers
