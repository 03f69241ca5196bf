import logging
from types import SimpleNamespace
from typing import Literal

import dspy
import pytest
from dspy.lm15 import Config, Message, Request

from multihop.lm import backends as lms
from multihop.lm.adapter import default_adapter
from multihop.lm.backends import make_lm
from multihop.lm.engines import LlamaCppEngine, TransformersEngine
from multihop.lm.engines.local_engine import Generation, LocalEngine, reusable_prefix
from multihop.lm.engines.schema import (
    CHARS_PER_TOKEN,
    LIST_CAP,
    MIN_LIST,
    MIN_STRING,
    POLICY,
    STRING_CAP,
    bounded,
    response_schema,
    worst_case_chars,
)


def test_every_string_and_list_gets_a_cap_and_declared_caps_are_kept():
    schema = {"type": "object", "properties": {
        "answer": {"type": "string"},
        "short": {"type": "string", "maxLength": 20},
        "choice": {"type": "string", "enum": ["a", "b"]},
        "sub_questions": {"type": "array", "items": {"type": "string"}},
        "chain": {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
        "many": {"type": "array", "minItems": 12, "items": {"type": "integer"}},
        "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "count": {"type": "integer"},
    }}
    props = bounded(schema)["properties"]
    assert props["answer"]["maxLength"] == STRING_CAP and props["short"]["maxLength"] == 20
    assert "maxLength" not in props["choice"] and "maxLength" not in props["count"]
    assert props["sub_questions"]["maxItems"] == LIST_CAP and props["sub_questions"]["items"]["maxLength"] == STRING_CAP
    assert props["chain"]["maxItems"] == LIST_CAP and props["chain"]["items"]["maxItems"] == 3
    assert props["many"]["maxItems"] == 12  # never below the schema's own minimum
    assert props["maybe"]["anyOf"][0]["maxLength"] == STRING_CAP
    assert "maxLength" not in schema["properties"]["answer"]  # the input is not changed


def test_worst_case_size_is_the_longest_json_the_schema_allows():
    triple = {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3}
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "kind": {"enum": ["bridge", "x"]},
                                               "chain": {"type": "array", "items": triple, "maxItems": 2}}}
    # {"ok": false, "kind": "bridge", "chain": [["aaaaa", "aaaaa", "aaaaa"], ["aaaaa", "aaaaa", "aaaaa"]]}
    triple_chars = 2 + 3 * (7 + 2)  # [ ] and three quoted strings, each with a comma and a space (one spare)
    assert worst_case_chars(triple) == triple_chars
    # each property: its quoted name, a colon, a space, a comma, a space (6) and its value
    expected = 2 + (2 + 6 + 5) + (4 + 6 + 8) + (5 + 6 + 2 + 2 * (triple_chars + 2))
    assert worst_case_chars(schema) == expected
    assert worst_case_chars({"type": "string"}) == 10_002  # unbounded: counted as too long for any budget
    assert worst_case_chars({}) == 10_000 and worst_case_chars({"type": "integer"}) == 20


def test_a_property_named_like_a_keyword_is_a_property():
    schema = {"type": "object", "properties": {"type": {"type": "string"}, "items": {"type": "array"}}}
    props = bounded(schema)["properties"]
    assert props["type"] == {"type": "string", "maxLength": STRING_CAP}
    assert props["items"]["maxItems"] == LIST_CAP


def test_caps_shrink_until_the_longest_reply_fits_the_token_budget():
    schema = {"type": "object", "properties": {
        "sub_questions": {"type": "array", "items": {"type": "string"}},
        "chain": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}}}
    assert worst_case_chars(bounded(schema)) > 512 * CHARS_PER_TOKEN
    for budget in (128, 256, 512):
        assert worst_case_chars(bounded(schema, max_tokens=budget)) <= budget * CHARS_PER_TOKEN
    tight = bounded(schema, max_tokens=1)["properties"]["sub_questions"]  # never below the minimum caps
    assert (tight["maxItems"], tight["items"]["maxLength"]) == (MIN_LIST, MIN_STRING)


def test_only_a_json_schema_response_format_constrains_decoding():
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    assert response_schema({"type": "json_schema", "schema": schema, "name": "X", "strict": True}) == schema
    assert response_schema({"type": "json_object"}) is None and response_schema(None) is None


def test_the_llama_cpp_engine_declares_structured_outputs_only_when_constrained(tmp_path):
    constrained, free = LlamaCppEngine(tmp_path / "m.gguf"), LlamaCppEngine(tmp_path / "m.gguf", constrained=False)
    assert constrained.supports_response_schema and "response_format" in constrained.supported_params
    assert not free.supports_response_schema and "response_format" not in free.supported_params
    lm = dspy.LM("local/x", engine=constrained)
    assert lm.supports_response_schema and "response_format" in lm.supported_params  # what the JSONAdapter reads


def test_auto_engine_runs_a_gguf_model_on_llama_cpp_and_falls_back_without_it(monkeypatch, caplog):
    monkeypatch.setattr(lms, "llama_cpp_available", lambda: True)
    lm = make_lm("local:smollm2")
    assert isinstance(lm._engine_spec, LlamaCppEngine) and lm._engine_spec.constrained
    assert lm.model.startswith("local/smollm2-llamacpp-") and lm.model.endswith(f"-f32prompts-json{POLICY}")
    # the shipped Q4_1 file decodes; its float32 conversion evaluates the prompts
    assert lm._engine_spec.gguf == lms.models.resolve("smollm2")
    assert lm._engine_spec.prompt_gguf == lms.models.llamacpp_gguf("smollm2")
    assert make_lm("local:smollm2", max_tokens=7)._engine_spec is lm._engine_spec  # one engine per model
    free = make_lm("local:smollm2", constrained=False)
    assert free.model == lm.model.removesuffix(f"-json{POLICY}") and not free._engine_spec.constrained
    monkeypatch.setattr(lms, "llama_cpp_available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="multihop.lm.backends"):
        fallback = make_lm("local:smollm2")
    assert isinstance(fallback._engine_spec, TransformersEngine) and "llama-cpp-python is not installed" in caplog.text
    assert fallback._engine_spec.constrained and fallback.model.endswith(f"-json{POLICY}")  # constrained there too
    with pytest.raises(ValueError, match="needs llama-cpp-python"):
        make_lm("local:smollm2", engine="llamacpp")


def test_a_lora_student_is_converted_for_llama_cpp_and_keys_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(lms, "llama_cpp_available", lambda: True)
    adapter = tmp_path / "lora"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.safetensors").write_bytes(b"")  # never read: the conversion is stubbed
    converted = []
    monkeypatch.setattr(lms, "gguf_lora", lambda folder, gguf, sha: converted.append((folder, sha)) or
                        tmp_path / f"{sha[:4]}converted.gguf")
    student = make_lm("local:smollm2", adapter=adapter)  # auto: llama.cpp, with the adapter converted once
    assert converted == [(adapter, lms.models.REGISTRY["smollm2"].sha256)]
    assert student._engine_spec.lora == tmp_path / f"{converted[0][1][:4]}converted.gguf"
    assert student.model != make_lm("local:smollm2").model  # the adapter keys DSPy's cache
    on_transformers = make_lm("local:smollm2", adapter=adapter, engine="transformers")
    assert on_transformers._engine_spec.adapter == adapter
    assert on_transformers._engine_spec.path == lms.resolve_local("smollm2")


def test_engine_choices_that_cannot_work_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(lms, "llama_cpp_available", lambda: True)
    with pytest.raises(ValueError, match="the llama.cpp engine runs GGUF files"):
        make_lm(f"local:{lms.resolve_local('smollm2')}", engine="llamacpp")
    with pytest.raises(FileNotFoundError, match="not a LoRA adapter folder"):
        make_lm("local:smollm2", adapter=tmp_path)
    with pytest.raises(ValueError, match="unknown engine"):
        make_lm("local:smollm2", engine="vllm")
    with pytest.raises(ValueError, match="local models only"):
        make_lm("openai/x", engine="llamacpp")
    with pytest.raises(ValueError, match="no model server answers at http://127.0.0.1:9/v1"):
        make_lm("local:smollm2", api_base="http://127.0.0.1:9/v1")  # nothing listens on the discard port
    monkeypatch.setattr(lms, "served_model", lambda api_base, api_key=None: "qwen-llamacpp-0123456789ab")
    with pytest.raises(ValueError, match="runs 'qwen-llamacpp-0123456789ab', not local:smollm2"):
        make_lm("local:smollm2", api_base="http://127.0.0.1:8000/v1")


def llama_lm(**settings) -> dspy.LM:
    return engine_lm("llamacpp", **settings)


def engine_lm(engine: str, **settings) -> dspy.LM:
    if engine == "llamacpp":
        pytest.importorskip("llama_cpp", reason="llama-cpp-python is not built in this virtualenv")
    return make_lm("local:smollm2", engine=engine, cache=False, **settings)


class EveryFieldType(dspy.Signature):
    """Read the passage and describe the question it answers."""

    passage: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short answer")
    sub_questions: list[str] = dspy.OutputField()
    chain: list[list[str]] = dspy.OutputField(desc="[head, relation, tail] triples")
    supported: bool = dspy.OutputField()
    hops: int = dspy.OutputField()
    kind: Literal["bridge", "comparison"] = dspy.OutputField()


PASSAGE = "Audrey Hepburn starred as Eliza Doolittle in My Fair Lady (1964), directed by George Cukor."


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["llamacpp", "transformers"])
def test_a_constrained_reply_parses_for_every_field_type_and_ends_before_the_cap(engine):
    lm = engine_lm(engine, max_tokens=512)
    dspy.configure(lm=lm, adapter=dspy.JSONAdapter())
    result = dspy.Predict(EveryFieldType)(passage=PASSAGE)  # an AdapterParseError would fail the test
    assert isinstance(result.answer, str) and len(result.answer) <= 200
    assert isinstance(result.sub_questions, list) and all(isinstance(s, str) for s in result.sub_questions)
    assert all(isinstance(row, list) and all(isinstance(x, str) for x in row) for row in result.chain)
    assert isinstance(result.supported, bool) and isinstance(result.hops, int)
    assert result.kind in ("bridge", "comparison")
    assert len(result.sub_questions) <= 6 and len(result.chain) <= 6  # the bounded schema's caps
    assert 0 < lm.history[-1]["usage"]["completion_tokens"] < 512  # it ended when the fields were written


@pytest.mark.slow
def test_real_stage_signatures_parse_under_constraints(musique_dev):
    from multihop.signatures.composerag import AnswerVerification
    from multihop.signatures.cooprag import QuestionUnrolling

    lm = llama_lm(max_tokens=384)
    dspy.configure(lm=lm, adapter=default_adapter(lm))  # the project's: the schema keeps the lists' bounds
    unrolled = dspy.Predict(QuestionUnrolling)(question=musique_dev[0].question)
    assert isinstance(unrolled.hop_count, int) and isinstance(unrolled.sub_questions, list)
    assert all(isinstance(row, list) for row in unrolled.reasoning_chain)
    assert 1 <= len(unrolled.sub_questions) <= 6 and 1 <= len(unrolled.reasoning_chain) <= 6  # minItems, maxItems
    verdict = dspy.Predict(AnswerVerification)(question="Who played Eliza?", answer="Audrey Hepburn",
                                               source=[PASSAGE])
    assert isinstance(verdict.valid, bool)


@pytest.mark.slow
def test_prefix_reuse_stop_strings_usage_and_parity_with_transformers():

    engine = llama_lm()._engine_spec
    system = "You answer in one short phrase. " + PASSAGE * 4  # a prefix longer than a flash-attention tile
    first = Request(model="m", system=system, messages=(Message.user("Who played Eliza Doolittle?"),),
                    config=Config(max_tokens=24, temperature=0.0))
    second = Request(model="m", system=system, messages=(Message.user("Who directed the film?"),),
                     config=Config(max_tokens=24, temperature=0.0))
    engine.complete(first)
    prompts = engine._model.prompts  # the float32 context that evaluates SmolLM2's prompts
    evaluated, real_eval = [], prompts.eval
    prompts.eval = lambda tokens: evaluated.append(len(tokens)) or real_eval(tokens)
    try:
        reused = engine.complete(second)  # only the tokens after the prefix it shares with the first are evaluated
    finally:
        prompts.eval = real_eval
    usage = reused.usage  # the decoding context evaluates the prompt's last token
    assert evaluated == [usage.input_tokens - usage.cache_read_tokens - 1] and usage.cache_read_tokens > 20
    fresh = LlamaCppEngine(engine.gguf, prompt_gguf=engine.prompt_gguf).complete(second)  # nothing to reuse
    assert reused.text == fresh.text
    usage = fresh.usage
    assert usage.input_tokens > 20 and 0 < usage.output_tokens <= 24
    stopped = engine.complete(Request(model="m", system=system, messages=(Message.user("List two facts."),),
                                      config=Config(max_tokens=48, temperature=0.0, stop=("\n", "."))))
    assert "\n" not in stopped.text and "." not in stopped.text
    capital = Request(model="m", messages=(Message.user("What is the capital of France? One word."),),
                      config=Config(max_tokens=8, temperature=0.0))
    # both engines run the same float32 weights with different kernels: greedy texts may differ, the fact may not
    assert "Paris" in engine.complete(capital).text
    assert "Paris" in TransformersEngine(lms.resolve_local("smollm2")).complete(capital).text


STAGES = [f"You are step {step} of a pipeline. " + " ".join(f"Rule {step}.{i}: answer briefly and plainly."
                                                                for i in range(25)) for step in range(3)]


def stage_request(step: int, question: int, system: str | None = None) -> Request:
    return Request(model="m", system=system or STAGES[step], config=Config(max_tokens=8, temperature=0.0),
                   messages=(Message.user(f"Question {question}: what is {question} plus {step}?"),))


def stage_engine(kind: str, **settings) -> LocalEngine:
    if kind.startswith("llamacpp"):
        pytest.importorskip("llama_cpp", reason="llama-cpp-python is not built in this virtualenv")
        weights = lms.llamacpp_weights("smollm2", split_prompts=kind == "llamacpp-split")
        return LlamaCppEngine(weights.gguf, prompt_gguf=weights.prompt_gguf, **settings)
    return TransformersEngine(lms.resolve_local("smollm2"), **settings)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["llamacpp", "llamacpp-split", "transformers"])
def test_alternating_stages_each_evaluate_only_their_own_suffix_and_reply_as_without_the_cache(kind):
    cached, uncached = stage_engine(kind), stage_engine(kind, prefix_cache_bytes=0)
    replies, evaluated = [], []
    for question in range(2):
        for step in range(3):  # each call follows another stage's: only the per-stage cache holds its prefix
            response = cached.complete(stage_request(step, question))
            usage = response.usage
            evaluated.append(usage.input_tokens - usage.cache_read_tokens)
            uncached.forget_prefix()
            replies.append((response.text, uncached.complete(stage_request(step, question)).text))
    assert all(ours == theirs for ours, theirs in replies), replies
    prompt = cached.complete(stage_request(0, 2)).usage.input_tokens
    assert prompt > 200 and min(evaluated[:3]) > prompt - 20  # first round: each stage's prompt evaluated whole
    # second round: only the question's own tokens (a flash-attention prompt context evaluates at least a tile, and
    # the decoding context the last token)
    if kind == "llamacpp-split":
        from multihop.lm.engines.llamacpp_prompt import FLASH_TILE

        assert max(evaluated[3:]) == FLASH_TILE + 1
    else:
        assert max(evaluated[3:]) < 30
    changed = STAGES[0].replace("Rule 0.10", "Rule 9.10")  # another prompt: reused up to the change only
    usage = cached.complete(stage_request(0, 3, changed)).usage
    assert usage.input_tokens - usage.cache_read_tokens > prompt / 2
    bounded = stage_engine(kind, prefix_cache_bytes=1 << 20)  # less than one prompt's state: the last call's only
    for step in range(2):
        bounded.complete(stage_request(step, 0))
    usage = bounded.complete(stage_request(0, 1)).usage
    assert usage.input_tokens - usage.cache_read_tokens > prompt - 20  # another stage's state: the template shared


class ScriptedEngine(LocalEngine):
    """Replies with the scripted finishes in turn, recording the schema of each decode."""

    def __init__(self, finishes: list[str], constrained: bool = True):
        super().__init__("scripted", constrained)
        self.finishes, self.schemas, self.budgets = finishes, [], []

    def generate(self, messages, config, max_tokens, schema):
        self.schemas.append(schema)
        self.budgets.append(max_tokens)
        finish = self.finishes[len(self.schemas) - 1]
        return Generation("{}", finish, 10, 7, max_tokens if finish == "length" else 5)


def constrained_request(schema: dict, max_tokens: int):

    response_format = {"type": "json_schema", "schema": schema, "name": "Out", "strict": True}
    return Request(model="m", messages=(Message.user("q"),),
                   config=Config(max_tokens=max_tokens, response_format=response_format))


def test_a_constrained_reply_cut_at_the_cap_is_decoded_again_under_tighter_caps():
    schema = {"type": "object", "properties": {"sub_questions": {"type": "array", "items": {"type": "string"}}}}
    engine = ScriptedEngine(["length", "stop"])
    reply = engine.complete(constrained_request(schema, 64))
    assert engine.schemas == [bounded(schema, 64), bounded(schema, 64 // CHARS_PER_TOKEN)]
    assert engine.schemas[1] != engine.schemas[0] and reply.finish_reason == "stop"
    # the prompt and its cached prefix count once; both replies' tokens count
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cache_read_tokens) == (10, 69, 7)


def test_a_budget_the_smallest_caps_do_not_fit_is_raised_to_what_they_need_and_none_without_constraints():
    schema = {"type": "object", "properties": {"chain": {"type": "array", "items": {"type": "string"}}}}
    smallest = bounded(schema, 8)  # 3 items of 24 characters: 99 characters of JSON at most
    assert worst_case_chars(smallest) == 99 and bounded(schema, 8 // CHARS_PER_TOKEN) == smallest
    engine = ScriptedEngine(["length", "stop"])
    reply = engine.complete(constrained_request(schema, 8))
    assert engine.schemas == [smallest, smallest] and reply.finish_reason == "stop"
    assert engine.budgets == [33, 64]  # its characters at three a token, then a token a character, at most 8 × 8
    unbounded = ScriptedEngine(["length", "length"])  # a part no cap bounds (10,000 characters) asks for no more
    unbounded.complete(constrained_request({"type": "object", "properties": {"any": {}}}, 100))
    assert unbounded.budgets == [800]  # one decode: the retry could ask for no more
    roomy = ScriptedEngine(["length", "stop"])
    roomy.complete(constrained_request(schema, 512))
    assert roomy.budgets[0] == 512 and roomy.schemas == [bounded(schema, 512), bounded(schema, 170)]
    free = ScriptedEngine(["length", "stop"], constrained=False)
    free.complete(constrained_request(schema, 64))
    assert free.schemas == [None] and free.budgets == [64]


def test_llama_cpp_decodes_greedily_with_the_engines_seed_and_reports_the_reused_prefix(tmp_path):
    import numpy as np

    calls = []

    class Model:  # stands in for llama_cpp.Llama: the previous prompt's tokens are 1 2 3 9, no state cached
        input_ids, n_tokens, cache, prompts = np.array([1, 2, 3, 9, 0, 0]), 4, None, None

        def create_chat_completion(self, messages, **options):
            calls.append(options)
            self.input_ids = np.array([1, 2, 3, 4, 5, 0])
            return {"choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1}}

    engine = LlamaCppEngine(tmp_path / "m.gguf")
    engine._model = Model()
    reply = engine.complete(Request(model="m", messages=(Message.user("q"),), config=Config(max_tokens=8)))
    assert calls[0]["seed"] == 0 and calls[0]["top_k"] == 0 and calls[0]["temperature"] == 0.0
    assert "response_format" not in calls[0]  # no schema asked for
    assert reply.usage.cache_read_tokens == 3 and reply.text == "Paris"
    engine._model.input_ids = np.array([1, 2, 3, 9, 0, 0])
    engine._model.cache = SimpleNamespace(cache_state={(1, 2, 3, 4, 7): None, (8,): None})  # a state sharing more
    assert engine.complete(Request(model="m", messages=(Message.user("q2"),), config=Config(max_tokens=8))
                           ).usage.cache_read_tokens == 4


def test_the_reusable_prefix_leaves_the_last_prompt_token_to_evaluate():
    assert reusable_prefix([1, 2, 3, 9], [1, 2, 3, 4, 5]) == 3
    assert reusable_prefix([1, 2, 3, 4, 5, 6], [1, 2, 3]) == 2  # the whole prompt is cached: its last token again
    assert reusable_prefix([7, 2], [1, 2]) == 0 and reusable_prefix([], [1]) == 0 and reusable_prefix([1], []) == 0


@pytest.mark.slow
def test_transformers_reuses_the_shared_prefix_with_identical_output():

    system = "You answer in one short phrase. " + PASSAGE
    first, second = (Request(model="m", system=system, messages=(Message.user(q),),
                             config=Config(max_tokens=16, temperature=0.0))
                     for q in ("Who played Eliza Doolittle?", "Who directed the film?"))
    engine = TransformersEngine(lms.resolve_local("smollm2"))
    engine.complete(first)
    reused = engine.complete(second)
    assert 20 < reused.usage.cache_read_tokens < reused.usage.input_tokens  # the system prompt came from the cache
    fresh = TransformersEngine(lms.resolve_local("smollm2")).complete(second)
    assert fresh.usage.cache_read_tokens == 0 and reused.text == fresh.text


def test_chat_request_keeps_the_lms_settings_unless_overridden():
    from multihop.lm.backends import chat_request

    lm = make_lm("openai/x", max_tokens=64, temperature=0.3)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Capital of France?"}]
    request = chat_request(lm, messages, max_tokens=8)
    assert (request.config.max_tokens, request.config.temperature) == (8, 0.3)
    assert request.system == "Be brief." and [m.role for m in request.messages] == ["user", "assistant", "user"]
    assert request.messages[-1].text == "Capital of France?"


def test_every_stage_of_every_program_fits_its_budget_at_the_default_local_cap():
    from dspy.adapters.json_adapter import _get_structured_outputs_response_format

    from multihop.lm.defaults import LOCAL_MAX_TOKENS
    from multihop.lm.engines.schema import decoding_plan, tokens_needed
    from multihop.programs import PROGRAMS

    raised = set()
    for name, method in ((m.name, m) for m in PROGRAMS.declared()):
        for stage, predictor in method.program().named_predictors():
            schema = _get_structured_outputs_response_format(predictor.signature).model_json_schema()
            plan = decoding_plan({"type": "json_schema", "schema": schema}, LOCAL_MAX_TOKENS)
            (first, budget), (last, last_budget) = plan[0], plan[-1]
            assert worst_case_chars(first) < 10_000, f"{name}.{stage} has an unbounded part"
            assert budget >= tokens_needed(first) and last_budget >= worst_case_chars(last), f"{name}.{stage}"
            assert last_budget <= 8 * LOCAL_MAX_TOKENS  # and none past the ceiling
            if budget > LOCAL_MAX_TOKENS:
                raised.add(f"{name}.{stage}")
    assert "CoopRAG.unroll" in raised  # the unrolling's smallest caps need more than 128 tokens


def test_a_decoding_plan_is_bounded_once_per_schema_and_keeps_the_field_order(monkeypatch):
    from multihop.lm.engines import schema as schema_module

    calls = []
    real = schema_module.bounded
    monkeypatch.setattr(schema_module, "bounded", lambda *args: calls.append(args) or real(*args))
    schema_module._bounded_plan.cache_clear()
    form = {"type": "json_schema", "schema": {"type": "object", "required": ["zeta", "alpha"],
                                              "properties": {"zeta": {"type": "string"}, "alpha": {"type": "string"}}}}
    first = schema_module.decoding_plan(form, 64)
    assert schema_module.decoding_plan(form, 64) == first and len(calls) == 2  # the two decodes, bounded once
    assert list(first[0][0]["properties"]) == ["zeta", "alpha"]  # a grammar writes the fields in this order
    # 192 characters (64 tokens × 3): caps 200 → 150 → 112 → 84 → 63, as {"zeta": "…", "alpha": "…"} at 84 is 193
    assert first[0][0]["properties"]["zeta"]["maxLength"] == 63
    schema_module.decoding_plan(form, 128)
    assert len(calls) == 4  # another budget is another plan
