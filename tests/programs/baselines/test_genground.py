"""GenGround: deduction and grounding alternate until the final answer, each sub-question's exact text is
its retrieval query, the authors' batch grounding by default (every batch a ``cite`` call seeing the sub-question and
the batch alone, the document it cites kept, no early stop, one revision over what is left), the paper's first-cited
batches as a switch (each batch a revision, the first cited one ends it, the immediate answer the backup), the
iteration cap, the Table 4 ablations, the fallbacks and the gold rows, on scripted LMs."""

import json

import dspy
import pytest

from multihop.data.corpus import Passage
from multihop.data.loaders import load_dataset
from multihop.optimize.gold_targets import gold_targets
from multihop.programs import GenGround
from multihop.programs.baselines.genground import cited_index, render_round
from multihop.programs.baselines.genground.program import Round

from helpers import TWO_HOP_MUSIQUE, KeyedRetriever, StageScript, field

QUESTION = 'Who wrote "Turn Me On" by the performer of "Happy Pills"?'
FIRST, SECOND = 'Who is the performer of "Happy Pills"?', 'Who wrote "Turn Me On" performed by Norah Jones?'
HAPPY = Passage.make("Happy Pills", "Happy Pills is a song performed by Norah Jones.")
TURN = Passage.make("Turn Me On", "Turn Me On is a song written by John D. Loudermilk.")
NOISE = [Passage.make(f"Town {c}", f"Town {c} is a town in a valley.") for c in "ABCDEF"]
EVIDENCE = {HAPPY.id: "Happy Pills is a song performed by Norah Jones.",
            TURN.id: "Turn Me On is a song written by John D. Loudermilk."}


def program(**switches) -> GenGround:
    retriever = KeyedRetriever({FIRST: [NOISE[0], NOISE[1], HAPPY, NOISE[2], NOISE[3]],
                                SECOND: [TURN, *NOISE[:4]], QUESTION: [NOISE[4], TURN, HAPPY, *NOISE[:2]]}, NOISE)
    return GenGround(retriever=retriever, k=5, batch_size=2, **switches)


def deductions(*sub_questions: str, final: str = "John D. Loudermilk"):
    """A deduction asking ``sub_questions`` in turn (by the rounds it has read), then finishing with ``final``."""
    def deduce(prompt):
        done = len(json.loads(field(prompt, "steps")))
        if done < len(sub_questions):
            return {"finished": "false", "sub_question": sub_questions[done], "final_answer": ""}
        return {"finished": "true", "sub_question": "", "final_answer": final}
    return deduce


def grounding(prompt):
    """Cites the document of the batch that answers, and revises to its answer; else the "Empty" signal."""
    shown = "\n".join(json.loads(field(prompt, "documents")))
    for pid, sentence in EVIDENCE.items():
        if sentence in shown:
            return {"evidence": sentence, "revised_answer": "Norah Jones" if pid == HAPPY.id else "John D. Loudermilk"}
    return {"evidence": "Empty", "revised_answer": ""}


def citing(prompt):
    """The authors' batch grounding: the document of the batch that answers, cited, else "Empty"."""
    return {"evidence": grounding(prompt)["evidence"]}


def script(prog, **replies) -> StageScript:
    defaults = {"deduce": deductions(FIRST, SECOND), "ground": grounding, "cite": citing,
                "answer": lambda p: {"answer": "Norah Jones" if "Happy" in field(p, "sub_question") else "Ben Affleck"}}
    return StageScript({**defaults, **replies}, prog)


def run(prog, stages, question=QUESTION):
    with dspy.context(lm=stages.lm):
        return prog(question=question)


def test_deduction_and_grounding_alternate_until_the_final_answer():
    prog = program()  # the authors' batch grounding: k=5 documents, batches of 2
    assert prog.batch_revision == "filtered" and prog.stage_names() == ["deduce", "answer", "cite", "ground"]
    stages = script(prog)
    prediction = run(prog, stages)
    assert prediction.answer == "John D. Loudermilk"
    assert stages.seen == ["deduce", "answer", "cite", "cite", "ground", "deduce", "answer", "cite", "cite", "ground",
                           "deduce"]
    assert prog.retriever.calls == [(FIRST, 5), (SECOND, 5)]  # each sub-question's text, verbatim
    cites = stages.prompts_of("cite")
    # round 1, queue [N0, N1, Happy, N2, N3]: (N0, N1) "Empty", (Happy, N2) keeps Happy, [N3, Happy] is revised over;
    # round 2, queue [Turn, N0, N1, N2, N3]: (Turn, N0) keeps Turn, (N1, N2) "Empty", [N3, Turn] is revised over
    assert [json.loads(field(p, "documents")) for p in cites] == [
        [NOISE[0].render(), NOISE[1].render()], [HAPPY.render(), NOISE[2].render()],
        [TURN.render(), NOISE[0].render()], [NOISE[1].render(), NOISE[2].render()]]
    for prompt, sub_question in zip(cites, [FIRST, FIRST, SECOND, SECOND], strict=True):
        # a batch sees the sub-question and its documents: no candidate answer, no complex question
        assert field(prompt, "sub_question") == sub_question and QUESTION not in prompt
        assert "## answer ##" not in prompt and "Ben Affleck" not in prompt
    revisions = stages.prompts_of("ground")
    assert [json.loads(field(p, "documents")) for p in revisions] == [[NOISE[3].render(), HAPPY.render()],
                                                                      [NOISE[3].render(), TURN.render()]]
    assert [(field(p, "sub_question"), field(p, "answer")) for p in revisions] == [(FIRST, "Norah Jones"),
                                                                                   (SECOND, "Ben Affleck")]
    assert all(QUESTION not in p for p in revisions)  # the revision sees the candidate answer, not the question
    first, second = prediction.rounds
    assert (first["immediate_answer"], first["answer"], first["cited_id"], first["batches"]) == (
        "Norah Jones", "Norah Jones", HAPPY.id, 3)  # every batch read: no early stop
    assert first["read_ids"] == [NOISE[0].id, NOISE[1].id, HAPPY.id, NOISE[2].id, NOISE[3].id]
    assert (second["immediate_answer"], second["answer"], second["batches"]) == ("Ben Affleck", "John D. Loudermilk", 3)
    steps = json.loads(field(stages.prompts_of("deduce")[1], "steps"))
    assert steps == [render_round(1, Round(FIRST, "Norah Jones", "Norah Jones", EVIDENCE[HAPPY.id]))]
    assert steps[0] == f"Sub-question 1: {FIRST} Answer 1: Norah Jones Evidence: {EVIDENCE[HAPPY.id]}"
    assert json.loads(field(stages.prompts_of("answer")[1], "steps")) == steps  # the immediate answer reads them too
    assert prediction.passage_ids == [NOISE[0].id, NOISE[1].id, HAPPY.id, NOISE[2].id, NOISE[3].id, TURN.id]
    counts = prediction.counts
    assert [counts[name] for name in ("sub_questions", "grounding_batches", "ungrounded", "revised")] == [2, 6, 0, 1]
    assert counts["iteration_cap"] == 0 and counts["llm_calls"] == len(stages.seen)


def test_the_papers_first_cited_batches_stop_at_the_first_cited_batch():
    prog = program(batch_revision="first_cited")
    assert prog.stage_names() == ["deduce", "answer", "ground"]  # no cite stage under this switch
    stages = script(prog)
    prediction = run(prog, stages)
    assert prediction.answer == "John D. Loudermilk"
    assert stages.seen == ["deduce", "answer", "ground", "ground", "deduce", "answer", "ground", "deduce"]
    first, second = prediction.rounds
    assert (first["immediate_answer"], first["answer"], first["cited_id"], first["batches"]) == (
        "Norah Jones", "Norah Jones", HAPPY.id, 2)  # the first batch is "Empty", the second cited: no third
    assert first["read_ids"] == [NOISE[0].id, NOISE[1].id, HAPPY.id, NOISE[2].id]
    assert (second["immediate_answer"], second["answer"], second["batches"]) == ("Ben Affleck", "John D. Loudermilk", 1)
    prompts = stages.prompts_of("ground")
    assert [json.loads(field(p, "documents")) for p in prompts] == [
        [NOISE[0].render(), NOISE[1].render()], [HAPPY.render(), NOISE[2].render()], [TURN.render(), NOISE[0].render()]]
    # each batch grounds the question-answer pair: the sub-question and the immediate answer, never the question
    assert [(field(p, "sub_question"), field(p, "answer")) for p in prompts] == [
        (FIRST, "Norah Jones"), (FIRST, "Norah Jones"), (SECOND, "Ben Affleck")]
    assert all(QUESTION not in p for p in prompts)
    assert prediction.passage_ids == [NOISE[0].id, NOISE[1].id, HAPPY.id, NOISE[2].id, TURN.id]
    counts = prediction.counts
    assert [counts[name] for name in ("sub_questions", "grounding_batches", "ungrounded", "revised")] == [2, 3, 0, 1]


def test_first_cited_with_no_cited_batch_keeps_the_immediate_answer_as_a_backup():
    prog = program(max_iterations=1, batch_revision="first_cited")
    stages = script(prog, ground={"evidence": "Empty", "revised_answer": "Someone else"})
    prediction = run(prog, stages)
    (only,) = prediction.rounds
    assert only["answer"] == only["immediate_answer"] == "Norah Jones" and only["evidence"] == ""
    assert only["batches"] == 3 and only["read_ids"] == only["retrieved_ids"]  # batches of 2, 2 and 1: all shown
    assert prediction.counts["ungrounded"] == 1 and prediction.counts["revised"] == 0
    uncited = script(prog, ground={"evidence": "Nothing of the sort here", "revised_answer": "Someone else"})
    prediction = run(prog, uncited)
    assert prediction.rounds[0]["answer"] == "Norah Jones" and prediction.counts["uncited_evidence"] == 3


def test_a_citation_is_tied_to_the_document_it_quotes():
    batch = [NOISE[0].render(), HAPPY.render()]
    assert cited_index("Happy Pills is a song performed by Norah Jones.", batch) == 1
    assert cited_index("Empty", batch) is None and cited_index("", batch) is None
    assert cited_index("insufficient information.", batch) is None and cited_index("Zzz qqq", batch) is None


def test_the_loop_stops_at_max_iterations_and_at_a_repeated_sub_question():
    prog = program(max_iterations=3)
    stages = script(prog, deduce=deductions("q1?", "q2?", "q3?", "q4?"))
    prediction = run(prog, stages)
    assert [r["sub_question"] for r in prediction.rounds] == ["q1?", "q2?", "q3?"]
    assert stages.seen.count("deduce") == 3 and prediction.counts["iteration_cap"] == 1  # no deduction after the cap
    assert prediction.answer == prediction.rounds[-1]["answer"] == "Ben Affleck"  # the last revised answer
    assert [query for query, _ in prog.retriever.calls] == ["q1?", "q2?", "q3?"]

    prog = program()
    stages = script(prog, deduce=deductions(FIRST, FIRST))
    prediction = run(prog, stages)
    assert len(prediction.rounds) == 1 and stages.seen.count("deduce") == 2
    assert prediction.counts["repeated_sub_question"] == 1 and prediction.counts["iteration_cap"] == 0
    assert prediction.answer == "Norah Jones"


def test_without_deduction_the_question_is_answered_directly_and_grounded_once():
    prog = program(deduction=False)
    assert prog.stage_names() == ["answer", "cite", "ground"]
    stages = script(prog, answer={"answer": "Ben Affleck"})
    prediction = run(prog, stages)
    assert prog.retriever.calls == [(QUESTION, 5)] and stages.seen == ["answer", "cite", "cite", "cite", "ground"]
    assert field(stages.prompts_of("answer")[0], "sub_question") == QUESTION
    assert field(stages.prompts_of("ground")[0], "sub_question") == QUESTION  # the question is the sub-question
    assert prediction.answer == "Norah Jones" and prediction.counts["iteration_cap"] == 0  # the script's revision


def test_without_grounding_each_sub_question_is_read_from_its_documents():
    prog = program(grounding=False)
    assert prog.stage_names() == ["deduce", "answer"] and prog.answer.signature.__name__ == "ReadAnswer"
    stages = script(prog, answer=lambda p: {"answer": "Norah Jones" if "Happy" in field(p, "documents") else "X"})
    prediction = run(prog, stages)
    assert stages.seen == ["deduce", "answer", "deduce", "answer", "deduce"]
    assert json.loads(field(stages.prompts_of("answer")[0], "documents")) == [
        p.render() for p in (NOISE[0], NOISE[1], HAPPY, NOISE[2], NOISE[3])]  # all k documents at once
    assert [r["answer"] for r in prediction.rounds] == ["Norah Jones", "X"]
    assert prediction.rounds[0]["read_ids"] == prediction.rounds[0]["retrieved_ids"]
    assert prediction.counts["grounding_batches"] == 0


def test_without_batch_grounding_all_documents_go_to_one_grounding_call():
    prog = program(batch_grounding=False)
    assert prog.stage_names() == ["deduce", "answer", "ground"]  # no batch is drawn: no cite stage
    stages = script(prog)
    prediction = run(prog, stages)
    assert stages.seen.count("ground") == 2 and [r["batches"] for r in prediction.rounds] == [1, 1]
    assert len(json.loads(field(stages.prompts_of("ground")[0], "documents"))) == 5
    assert prediction.answer == "John D. Loudermilk"


def test_the_codes_filtered_revision_grounds_every_batch_then_revises_over_the_cited_documents():
    prog = GenGround(retriever=program().retriever, k=5, batch_size=2, deduction=False, batch_revision="filtered")
    stages = script(prog, answer={"answer": "Ben Affleck"})
    prediction = run(prog, stages)
    assert stages.seen == ["answer", "cite", "cite", "cite", "ground"]  # the batches filter, one revision
    shown = [json.loads(field(p, "documents")) for p in stages.prompts_of("cite") + stages.prompts_of("ground")]
    # queue [N4, Turn, Happy, N0, N1]: (N4, Turn) keeps Turn, (Happy, N0) keeps Happy, then [N1, Turn, Happy] > 2:
    # (N1, Turn) keeps Turn, leaving [Happy, Turn] for the one revision
    assert shown == [[NOISE[4].render(), TURN.render()], [HAPPY.render(), NOISE[0].render()],
                     [NOISE[1].render(), TURN.render()], [HAPPY.render(), TURN.render()]]
    (only,) = prediction.rounds
    assert only["batches"] == 4 and only["answer"] == "Norah Jones" and only["cited_id"] == HAPPY.id
    assert only["read_ids"] == [NOISE[4].id, TURN.id, HAPPY.id, NOISE[0].id, NOISE[1].id]  # each once
    assert prediction.counts["grounding_batches"] == 4 and prediction.counts["revised"] == 1

    empty = {"evidence": "Empty", "revised_answer": "Other"}
    prog = GenGround(retriever=program().retriever, k=5, batch_size=2, deduction=False, batch_revision="filtered")
    stages = script(prog, answer={"answer": "Ben Affleck"}, ground=empty, cite={"evidence": "Empty"})
    prediction = run(prog, stages)  # as in the code, the last uncited document left in the queue is revised over
    assert json.loads(field(stages.prompts_of("ground")[-1], "documents")) == [NOISE[1].render()]
    assert stages.seen == ["answer", "cite", "cite", "ground"] and prediction.rounds[0]["answer"] == "Other"
    assert prediction.counts["ungrounded"] == 1 and GenGround().batch_revision == "filtered"


def test_grounding_reads_the_authors_inputs_never_the_complex_question_by_default():
    prog = program(max_iterations=1)  # the authors' _batch_grounding, then _revise
    assert prog.grounding_inputs == "authors" and prog.stage_names() == ["deduce", "answer", "cite", "ground"]
    assert set(prog.cite.signature.input_fields) == {"sub_question", "documents"}
    assert set(prog.cite.signature.output_fields) == {"evidence"}  # a batch only cites
    assert set(prog.ground.signature.input_fields) == {"sub_question", "answer", "documents"}
    stages = script(prog, answer={"answer": "Ben Affleck"})
    prediction = run(prog, stages)
    # [N0, N1, Happy, N2, N3]: (N0, N1) cites nothing, (Happy, N2) keeps Happy, the revision reads [N3, Happy]
    assert stages.seen == ["deduce", "answer", "cite", "cite", "ground"]
    for prompt in stages.prompts_of("cite"):  # the sub-question and the batch: no question, no candidate answer
        assert field(prompt, "sub_question") == FIRST and QUESTION not in prompt and "Ben Affleck" not in prompt
    (revision,) = stages.prompts_of("ground")
    assert field(revision, "answer") == "Ben Affleck" and QUESTION not in revision
    assert json.loads(field(revision, "documents")) == [NOISE[3].render(), HAPPY.render()]
    assert prediction.answer == "Norah Jones" and prediction.counts["grounding_batches"] == 3


def test_grounding_with_the_question_shows_every_call_the_complex_question_and_the_candidate_answer():
    for revision in ("first_cited", "filtered"):
        prog = program(max_iterations=1, batch_revision=revision, grounding_inputs="with_question")
        assert prog.stage_names() == ["deduce", "answer", "ground"] and "question" in prog.ground.signature.input_fields
        stages = script(prog, answer={"answer": "Ben Affleck"})
        prediction = run(prog, stages)
        prompts = stages.prompts_of("ground")
        assert len(prompts) == (2 if revision == "first_cited" else 3) == prediction.counts["grounding_batches"]
        assert all(field(p, "question") == QUESTION and field(p, "answer") == "Ben Affleck" for p in prompts)
        assert prediction.answer == "Norah Jones"


def test_unparsable_replies_take_their_documented_fallbacks():
    garbled = {"garbled": "no fields"}
    prog = program(max_iterations=2)
    stages = script(prog, deduce=garbled)
    prediction = run(prog, stages)
    assert [r["sub_question"] for r in prediction.rounds] == [QUESTION]  # first round: the question itself
    assert prediction.counts["deduce.fallback"] == 2 and stages.seen[-1] == "deduce"  # later: the loop ends
    assert prediction.answer == prediction.rounds[0]["answer"]

    prog = program(max_iterations=1)
    stages = script(prog, cite=garbled, ground=garbled, answer={"answer": "Ben Affleck"})
    prediction = run(prog, stages)  # each batch "Empty": (N0, N1), (Happy, N2), then the revision over [N3]
    assert json.loads(field(stages.prompts_of("ground")[0], "documents")) == [NOISE[3].render()]
    assert prediction.counts["cite.fallback"] == 2 and prediction.counts["ground.fallback"] == 1
    assert prediction.answer == "Ben Affleck" and prediction.counts["ungrounded"] == 1  # the candidate answer kept

    prog = program(max_iterations=1, batch_revision="first_cited")
    stages = script(prog, ground=garbled, answer=garbled)
    prediction = run(prog, stages)
    assert prediction.rounds[0]["batches"] == 3 and prediction.counts["ground.fallback"] == 3  # each batch "Empty"
    assert prediction.answer == "" and prediction.counts["answer.fallback"] == 1  # never invented
    with pytest.raises(ValueError, match="at least 1"):
        GenGround(batch_size=0)


def test_gold_rows_follow_the_annotated_hops(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps([TWO_HOP_MUSIQUE]))
    example = load_dataset(path)[0]
    rows = list(gold_targets(GenGround(k=3, batch_revision="first_cited"), [example]))
    assert [row.stage for row in rows] == ["deduce"] * 3  # the immediate answer and the revision have none (no cite
    # stage: the first-cited batches have none)
    assert [row.outputs for row in rows] == [
        {"finished": False, "sub_question": "What is the publisher of Journal X?", "final_answer": ""},
        {"finished": False, "sub_question": "Who founded Acme Press?", "final_answer": ""},
        {"finished": True, "sub_question": "", "final_answer": "Ann Lee"}]
    assert rows[1].inputs["steps"] == ["Sub-question 1: What is the publisher of Journal X? Answer 1: Acme Press "
                                       "Evidence: It is published by Acme Press."]
    read = list(gold_targets(GenGround(k=3, grounding=False), [example]))
    readers = [row for row in read if row.stage == "answer"]
    assert [row.outputs["answer"] for row in readers] == ["Acme Press", "Ann Lee"]
    assert [d.split(":")[0] for d in readers[1].inputs["documents"] if not d.startswith("Town")] == ["Acme Press"]
    cites = [row for row in gold_targets(GenGround(k=3), [example]) if row.stage == "cite"]  # the default
    assert [(row.inputs["sub_question"], row.outputs) for row in cites] == [
        ("What is the publisher of Journal X?", {"evidence": "It is published by Acme Press."}),
        ("What is the publisher of Journal X?", {"evidence": "Empty"}),
        ("Who founded Acme Press?", {"evidence": "It was founded by Ann Lee in 1990."}),
        ("Who founded Acme Press?", {"evidence": "Empty"})]
    assert [len(row.inputs["documents"]) for row in cites] == [3, 3, 3, 3]
    assert "Acme Press:" in " ".join(cites[2].inputs["documents"]) and not any(
        d.startswith(("Journal X", "Acme Press")) for d in cites[1].inputs["documents"] + cites[3].inputs["documents"])
    direct = [row for row in gold_targets(GenGround(k=3, grounding=False, deduction=False), [example])]
    assert [(row.stage, row.inputs["sub_question"], row.outputs) for row in direct] == [
        ("answer", example.question, {"answer": "Ann Lee"})]


def test_the_default_revision_edits_with_the_authors_instructions_and_a_batch_of_the_papers_text_may_say_empty():
    from multihop.signatures.genground import Ground, GroundWithQuestion, Revise

    def instructions(program):
        return program.ground.signature.instructions

    assert instructions(GenGround()) == Revise.instructions and '"Empty"' not in Revise.instructions
    assert instructions(GenGround(batch_revision="first_cited")) == Ground.instructions
    assert '"Empty"' in Ground.instructions
    assert instructions(GenGround(grounding_inputs="with_question")) == GroundWithQuestion.instructions
