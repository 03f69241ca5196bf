"""HANRAG: the Revelator's routes over ANRAG, its switches, fallbacks and Steps, the Revelator's gold
training rows, on scripted LMs and a real BM25 index over App. F's documents."""

import threading

import dspy
import pytest

from multihop.data.corpus import Corpus, Passage
from multihop.evaluation.metrics import accuracy
from multihop.optimize.gold_targets import gold_targets
from multihop.programs import HANRAG, load, save
from multihop.programs.hanrag import gold_route, with_gold_routes
from multihop.programs.hanrag.routes import render_steps, step_count
from multihop.retrievers import BM25Retriever

from helpers import StageScript, field

DOCS = [
    Passage.make("Danish Football Union", "The Danish Football Union is a member of FIFA and UEFA."),
    Passage.make("FIFA", "FIFA stands for the International Federation of Association Football."),
    Passage.make("Lionel Cranfield, 3rd Earl of Middlesex", "Lionel Cranfield succeeded his brother James as Earl "
                 "of Middlesex in 1651. He married Rachael."),
    Passage.make("UEFA", "UEFA is the Union of European Football Associations."),
    Passage.make("Harold Godwinson", "Harold II was married to Edith Swan-neck."),
    Passage.make("Pargeter", "Edith Mary Pargeter wrote novels."),
]
COMPLEX_Q = "What is the Danish Football Union an instance of?"
COMPOUND_Q = ("When did Lionel Cranfield, 3rd Earl of Middlesex succeed his brother James as Earl of Middlesex and "
              "who is his wife?")


class CountingRetriever(BM25Retriever):
    def search(self, queries, k):
        self.asked = [*getattr(self, "asked", []), *((q, k) for q in queries)]
        return super().search(queries, k)


def program(**switches) -> HANRAG:
    return HANRAG(retriever=CountingRetriever(Corpus(DOCS)), k=3, **switches)


def seeds(*questions: str):
    """A refiner writing ``questions`` in turn."""
    replies = iter(questions)
    return lambda prompt: {"seed_question": next(replies)}


def ending_after(steps: int):
    """An ending discriminator that says the question is settled once ``steps`` seed answers are in its Thought."""
    return lambda prompt: {"finished": str(f"**answer-{steps}**" in field(prompt, "thought")).lower()}


def script(prog, **replies) -> StageScript:
    defaults = {"router": {"route": "complex question"}, "direct_answer": {"answer": "George Washington"},
                "decompose": {"thought": "two parts", "sub_questions": '["When did he succeed?", "Who is his wife?"]'},
                "aggregate": {"answer": "1651 && Rachael"},
                "refine": seeds("What is the Danish Football Union an instance of?", "What does the FIFA stand for?"),
                "ending": ending_after(2),
                "relevance": lambda p: {"relevant": str("FIFA stands" in field(p, "document")).lower()},
                "answer": lambda p: {"answer": "FIFA" if "Danish" in field(p, "question") else "International "
                                     "Federation of Association Football"}}
    return StageScript({**defaults, **replies}, prog)


def run(prog, stages, question=COMPLEX_Q, **inputs):
    with dspy.context(lm=stages.lm):
        return prog(question=question, **inputs)


def test_the_complex_route_refines_seeds_until_the_ending_judge_stops_and_answers_with_the_last_seed():
    prog = program()
    stages = script(prog)
    prediction = run(prog, stages)
    assert prediction.route == "complex" and prediction.steps == 2 and prediction.counts["steps"] == 2
    assert [h["query"] for h in prediction.hops] == [COMPLEX_Q, "What does the FIFA stand for?"]
    assert prediction.answer == "International Federation of Association Football"  # Eq. 9: the last seed's answer
    assert stages.seen == ["router"] + [stage for hop in prediction.hops for stage in (
        "refine", *["relevance"] * len(hop["retrieved_ids"]), "answer", "ending")]
    assert prog.retriever.asked == [(COMPLEX_Q, 3), ("What does the FIFA stand for?", 3)]
    second = stages.engine.requests[stages.seen.index("refine", 2)]  # the second seed sees the first with its answer
    assert field(second, "thought") == render_steps([(COMPLEX_Q, "FIFA")])
    assert prediction.counts["route.complex"] == 1 and prediction.counts["llm_calls"] == len(stages.seen)


def test_the_complex_loop_never_passes_max_steps():
    prog = program(max_steps=3)
    stages = script(prog, refine=lambda p: {"seed_question": "What is FIFA?"}, ending={"finished": "false"})
    prediction = run(prog, stages)
    assert prediction.steps == 3 and stages.seen.count("refine") == 3
    assert stages.seen.count("ending") == 2  # no judgement after the last allowed step: it could change nothing
    assert len(prog.retriever.asked) == 3 and prediction.counts["seed_repeats"] == 2


def test_the_relevance_judge_keeps_only_relevant_passages_and_all_rejected_answers_from_the_best_one():
    prog = program(route="single-step")
    stages = script(prog)
    prediction = run(prog, stages)
    hop = prediction.hops[0]
    assert set(hop["kept_ids"]) == {DOCS[1].id} and len(hop["retrieved_ids"]) == 3
    assert set(hop["rejected_ids"]) == set(hop["retrieved_ids"]) - {DOCS[1].id} and prediction.passage_ids == \
        hop["kept_ids"]
    answer_prompt = stages.engine.requests[stages.seen.index("answer")]
    assert "stands for" in field(answer_prompt, "documents") and "UEFA is" not in field(answer_prompt, "documents")
    none = script(prog, relevance={"relevant": "false"})
    rejected = run(prog, none, question="Who founded UEFA?")
    hop = rejected.hops[0]
    assert hop["kept_ids"] == [] and hop["rejected_ids"] == hop["retrieved_ids"] and hop["all_rejected"]
    assert hop["read_ids"] == hop["retrieved_ids"][:1] == rejected.passage_ids and rejected.counts["all_rejected"] == 1
    best = next(d for d in DOCS if d.id == hop["read_ids"][0])  # the generator read the best-ranked passage alone
    assert field(none.engine.requests[none.seen.index("answer")], "documents") == f'["{best.render()}"]'


def test_each_route_takes_its_path_and_only_its_path():
    prog = program()
    for route, calls, steps in [("straightforward", ["router", "direct_answer"], 0),
                                ("single-step", ["router", "relevance", "relevance", "relevance", "answer"], 1)]:
        stages = script(prog, router={"route": f"{route} question"})
        prog.retriever.asked = []
        prediction = run(prog, stages)
        assert (stages.seen, prediction.steps, prediction.route) == (calls, steps, route)
        assert len(prog.retriever.asked) == steps
    stages = script(prog, router={"route": "compound question"}, relevance={"relevant": "true"})
    prediction = run(prog, stages, question=COMPOUND_Q)
    assert prediction.route == "compound" and prediction.steps == 1  # both sub-questions are one step (App. C, F)
    assert prediction.sub_questions == ["When did he succeed?", "Who is his wife?"]
    retrieved = sum(len(h["retrieved_ids"]) for h in prediction.hops)
    assert sorted(stages.seen) == sorted(["router", "decompose", "aggregate"] + ["relevance"] * retrieved
                                         + ["answer"] * 2)
    assert stages.seen[:2] == ["router", "decompose"] and stages.seen[-1] == "aggregate"
    assert prediction.answer == "1651 && Rachael"


def test_compound_sub_questions_run_concurrently_and_are_aggregated_in_order():
    prog = program(route="compound", relevance_filter=False)
    both_waiting = threading.Barrier(2, timeout=10)  # each sub-answer waits for the other: only concurrency finishes

    def answer(prompt):
        both_waiting.wait()
        return {"answer": "1651" if "succeed" in field(prompt, "question") else "Rachael"}

    stages = script(prog, answer=answer, aggregate=lambda p: {"answer": " && ".join(eval(field(p, "sub_answers")))})
    prediction = run(prog, stages, question=COMPOUND_Q)
    assert [h["answer"] for h in prediction.hops] == ["1651", "Rachael"] and prediction.answer == "1651 && Rachael"
    assert prediction.counts["llm_calls"] == 4 and prediction.counts["retrieval_calls"] == 2  # traced from threads


def test_a_sub_question_that_raises_ends_the_question_with_its_own_error():
    prog = program(route="compound", relevance_filter=False)

    def answer(prompt):
        if "wife" in field(prompt, "question"):
            raise ConnectionError("endpoint down")
        return {"answer": "1651"}

    with pytest.raises(Exception, match="endpoint down"):
        run(prog, script(prog, answer=answer), question=COMPOUND_Q)


def test_switches_change_the_calls_they_should():
    no_filter = program(relevance_filter=False)
    stages = script(no_filter)
    prediction = run(no_filter, stages)
    assert "relevance" not in stages.seen and "relevance" not in no_filter.stage_names()
    assert prediction.hops[0]["kept_ids"] == prediction.hops[0]["retrieved_ids"]
    no_ending = program(ending_judge=False, max_steps=4)
    stages = script(no_ending, refine=lambda p: {"seed_question": "What does the FIFA stand for?"})
    assert run(no_ending, stages).steps == 4 and "ending" not in stages.seen  # runs to the step limit
    no_refiner = program(refiner=False)
    stages = script(no_refiner, ending=ending_after(3))
    prediction = run(no_refiner, stages)
    assert [h["query"] for h in prediction.hops] == [COMPLEX_Q] * 3 and "refine" not in stages.seen
    fixed = program(route="single-step")
    assert fixed.stage_names() == ["relevance", "answer"]
    assert program(route="straightforward").stage_names() == ["direct_answer"]
    assert set(program().stage_names()) == {"router", "direct_answer", "decompose", "aggregate", "refine", "ending",
                                            "relevance", "answer"}
    assert all(p.demos for p in program().predictors() if p.signature.__name__ != "DirectAnswer")
    assert not any(p.demos for p in program(paper_demos=False).predictors())


def test_the_oracle_route_follows_each_questions_gold_route():
    prog = program(route="oracle")
    assert "router" not in prog.stage_names()
    example = dspy.Example(question=COMPLEX_Q, type="comparison", hops=2).with_inputs("question")
    routed = with_gold_routes([example])[0]
    assert routed.inputs().toDict() == {"question": COMPLEX_Q, "gold_route": "compound"}
    assert [gold_route(e) for e in (MUSIQUE, WIKI, COMPARISON, dspy.Example(question="q", type="bridge_comparison",
                                                                            hops=4),
                                    dspy.Example(question="q", hops=0), dspy.Example(question="q", hops=1),
                                    dspy.Example(question="q", route="straightforward", hops=2))] == [
        "complex", "complex", "compound", "compound", "single-step", "single-step", "straightforward"]
    stages = script(prog)
    assert run(prog, stages, **routed.inputs().toDict()).route == "compound" and "router" not in stages.seen
    with pytest.raises(ValueError, match="gold_route"):
        run(prog, stages)


def test_the_router_answers_with_the_papers_labels():
    prog = program()
    for label, route in [("single-step question", "single-step"), ("complex question", "complex")]:
        prediction = run(prog, script(prog, router={"route": label}, relevance={"relevant": "true"}))
        assert prediction.route == route and prediction.counts["router.fallback"] == 0
    assert [d.route for d in prog.router.demos][:4] == ["straightforward question", "single-step question",
                                                        "compound question", "complex question"]


def test_malformed_outputs_take_their_documented_fallbacks_and_are_counted():
    prog = program()
    stages = script(prog, router={"route": "a hard one"}, refine={"nothing": "x"}, relevance={"relevant": "maybe"},
                    ending={"finished": "perhaps"}, answer={"answer": "FIFA"})
    prediction = run(prog, stages)
    counts = prediction.counts
    assert prediction.route == "complex" and counts["router.fallback"] == 1  # unparsable route → complex
    assert [h["query"] for h in prediction.hops] == [COMPLEX_Q] * 5  # no seed → the question; no verdict → go on
    assert counts["refine.fallback"] == 5 and counts["ending.fallback"] == 4 and counts["relevance.fallback"] == 15
    assert all(h["kept_ids"] == h["retrieved_ids"] for h in prediction.hops)  # no verdict keeps the passage
    compound = program(route="compound")
    stages = script(compound, decompose={"thought": "?"}, relevance={"relevant": "true"}, aggregate={"x": "y"},
                    answer={"nothing": "x"})
    prediction = run(compound, stages, question=COMPOUND_Q)
    assert prediction.sub_questions == [COMPOUND_Q] and prediction.counts["decompose.fallback"] == 1
    assert prediction.answer == prediction.hops[0]["answer"] == "" and prediction.counts["aggregate.fallback"] == 1
    assert prediction.counts["answer.fallback"] == 1
    empty = script(compound, decompose={"thought": "t", "sub_questions": '["1. When?", "none", "2. Who?"]'},
                   relevance={"relevant": "true"}, answer={"answer": "x"}, aggregate={"answer": ""})
    prediction = run(compound, empty, question=COMPOUND_Q)
    assert prediction.sub_questions == ["When?", "Who?"]  # numbering and "none" cleaned off
    assert prediction.answer == "x && x" and prediction.counts["aggregate_empty"] == 1  # empty aggregate → joined


def test_steps_count_as_the_paper_counts_them():
    assert [step_count(r, 3) for r in ("straightforward", "single-step", "compound", "complex")] == [0, 1, 1, 3]
    assert render_steps([]) == "nothing"
    assert render_steps([("q1", "a1"), ("q2", "a2")]) == \
        "**seed query-1**: q1\n**answer-1**: a1\n**seed query-2**: q2\n**answer-2**: a2"


def test_compound_accuracy_counts_the_share_of_the_gold_parts_in_the_prediction():
    assert accuracy("1651 && Rachael", "1651 && Rachael") == 1.0
    assert accuracy("It was 1651.", "1651 && Rachael") == 0.5
    assert accuracy("Rachael", ["1651 && Rachael", "Rachael"]) == 1.0
    assert accuracy("nothing", "1651 && Rachael") == 0.0


def test_switches_are_checked_and_saved(tmp_path):
    with pytest.raises(ValueError, match="unknown route"):
        HANRAG(route="simple")
    with pytest.raises(ValueError, match="at least 1"):
        HANRAG(max_steps=0)
    prog = program(route="complex", ending_judge=False, max_steps=3)
    prog.refine.demos = prog.refine.demos[:1]
    save(prog, tmp_path / "p")
    loaded = load(tmp_path / "p", retriever=prog.retriever)
    assert loaded.config() == prog.config() and len(loaded.refine.demos) == 1


def test_compile_with_bootstrap_few_shot_reaches_every_stage_of_the_route():
    prog = program(paper_demos=False)
    stages = script(prog)
    trainset = [dspy.Example(question=COMPLEX_Q, answer="International Federation of Association Football")
                .with_inputs("question")]
    with dspy.context(lm=stages.lm):
        compiled = dspy.BootstrapFewShot(metric=lambda e, p, trace=None: e.answer == p.answer,
                                         max_bootstrapped_demos=1, max_labeled_demos=0).compile(prog,
                                                                                                trainset=trainset)
    demos = {name: len(p.demos) for name, p in compiled.named_predictors()}
    assert demos == {"router": 1, "direct_answer": 0, "decompose": 0, "aggregate": 0, "refine": 1, "ending": 1,
                     "relevance": 1, "answer": 1}


WIKI = dspy.Example(
    id="w1", question="Where was the director of film Pearls And Pigs born?", answer="Joensuu", type="compositional",
    decomposition=["Who is the director of the film Pearls And Pigs?", "Where was Perttu Leppä born?"],
    evidences=[["Pearls and Pigs", "director", "Perttu Leppä"], ["Perttu Leppä", "place of birth", "Joensuu"]],
    supporting_sentences=[], hops=2, paragraphs=[
        {"id": "p1", "title": "Pearls and Pigs", "text": "Pearls and Pigs is a film directed by Perttu Leppä.",
         "is_supporting": True},
        {"id": "p2", "title": "Perttu Leppä", "text": "Perttu Leppä was born in Joensuu.", "is_supporting": True},
        {"id": "p3", "title": "Other", "text": "Other is a town.", "is_supporting": False},
        {"id": "p4", "title": "Else", "text": "Else is a river.", "is_supporting": False}]).with_inputs("question")
COMPARISON = dspy.Example(
    id="w2", question="Which film came out first, Kiss or Kill?", answer="Kiss", type="comparison", hops=2,
    decomposition=["When did Kiss come out?", "When did Kill come out?"],
    evidences=[["Kiss", "publication date", "1950"], ["Kill", "publication date", "1960"]], supporting_sentences=[],
    paragraphs=[{"id": "k1", "title": "Kiss", "text": "Kiss is a 1950 film.", "is_supporting": True},
                {"id": "k2", "title": "Kill", "text": "Kill is a 1960 film.", "is_supporting": True},
                {"id": "k3", "title": "Kin", "text": "Kin is a band.", "is_supporting": False}]).with_inputs("question")


def test_the_revelator_rows_label_routes_refine_and_end_chains_and_pair_passages_with_hops():
    targets = {}
    for target in gold_targets(HANRAG(), [WIKI, COMPARISON, MUSIQUE, BRIDGE_COMPARISON]):
        targets.setdefault((target.example.id, target.stage), []).append((target.inputs, target.outputs))
    router = targets[("w1", "router")]
    assert router[0] == ({"question": WIKI.question}, {"route": "complex question"})
    assert router[1][1] == {"route": "single-step question"} and router[1][0]["question"] in WIKI.decomposition
    refine = targets[("w1", "refine")]
    assert [(r[0]["thought"], r[1]["seed_question"]) for r in refine[:2]] == [
        ("nothing", WIKI.decomposition[0]),
        (render_steps([(WIKI.decomposition[0], "Perttu Leppä")]), WIKI.decomposition[1])]
    assert refine[2][0]["thought"] == "nothing" and refine[2][1]["seed_question"] == refine[2][0]["question"]
    assert [r[1]["finished"] for r in targets[("w1", "ending")]] == [False, True]
    relevance = targets[("w1", "relevance")]
    assert [r[1]["relevant"] for r in relevance] == [True, True, False, False]
    assert relevance[0][0] == {"question": WIKI.decomposition[0],
                               "document": "Pearls and Pigs: Pearls and Pigs is a film directed by Perttu Leppä."}
    assert relevance[1][0]["document"] == "Perttu Leppä: Perttu Leppä was born in Joensuu."
    assert {r[0]["document"].split(":")[0] for r in relevance[2:]} == {"Other", "Else"}  # one distractor per hop
    assert targets[("w2", "router")][0][1] == {"route": "compound question"}
    decompose = targets[("w2", "decompose")]
    assert decompose[0][1]["sub_questions"] == COMPARISON.decomposition
    assert decompose[1][1]["sub_questions"] == [decompose[1][0]["question"]]  # Rule 2: a lone hop is itself
    assert ("w2", "ending") not in targets and [r[1]["sub_questions"] for r in targets[("w1", "decompose")]] == [
        [targets[("w1", "decompose")][0][0]["question"]]]  # a chain is no comparison: only the lone-hop row
    # MuSiQue: "#1" replaced by the first answer and "E >> relation" asked as a question
    assert [r[1]["seed_question"] for r in targets[("m1", "refine")][:2]] == [
        "Who directed Frozen Lake?", "What is the country of Karl Berg?"]
    assert targets[("m1", "router")][1][0]["question"] in ("Who directed Frozen Lake?",
                                                          "What is the country of Karl Berg?")
    # a bridge comparison is compound and its chain (ending on a date, not the answer) teaches no seed loop
    assert targets[("b1", "router")][0][1] == {"route": "compound question"}
    assert ("b1", "refine") not in targets or all(r[0]["thought"] == "nothing" for r in targets[("b1", "refine")])
    assert ("b1", "ending") not in targets
    assert not any(stage in ("answer", "aggregate", "direct_answer") for _, stage in targets)


MUSIQUE = dspy.Example(
    id="m1", question="In which country was the director of Frozen Lake born?", answer="Norway", answers=["Norway"],
    decomposition=["Who directed Frozen Lake?", "#1 >> country"], decomposition_answers=["Karl Berg", "Norway"],
    decomposition_support=["f1", "f2"], hops=2, paragraphs=[
        {"id": "f1", "title": "Frozen Lake", "text": "Frozen Lake was directed by Karl Berg.", "is_supporting": True},
        {"id": "f2", "title": "Karl Berg", "text": "Karl Berg is from Norway.", "is_supporting": True},
        {"id": "f3", "title": "Oslo", "text": "Oslo is a city.", "is_supporting": False}]).with_inputs("question")
BRIDGE_COMPARISON = dspy.Example(
    id="b1", question="Which film has the director died first, Kiss or Kill?", answer="Kiss", type="bridge_comparison",
    hops=4, decomposition=["Who is the director of Kiss?", "Who is the director of Kill?", "When did Ann die?",
                           "When did Bo die?"],
    evidences=[["Kiss", "director", "Ann"], ["Kill", "director", "Bo"], ["Ann", "date of death", "1950"],
               ["Bo", "date of death", "1960"]], supporting_sentences=[], paragraphs=[
        {"id": "b1p1", "title": "Kiss", "text": "Kiss is a film by Ann.", "is_supporting": True},
        {"id": "b1p2", "title": "Kill", "text": "Kill is a film by Bo.", "is_supporting": True},
        {"id": "b1p3", "title": "Ann", "text": "Ann died in 1950.", "is_supporting": True},
        {"id": "b1p4", "title": "Bo", "text": "Bo died in 1960.", "is_supporting": True}]).with_inputs("question")


@pytest.mark.slow
def test_smollm2_routes_and_answers_a_real_question_over_bm25(musique_dev):
    from multihop.data.loaders import build_corpus
    from multihop.lm.backends import configure_lm

    configure_lm("local:smollm2", max_tokens=48)
    prog = HANRAG(retriever=BM25Retriever(build_corpus(musique_dev[:5])), k=3, max_steps=2)
    prediction = prog(question=musique_dev[0].question)
    lm_stages = [r["stage"] for r in prediction.stage_trace if r["kind"] == "lm"]
    assert lm_stages[0] == "router" and prediction.counts["llm_calls"] == len(lm_stages)
    assert prediction.route in ("straightforward", "single-step", "compound", "complex")
    assert prediction.steps == {"straightforward": 0, "complex": len(prediction.hops)}.get(prediction.route, 1)
    assert prediction.steps <= 2 and lm_stages.count("answer") == len(prediction.hops)
    assert lm_stages.count("relevance") == sum(len(h["retrieved_ids"]) for h in prediction.hops)
    assert set(prediction.passage_ids) <= set(prediction.retrieved_ids)


def test_evaluation_reads_the_gold_routes_hanrag_oracle_follows(tmp_path):
    from multihop.evaluation.runner import evaluate

    prog = program(route="oracle")
    comparison = dspy.Example(id="c1", question=COMPOUND_Q, answer="1651 && Rachael", answers=["1651 && Rachael"],
                              type="comparison", hops=2).with_inputs("question")
    stages = script(prog, relevance={"relevant": "true"})
    with dspy.context(lm=stages.lm):
        summary = evaluate(prog, [comparison], tmp_path / "oracle", progress=False)
    assert summary["errors"] == 0 and summary["acc"] == 1.0 and summary["steps"] == 1.0
    assert "decompose" in stages.seen and "router" not in stages.seen


def test_revelator_data_writes_every_datasets_rows_in_the_revelators_format_and_refuses_dev_questions(tmp_path):
    import json

    from typer.testing import CliRunner

    from multihop.cli import app

    from helpers import data_root

    runner = CliRunner()
    root = data_root()
    built = runner.invoke(app, ["hanrag", "revelator-data", "--data", "musique", "--data", "hotpotqa", "--limit", "2",
                                "--out", str(tmp_path / "rows")])
    assert built.exit_code == 0, built.output
    assert sorted(p.name for p in (tmp_path / "rows").iterdir()) == ["hotpotqa", "musique"]
    musique = {p.stem for p in (tmp_path / "rows" / "musique").glob("*.jsonl")}
    assert musique == {"router", "decompose", "refine", "ending", "relevance"}
    rows = [json.loads(line) for line in (tmp_path / "rows" / "musique" / "router.jsonl").read_text().splitlines()]
    assert rows[0]["adapter"] == "JSONAdapter" and rows[0]["outputs"] == {"route": "complex question"}
    assert any("Pan Jianwei" in m["content"] for m in rows[0]["messages"])  # the App. G demos are in the prompt
    dev = runner.invoke(app, ["hanrag", "revelator-data", "--data", str(root / "musique/dev/musique_qa_100.json"),
                              "--out", str(tmp_path / "dev")])
    assert dev.exit_code != 0 and not (tmp_path / "dev" / "musique_qa_100" / "router.jsonl").exists()
