"""MetaRAG: the monitor's stop rule, the four knowledge conditions and their plans, the iteration cap, the
Table 3 ablations, the answer returned, the fallbacks and the gold rows, on scripted LMs."""

import json

import dspy
import pytest

from multihop.data.corpus import Passage
from multihop.data.loaders import load_dataset
from multihop.optimize.gold_targets import gold_targets
from multihop.programs import MetaRAG
from multihop.programs.baselines.metarag import condition
from multihop.programs.baselines.metarag.parsing import authors_external, authors_internal, authors_rewrite_query
from multihop.signatures.metarag import (
    CHECK_FINAL_ANSWER,
    ERROR_TYPES,
    MULTI_STEP_REASONING,
    NEW_REFERENCES,
    RELY_ON_OWN_KNOWLEDGE,
    RELY_ON_REFERENCES,
    THINK_STEP_BY_STEP,
)

from helpers import TWO_HOP_MUSIQUE, KeyedRetriever, StageScript, field

QUESTION = "Which film has the director who died later, Say It With Flowers or Boot Hill Bandits?"
NEW_QUERY = "death dates of S. Roy Luby and John Baxter"
BOOT, FLOWERS, LUBY, BAXTER, TURGUL = DOCS = [
    Passage.make("Boot Hill Bandits", "Boot Hill Bandits is a 1942 American Western film directed by S. Roy Luby."),
    Passage.make("Say It With Flowers", "Say It With Flowers is a 1934 British film directed by John Baxter."),
    Passage.make("S. Roy Luby", "S. Roy Luby (1904 – 1976) was an American film director."),
    Passage.make("John Baxter", "John Baxter (1896 – 1975) was a British film director."),
    Passage.make("Yavuz Turgul", "Yavuz Turgul is a Turkish film director."),
]
REASONING = "Boot Hill Bandits was directed by S. Roy Luby. S. Roy Luby died in 1976."


def program(**switches) -> MetaRAG:
    retriever = KeyedRetriever({NEW_QUERY: [LUBY, BAXTER, BOOT]}, [BOOT, FLOWERS, TURGUL])  # the question's by default
    return MetaRAG(retriever=retriever, k=3, **switches)


def answers(first: str, later: str):
    """A cognition that answers ``first`` until a plan has made a suggestion, then ``later``."""
    return lambda prompt: {"reasoning": REASONING, "answer": later if json.loads(field(prompt, "suggestions"))
                           else first}


def script(prog, **replies) -> StageScript:
    defaults = {"answer": answers("Cannot determine", "Boot Hill Bandits"), "expert": {"answer": "Boot Hill Bandits"},
                "internal": {"reliable": "false"}, "external": {"sufficient": "false"},
                "critic": {"error": "none", "suggestion": ""}, "query": {"query": NEW_QUERY},
                "support": {"entailed": "true"}}
    return StageScript({**defaults, **replies}, prog)


def run(prog, stages, question=QUESTION):
    with dspy.context(lm=stages.lm):
        return prog(question=question)


def documents(prompt, name="documents"):
    return json.loads(field(prompt, name))


def test_a_satisfactory_answer_is_output_at_once():
    prog = program()
    stages = script(prog, answer={"reasoning": REASONING, "answer": "Boot Hill Bandits"})
    prediction = run(prog, stages)
    assert stages.seen == ["answer", "expert"] and prediction.answer == "Boot Hill Bandits"
    assert prediction.rounds == [] and prediction.monitor_passed is True
    assert prediction.counts["rounds"] == 0 and prediction.counts["monitor_passed"] == 1
    assert prog.retriever.calls == [(QUESTION, 3)] and prediction.passage_ids == [BOOT.id, FLOWERS.id, TURGUL.id]
    assert documents(stages.prompts_of("expert")[0]) == [p.render() for p in (BOOT, FLOWERS, TURGUL)]  # the same docs


def test_the_monitor_evaluates_exactly_when_the_similarity_is_not_above_the_threshold():
    # token F1 of "Boot Hill" against the expert's "Boot Hill Bandits" is 0.8; passing is strictly above (as coded)
    for threshold, evaluated in [(0.79, False), (0.8, True), (0.3, False)]:
        prog = program(threshold=threshold, max_iterations=1)
        stages = script(prog, answer={"reasoning": REASONING, "answer": "Boot Hill"})
        prediction = run(prog, stages)
        assert ("internal" in stages.seen) is evaluated and prediction.counts["rounds"] == int(evaluated)
        if evaluated:
            assert prediction.rounds[0]["similarity"] == pytest.approx(0.8)


def test_insufficient_knowledge_asks_a_new_query_whose_documents_join_the_references():
    prog = program()
    stages = script(prog)
    prediction = run(prog, stages)
    assert stages.seen == ["answer", "expert", "internal", "external", "critic", "query", "answer", "expert"]
    assert prediction.answer == "Boot Hill Bandits" and prediction.counts["monitor_passed"] == 1
    assert prog.retriever.calls == [(QUESTION, 3), (NEW_QUERY, 3)]  # the query stage's text, verbatim
    query = stages.prompts_of("query")[0]
    assert field(query, "answer") == "Cannot determine" and len(documents(query)) == 3
    assert prediction.passage_ids == [BOOT.id, FLOWERS.id, TURGUL.id, LUBY.id, BAXTER.id]  # Boot Hill once
    second = stages.prompts_of("answer")[1]
    assert documents(second) == [p.render() for p in (BOOT, FLOWERS, TURGUL, LUBY, BAXTER)]
    assert json.loads(field(second, "suggestions")) == [NEW_REFERENCES, THINK_STEP_BY_STEP]  # no error: the default
    assert len(documents(stages.prompts_of("expert")[1])) == 5  # the monitor reads the grown references too
    first = prediction.rounds[0]
    assert (first["plan"], first["query"], first["added_ids"]) == ("new_query", NEW_QUERY, [LUBY.id, BAXTER.id])
    assert (first["internal"], first["external"]) == (False, False)
    assert prediction.counts["plan.new_query"] == 1 and prediction.counts["plan.reasoning"] == 0
    assert prediction.counts["references"] == 5


@pytest.mark.parametrize(("internal", "external", "suggestion"), [("true", "false", RELY_ON_OWN_KNOWLEDGE),
                                                                  ("false", "true", RELY_ON_REFERENCES)])
def test_conflicting_knowledge_tells_the_cognition_which_source_to_rely_on(internal, external, suggestion):
    prog = program()
    stages = script(prog, internal={"reliable": internal}, external={"sufficient": external})
    prediction = run(prog, stages)
    assert json.loads(field(stages.prompts_of("answer")[1], "suggestions")) == [suggestion, THINK_STEP_BY_STEP]
    assert "support" not in stages.seen
    plan = "only_internal" if internal == "true" else "only_external"
    assert prediction.rounds[0]["plan"] == plan and prediction.counts[f"plan.{plan}"] == 1
    if plan == "only_internal":  # the authors' code fetches new references when only the documents fall short
        assert prog.retriever.calls == [(QUESTION, 3), (NEW_QUERY, 3)] and stages.seen.count("query") == 1
        assert prediction.rounds[0]["added_ids"] == [LUBY.id, BAXTER.id]
    else:
        assert prog.retriever.calls == [(QUESTION, 3)] and "query" not in stages.seen


@pytest.mark.parametrize(("entailed", "suggestion"), [("true", CHECK_FINAL_ANSWER), ("false", MULTI_STEP_REASONING)])
def test_erroneous_reasoning_checks_that_the_reasoning_entails_the_answer(entailed, suggestion):
    prog = program()
    stages = script(prog, internal={"reliable": "true"}, external={"sufficient": "true"},
                    support={"entailed": entailed})
    prediction = run(prog, stages)
    (check,) = stages.prompts_of("support")  # one NLI call: premise the reasoning, hypothesis the answer
    assert (field(check, "premise"), field(check, "hypothesis")) == (REASONING, "Cannot determine")
    assert json.loads(field(stages.prompts_of("answer")[1], "suggestions")) == [suggestion, THINK_STEP_BY_STEP]
    assert prediction.rounds[0]["reasoning_supported"] is (entailed == "true")
    assert prediction.counts["reasoning_unsupported"] == int(entailed == "false")
    assert prediction.counts["plan.reasoning"] == 1 and "query" not in stages.seen


def test_the_critic_reads_the_question_and_answer_and_its_suggestion_replaces_the_default():
    prog = program()
    stages = script(prog, internal={"reliable": "true"}, external={"sufficient": "true"},
                    critic={"error": "answer redundance", "suggestion": "Give only the film's name."})
    prediction = run(prog, stages)
    critic = stages.prompts_of("critic")[0]
    assert field(critic, "answer") == "Cannot determine" and "Boot Hill Bandits is a 1942" not in critic
    assert REASONING not in critic  # the authors' critic sees neither the references nor the reasoning
    assert json.loads(field(stages.prompts_of("answer")[1], "suggestions")) == [CHECK_FINAL_ANSWER,
                                                                               "Give only the film's name."]
    assert prediction.rounds[0]["error"] == "answer redundance" and prediction.counts["error.answer redundance"] == 1


def test_the_loop_never_passes_max_iterations_and_the_monitor_skips_the_last_answer():
    prog = program(max_iterations=2)
    stages = script(prog, expert={"answer": "Say It With Flowers"}, answer={"reasoning": "", "answer": "Boot Hill"},
                    internal={"reliable": "true"}, external={"sufficient": "true"})
    prediction = run(prog, stages)
    assert stages.seen.count("expert") == 2 and stages.seen.count("answer") == 3
    assert stages.seen[-1] == "answer" and len(prediction.rounds) == 2 and prediction.counts["rounds"] == 2
    assert prediction.counts["monitor_passed"] == 0 and prediction.monitor_passed is False
    assert prediction.counts["llm_calls"] == len(stages.seen)
    assert MetaRAG().max_iterations == 3 and MetaRAG().threshold == 0.3 and MetaRAG().k == 5  # the authors' code


def test_the_answer_returned_is_the_newest_approved_or_at_the_cap():
    approved = "the 1942 American Western film directed by S. Roy Luby in Hollywood"  # eleven words
    prog = program()
    stages = script(prog, answer=answers("Cannot determine", approved), expert={"answer": approved})
    prediction = run(prog, stages)
    assert prediction.monitor_passed is True and prediction.answer == approved  # the monitor's pass is the output

    prog = program(max_iterations=1)
    stages = script(prog, answer=answers("Boot Hill", "Unknown from these references"),
                    expert={"answer": "Say It With Flowers"})
    prediction = run(prog, stages)
    assert prediction.monitor_passed is False and prediction.answer == "Unknown from these references"  # the newest


def test_each_condition_has_its_plan_and_an_unevaluated_source_agrees_with_the_other():
    assert [condition(True, True), condition(False, False), condition(True, False), condition(False, True)] == [
        "reasoning", "new_query", "only_internal", "only_external"]
    assert [condition(None, False), condition(None, True), condition(False, None), condition(None, None)] == [
        "new_query", "reasoning", "new_query", "reasoning"]


def test_the_table_3_ablations_remove_their_evaluations():
    no_internal = program(internal_knowledge=False)
    assert "internal" not in no_internal.stage_names()
    stages = script(no_internal)
    prediction = run(no_internal, stages)
    assert "internal" not in stages.seen and prediction.rounds[0]["plan"] == "new_query"  # by the documents alone

    no_procedural = program(internal_knowledge=False, external_knowledge=False)
    assert set(no_procedural.stage_names()) == {"answer", "expert", "critic", "support"}  # no query can be planned
    stages = script(no_procedural)
    prediction = run(no_procedural, stages)
    assert prediction.rounds[0]["plan"] == "reasoning" and "support" in stages.seen

    assert "critic" not in program(error_types=()).stage_names()
    two = program(error_types=("incomplete reasoning", "ambiguity understanding"))
    stages = script(two, internal={"reliable": "true"}, external={"sufficient": "true"},
                    critic={"error": "answer redundance", "suggestion": "Shorter."})
    prediction = run(two, stages)
    told = json.loads(field(stages.prompts_of("critic")[0], "error_types"))
    assert told == [f"{name}: {ERROR_TYPES[name]}" for name in ("incomplete reasoning", "ambiguity understanding")]
    assert prediction.rounds[0]["error"] == "none" and "Shorter." not in prediction.rounds[0]["suggestions"]
    with pytest.raises(ValueError, match="error_types"):
        MetaRAG(error_types=("logic error",))
    with pytest.raises(ValueError, match="at least 1"):
        MetaRAG(max_iterations=0)


def test_unparsable_replies_take_their_documented_fallbacks():
    garbled = {"garbled": "no fields"}
    prog = program(max_iterations=1)
    stages = script(prog, expert=garbled, internal=garbled, external=garbled, query=garbled, critic=garbled,
                    answer={"reasoning": REASONING, "answer": "Boot Hill Bandits"})
    prediction = run(prog, stages)
    counts = prediction.counts
    assert prediction.rounds[0]["similarity"] == 0.0 and counts["expert.fallback"] == 1  # no expert: evaluate
    assert prediction.rounds[0]["plan"] == "new_query" and counts["internal.fallback"] == counts[
        "external.fallback"] == 1  # no verdict: insufficient
    assert prog.retriever.calls == [(QUESTION, 3), (QUESTION, 3)] and counts["query.fallback"] == 1  # the question
    assert prediction.rounds[0]["error"] == "none" and counts["critic.fallback"] == 1

    prog = program(max_iterations=1)
    stages = script(prog, internal={"reliable": "true"}, external={"sufficient": "true"}, support=garbled)
    prediction = run(prog, stages)
    assert prediction.rounds[0]["reasoning_supported"] is True and prediction.counts["support.fallback"] == 1


@pytest.mark.parametrize(("reply", "internal", "external"), [
    ("Yes.", True, True),
    ("No.", True, False),  # the internal judgment looks for a lowercase "no" in the reply as written
    ("no", False, False),
    ("Yes, I know the answer.", False, False),  # "know"
    ("Yes, the documents give enough information.", False, False),  # "enough"
    ("Sorry, I couldn't tell.", False, True),
])
def test_the_authors_read_a_judgment_as_negative_on_any_no_in_it(reply, internal, external):
    assert (authors_internal(reply), authors_external(reply)) == (internal, external)


@pytest.mark.parametrize(("reply", "query"), [
    ("Luby's death is missing. The rewrite query is death dates of S. Roy Luby",
     "Luby's death is missing. The rewrite query is"),  # the text up to the phrase, never the query after it
    ("x" * 70 + " The rewrite query is y", "x" * 64),  # then its first 64 characters
    ("  the REWRITE query is: y", "the REWRITE query is"),  # any case
    ("death dates of S. Roy Luby", "death dates of S. Roy Luby"),  # no phrase: the reply
])
def test_the_authors_rewrite_query_is_the_reply_up_to_the_phrase_cut_to_64_characters(reply, query):
    assert authors_rewrite_query(reply) == query


def test_with_the_authors_parsing_the_free_text_replies_are_read_as_their_code_reads_them():
    prog = program(parsing="authors", max_iterations=1)
    assert set(prog.internal.signature.output_fields) == set(prog.external.signature.output_fields) == {"reply"}
    thinking = "The answer lacks when S. Roy Luby died. The rewrite query is " + NEW_QUERY
    stages = script(prog, internal={"reply": "No."}, external={"reply": "Yes, the documents give enough."},
                    query={"reply": thinking})
    prediction = run(prog, stages)
    first = prediction.rounds[0]  # "No." reads as reliable, "enough" as insufficient: only the LLM's own knowledge
    assert (first["internal"], first["external"], first["plan"]) == (True, False, "only_internal")
    searched = "The answer lacks when S. Roy Luby died. The rewrite query is"
    assert first["query"] == searched and prog.retriever.calls == [(QUESTION, 3), (searched, 3)]
    assert "The rewrite query is ..." in stages.prompts_of("query")[0]  # the prompt asks for the phrase

    typed = program(max_iterations=1)  # ours: typed fields, read as the model meant them
    stages = script(typed, internal={"reliable": "false"}, external={"sufficient": "true"})
    first = run(typed, stages).rounds[0]
    assert (first["internal"], first["external"], first["plan"]) == (False, True, "only_external")
    unparsable = program(parsing="authors", max_iterations=1)
    stages = script(unparsable, internal={"garbled": "x"}, external={"garbled": "x"}, query={"reply": NEW_QUERY})
    prediction = run(unparsable, stages)  # an unparsable reply, not its words, takes the fallback: insufficient
    assert prediction.rounds[0]["plan"] == "new_query" and prediction.counts["internal.fallback"] == 1
    assert prediction.rounds[0]["query"] == NEW_QUERY  # a reply without the phrase is searched as it is
    with pytest.raises(ValueError, match="unknown parsing 'loose'"):
        MetaRAG(parsing="loose")


def test_gold_rows_follow_the_annotated_hops(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps([TWO_HOP_MUSIQUE]))
    example = load_dataset(path)[0]
    targets = {}
    for target in gold_targets(MetaRAG(k=4), [example]):
        targets.setdefault(target.stage, []).append(target)
    assert set(targets) == {"answer", "expert", "external", "query", "support"}  # internal, critic: no annotation
    answer = targets["answer"][0]
    assert answer.outputs == {"reasoning": "It is published by Acme Press. It was founded by Ann Lee in 1990.",
                              "answer": "Ann Lee"}
    assert sum(d.startswith(("Journal X:", "Acme Press:")) for d in answer.inputs["documents"]) == 2
    assert targets["expert"][0].outputs == {"answer": "Ann Lee"}
    full, partial = targets["external"]
    assert (full.outputs, partial.outputs) == ({"sufficient": True}, {"sufficient": False})
    assert sum(d.startswith(("Journal X:", "Acme Press:")) for d in partial.inputs["documents"]) == 1
    (query,) = targets["query"]
    assert query.outputs == {"query": "Who founded Acme Press?"} and query.inputs["answer"] == "Acme Press"
    assert [d.split(":")[0] for d in query.inputs["documents"] if not d.startswith("Town")] == ["Journal X"]
    authors = {}
    for target in gold_targets(MetaRAG(k=4, parsing="authors"), [example]):
        authors.setdefault(target.stage, []).append(target.outputs)
    assert authors["external"] == [{"reply": "yes"}, {"reply": "no"}]
    assert authors["query"] == [{"reply": "The rewrite query is Who founded Acme Press?"}]  # the form the prompt asks
    entailed, not_entailed = targets["support"]
    assert entailed.inputs == {"premise": "It is published by Acme Press. It was founded by Ann Lee in 1990.",
                               "hypothesis": "Ann Lee"} and entailed.outputs == {"entailed": True}
    assert not_entailed.inputs["premise"] == "It is published by Acme Press." and not_entailed.outputs == {
        "entailed": False}
