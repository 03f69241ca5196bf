import json

import dspy
import pytest

from multihop.data.loaders import load_dataset
from multihop.optimize.gold_targets import HeldApartError, gold_targets, gold_trajectories
from multihop.optimize.trajectories import EmptyTrajectoriesError
from multihop.programs import ComposeRAG, CoopRAG, NoRetrieval, SingleStepRAG
from multihop.programs.gold_builders import (
    GOLD_BUILDERS,
    GoldContext,
    evidence_sentence,
    gold_documents,
    hop_question,
    substitute,
)
from multihop.signatures.cooprag import FILL, UNCERTAIN

from helpers import data_root, scripted_lm

DISTRACTORS = [{"title": f"Town {c}", "paragraph_text": f"Town {c} is a town in a valley. It has a mill.",
                "is_supporting": False} for c in "ABCD"]
MUSIQUE = {
    "id": "2hop__1_2", "question": "Who founded the publisher of Journal X?", "answer": "Ann Lee",
    "answer_aliases": [], "answerable": True,
    "paragraphs": [{"idx": 0, "title": "Journal X", "paragraph_text": "Journal X is a journal about rivers. It is "
                    "published by Acme Press.", "is_supporting": True},
                   {"idx": 1, "title": "Acme Press", "paragraph_text": "Acme Press is a publisher in Leeds. It was "
                    "founded by Ann Lee in 1990.", "is_supporting": True}, *DISTRACTORS],
    "question_decomposition": [{"id": 1, "question": "Journal X >> publisher", "answer": "Acme Press",
                                "paragraph_support_idx": 0},
                               {"id": 2, "question": "Who founded #1?", "answer": "Ann Lee",
                                "paragraph_support_idx": 1}],
}
WIKI = {
    "_id": "w1", "question": "Who was born first, Al Roe or Bo Kay?", "answer": "Al Roe", "type": "comparison",
    "context": [["Al Roe", ["Al Roe (born 1950) is a painter."]], ["Bo Kay", ["Bo Kay is a poet.", "He was born in "
                                                                              "1960."]],
                ["Town A", ["Town A is a town."]]],
    "supporting_facts": [["Al Roe", 0], ["Bo Kay", 1]],
    "evidences": [["Al Roe", "date of birth", "1950"], ["Bo Kay", "date of birth", "1960"]],
    "qa_pairs": [{"question": "When was Al Roe born?"}, {"question": "When was Bo Kay born?"}],
}


def olympic(tmp_path):
    """A MuSiQue record whose second hop puts the first answer inside a longer entity."""
    return annotated(tmp_path, {
        "id": "2hop__3_4", "question": "Who bore the flag of Erik Berg's country at the 1920 Summer Olympics?",
        "answer": "Ole Lilloe", "answer_aliases": [], "answerable": True,
        "paragraphs": [{"idx": 0, "title": "Erik Berg", "paragraph_text": "Erik Berg was a Swedish sailor.",
                        "is_supporting": True},
                       {"idx": 1, "title": "Sweden at the 1920 Summer Olympics", "paragraph_text": "Ole Lilloe was "
                        "the flag bearer.", "is_supporting": True}, *DISTRACTORS],
        "question_decomposition": [
            {"id": 3, "question": "Erik Berg >> country of citizenship", "answer": "Sweden",
             "paragraph_support_idx": 0},
            {"id": 4, "question": "#1 at the 1920 Summer Olympics >> flag bearer", "answer": "Ole Lilloe",
             "paragraph_support_idx": 1}]}, "olympic.json")


def annotated(tmp_path, record, name="train.json"):
    path = tmp_path / name
    path.write_text(json.dumps([record]))
    return load_dataset(path)[0]


@pytest.fixture
def musique(tmp_path):
    return annotated(tmp_path, MUSIQUE)


def rows(tmp_path, program, examples, **kwargs):
    """The gold rows per stage, rendered by the JSON adapter local models run with."""
    with dspy.context(adapter=dspy.JSONAdapter()):
        manifest = gold_trajectories(program, examples, tmp_path / "rows", **kwargs)
    return manifest, {stage: [json.loads(line) for line in (tmp_path / "rows" / f"{stage}.jsonl").open()]
                      for stage in manifest["stages"]}


def parsed(program, stage, row):
    """A row's completion parsed back by the adapter into the stage's output fields."""
    predictor = dict(program.named_predictors())[stage]
    return dspy.JSONAdapter().parse(predictor.signature, row["completion"])


def shown(row, field):
    """An input field's value as the row's prompt shows it (the last user message)."""
    text = row["messages"][-1]["content"]
    return text.split(f"[[ ## {field} ## ]]\n", 1)[1].split("\n\n[[ ## ", 1)[0].split("\n\nRespond with", 1)[0]


def test_the_loader_keeps_the_annotations_the_builders_read(tmp_path, musique):
    acme = next(p for p in musique.paragraphs if p["title"] == "Acme Press")
    assert musique.decomposition_answers == ["Acme Press", "Ann Lee"]
    assert musique.decomposition_support[1] == acme["id"]
    wiki = annotated(tmp_path, WIKI, "wiki.json")
    assert wiki.evidences == WIKI["evidences"]
    assert wiki.supporting_sentences == ["Al Roe (born 1950) is a painter.", "He was born in 1960."]


def test_pure_helpers_on_hand_computed_values(musique):
    assert substitute("Who founded #1 in #2?", ["Acme Press"]) == "Who founded Acme Press in #2?"
    assert evidence_sentence("It was by G. Stanley Hall in 1904. Later.", "G. Stanley Hall") == \
        "It was by G. Stanley Hall in 1904."
    assert evidence_sentence("No answer here. None.", "x") == "No answer here."
    assert hop_question("#1 >> country of citizenship") == "What is the country of citizenship of #1?"
    assert hop_question("Who founded #1?") == "Who founded #1?"
    assert hop_question("Anna >> cast member of") == "What is the cast member of Anna?"
    shown_docs = gold_documents(musique, 4, GoldContext())
    assert len(shown_docs) == 4 and {"Journal X", "Acme Press"} <= {p.title for p in shown_docs}
    assert gold_documents(musique, 4, GoldContext()) == shown_docs  # the same draw for the same question and seed
    assert {p.title for p in gold_documents(musique, 1, GoldContext())} == {"Journal X", "Acme Press"}  # past k
    hops = [[p.title for p in gold_documents(musique, 4, GoldContext(), salt=f"hop {i}")] for i in range(8)]
    assert len({tuple(titles) for titles in hops}) > 1  # each hop its own draw


def test_cooprag_unrolling_masks_bridge_entities_and_fills_the_last_tail(tmp_path, musique):
    program = CoopRAG(k=3)
    manifest, stage_rows = rows(tmp_path, program, [olympic(tmp_path), musique])
    embedded = parsed(program, "unroll", stage_rows["unroll"][0])  # an answer inside a head is masked there too
    assert embedded["reasoning_chain"] == [["Erik Berg", "country of citizenship", UNCERTAIN],
                                           [f"{UNCERTAIN} at the 1920 Summer Olympics", "flag bearer", FILL]]
    assert embedded["sub_questions"][1] == "What is the flag bearer of Sweden at the 1920 Summer Olympics?"
    assert parsed(program, "complete", stage_rows["complete"][0])["completed_chain"][1][0] == \
        "Sweden at the 1920 Summer Olympics"
    manifest, stage_rows = rows(tmp_path, program, [musique])
    assert manifest["stages"] == {"unroll": 1, "complete": 1, "reason": 1} and manifest["teacher"] == "gold"
    gold_chain = [["Journal X", "publisher", "Acme Press"], ["Acme Press", "Who founded", "Ann Lee"]]
    unrolled = parsed(program, "unroll", stage_rows["unroll"][0])
    assert unrolled["hop_count"] == 2 and unrolled["reasoning_structure"] == \
        "2 steps: find the publisher of Journal X; then answer: Who founded the answer of step 1"
    assert unrolled["sub_questions"] == ["What is the publisher of Journal X?", "Who founded Acme Press?"]
    assert unrolled["reasoning_chain"] == [["Journal X", "publisher", UNCERTAIN], [UNCERTAIN, "Who founded", FILL]]
    assert "Acme Press" not in unrolled["reasoning_structure"]  # the structure names no answer
    completion = stage_rows["complete"][0]
    assert parsed(program, "complete", completion) == {"completed_chain": gold_chain}
    assert json.loads(shown(completion, "reasoning_chain")) == unrolled["reasoning_chain"]
    documents = json.loads(shown(completion, "documents"))
    assert len(documents) == 3 and sum(d.startswith(("Journal X:", "Acme Press:")) for d in documents) == 2
    reasoning = stage_rows["reason"][0]
    assert json.loads(shown(reasoning, "reasoning_chain")) == gold_chain
    assert parsed(program, "reason", reasoning) == {"answer": "Ann Lee"}


def test_cooprag_switches_decide_the_stages_and_targets(tmp_path, musique):
    _, stage_rows = rows(tmp_path, CoopRAG(uncertainty_mask=False), [musique])
    assert set(stage_rows) == {"unroll", "reason"}
    chain = parsed(CoopRAG(uncertainty_mask=False), "unroll", stage_rows["unroll"][0])["reasoning_chain"]
    assert chain == [["Journal X", "publisher", "Acme Press"], ["Acme Press", "Who founded", FILL]]
    assert json.loads(shown(stage_rows["reason"][0], "reasoning_chain")) == chain  # nothing completes it
    manifest, stage_rows = rows(tmp_path, CoopRAG(unified=True), [musique])
    assert set(stage_rows) == {"unroll", "complete_and_reason"}
    assert parsed(CoopRAG(unified=True), "complete_and_reason", stage_rows["complete_and_reason"][0])["answer"] == \
        "Ann Lee"


def test_cooprag_chains_from_2wiki_evidences_end_in_the_answer(tmp_path):
    wiki = annotated(tmp_path, WIKI, "wiki.json")
    program = CoopRAG()
    _, stage_rows = rows(tmp_path, program, [wiki])
    unrolled = parsed(program, "unroll", stage_rows["unroll"][0])
    assert unrolled["sub_questions"] == ["When was Al Roe born?", "When was Bo Kay born?"]
    assert unrolled["reasoning_chain"] == [["Al Roe", "date of birth", UNCERTAIN], ["Bo Kay", "date of birth",
                                                                                    UNCERTAIN],
                                           ["Who was born first, Al Roe or Bo Kay", "answer", FILL]]
    assert unrolled["hop_count"] == 3 and unrolled["reasoning_structure"].endswith("then answer the question from them")
    assert parsed(program, "complete", stage_rows["complete"][0])["completed_chain"][-1][2] == "Al Roe"


def test_2wiki_records_without_sub_questions_ask_for_each_evidence_triple(tmp_path):
    bare = {key: value for key, value in WIKI.items() if key != "qa_pairs"}  # as in the 2Wiki dev file
    target = next(t for t in gold_targets(CoopRAG(), [annotated(tmp_path, bare, "dev.json")]) if t.stage == "unroll")
    assert target.outputs["sub_questions"] == ["What is the date of birth of Al Roe?",
                                               "What is the date of birth of Bo Kay?"]


def test_composerag_solves_each_hop_from_its_supporting_paragraph(tmp_path, musique):
    program = ComposeRAG(k=3)
    manifest, stage_rows = rows(tmp_path, program, [musique])
    assert manifest["stages"] == {"decompose": 1, "construct": 1, "answer": 3, "verify": 4, "finalize": 1,
                                  "verify_final": 2}
    assert set(manifest["without_gold"]) == {"decide", "rewrite", "rank_passages", "improve_analysis",
                                             "improve_decomposition"}
    assert parsed(program, "decompose", stage_rows["decompose"][0])["sub_questions"] == \
        ["What is the publisher of Journal X?", "Who founded #1?"]
    assert "[[ ## question ## ]]" in stage_rows["decompose"][0]["messages"][1]["content"]  # the paper's demos first
    construct = stage_rows["construct"][0]
    assert shown(construct, "new_question") == "Who founded #1?" and "Answer #1: Acme Press" in construct[
        "messages"][-1]["content"]
    assert parsed(program, "construct", construct) == {"rewritten_question": "Who founded Acme Press?"}
    first, second, whole = stage_rows["answer"]
    for row, title, answer in ((first, "Journal X", "Acme Press"), (second, "Acme Press", "Ann Lee")):
        target = parsed(program, "answer", row)
        number = int(target["answer"].rsplit("[", 1)[1].rstrip("]"))
        assert target["answer"] == f"{answer} [{number}]"
        assert json.loads(shown(row, "context"))[number - 1].startswith(f"[{number}] {title}:")
        assert target["reasoning"].startswith(f"[{number}] says: \"") and answer in target["reasoning"]
    assert shown(first, "background") == "Original question: Who founded the publisher of Journal X?"
    assert "Previous sub-questions and answers:\nWhat is the publisher of Journal X? Acme Press" in shown(
        second, "background")
    assert shown(whole, "background") == "none" and parsed(program, "answer", whole)["answer"].startswith("Ann Lee [")
    verdicts = [(shown(row, "answer"), parsed(program, "verify", row)["valid"]) for row in stage_rows["verify"]]
    assert [valid for _, valid in verdicts] == [True, False, True, False]
    assert verdicts[1][0].startswith("Ann Lee [") and verdicts[3][0].startswith("Acme Press [")
    assert parsed(program, "finalize", stage_rows["finalize"][0])["answer"] == "Ann Lee"
    final = [(shown(row, "answer"), parsed(program, "verify_final", row)["valid"])
             for row in stage_rows["verify_final"]]
    assert final == [("Ann Lee", True), ("Acme Press", False)]


def test_composerag_without_simple_qa_has_no_whole_question_answer_row(tmp_path, musique):
    _, stage_rows = rows(tmp_path, ComposeRAG(simple_qa=False), [musique])
    assert len(stage_rows["answer"]) == 2


def test_the_reader_sees_the_gold_passages_among_distractors(tmp_path, musique):
    program = SingleStepRAG(k=4)
    _, stage_rows = rows(tmp_path, program, [musique])
    row = stage_rows["answer"][0]
    passages = json.loads(shown(row, "passages"))
    assert len(passages) == 4 and {p.split(":")[0] for p in passages} >= {"Journal X", "Acme Press"}
    assert parsed(program, "answer", row) == {"answer": "Ann Lee"}
    assert row["teacher"] == "gold" and row["adapter"] == "JSONAdapter"


def test_held_apart_questions_never_enter_a_training_set(tmp_path, musique):
    with pytest.raises(HeldApartError, match="held apart"):
        gold_trajectories(SingleStepRAG(), [musique], tmp_path / "rows", held_apart={"2hop__1_2"})
    assert not (tmp_path / "rows").exists()


def test_the_dev_files_are_held_apart_and_the_train_files_are_not():
    from multihop.data.loaders import held_apart_ids
    from multihop.data.question_sets import QUESTION_SETS

    held = held_apart_ids()
    dev = load_dataset(data_root() / QUESTION_SETS["dev"]["musique"])
    assert {e.id for e in dev} <= held
    for relative in QUESTION_SETS["train"].values():
        assert not {e.id for e in load_dataset(data_root() / relative)} & held


def test_a_question_without_annotations_gives_no_rows(tmp_path):
    hotpot = annotated(tmp_path, {"_id": "h1", "question": "Q?", "answer": "A", "type": "bridge",
                                  "context": [["T", ["A is here."]]], "supporting_facts": [["T", 0]]}, "hotpot.json")
    with pytest.raises(EmptyTrajectoriesError):
        gold_trajectories(CoopRAG(), [hotpot], tmp_path / "rows")


VARIANT = {"CoopRAG": {"unified": True}, "IRCoT": {"cot_reader": True},  # the configurations with other stages
           "GenGround": {"batch_revision": "first_cited"}}


def test_every_builder_is_for_a_stage_its_program_can_have():
    from multihop.programs import PROGRAMS

    for name, builders in GOLD_BUILDERS.items():
        cls = PROGRAMS[name]
        configurations = [cls(), *([cls(**VARIANT[name])] if name in VARIANT else [])]
        stages = {stage for program in configurations for stage in program.stage_names()}
        assert set(builders) <= stages, name


def test_gold_trajectories_cli_builds_rows_without_an_index_and_refuses_dev_questions(tmp_path, monkeypatch,
                                                                                        capsys):
    from typer.testing import CliRunner

    import multihop.cli.programs
    from multihop.cli import app
    from multihop.cli.errors import run
    from multihop.data.folders import sha256_file

    monkeypatch.setattr(multihop.cli.programs, "retriever_folder", lambda *args: pytest.fail("built an index"))
    train = tmp_path / "train.json"
    train.write_text(json.dumps([MUSIQUE]))
    result = CliRunner().invoke(app, ["trajectories", "--gold", "--program", "ComposeRAG", "--data", str(train),
                                      "--out", str(tmp_path / "rows")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "rows" / "manifest.json").read_text())
    assert manifest["teacher"] == "gold" and manifest["stages"]["verify"] == 4
    assert manifest["data"] == {"path": str(train), "sha256": sha256_file(train), "questions": 1}
    assert json.loads((tmp_path / "rows" / "answer.jsonl").read_text().splitlines()[0])["adapter"] == "JSONAdapter"
    assert "rank_passages" in manifest["without_gold"]
    dev = data_root() / "musique/dev/musique_qa_100.json"
    code = run(app, ["trajectories", "--gold", "--data", str(dev), "--out", str(tmp_path / "dev")])
    assert code != 0 and not (tmp_path / "dev").exists()
    assert "held apart for measuring" in capsys.readouterr().err
    code = run(app, ["trajectories", "--program", "SingleStepRAG", "--data", str(dev), "--out", str(tmp_path / "t")])
    assert code != 0 and not (tmp_path / "t").exists()  # a teacher's rows too, before any index or LM call
    assert "held apart for measuring" in capsys.readouterr().err


def test_gold_rows_of_a_users_own_file_need_no_multihop_data(tmp_path, monkeypatch, caplog):
    from typer.testing import CliRunner

    from multihop.cli import app

    monkeypatch.delenv("MULTIHOP_DATA", raising=False)
    train = tmp_path / "train.json"
    train.write_text(json.dumps([MUSIQUE]))
    result = CliRunner().invoke(app, ["trajectories", "--gold", "--program", "ComposeRAG", "--data", str(train),
                                      "--out", str(tmp_path / "rows")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "rows" / "manifest.json").read_text())["kept"] == 1
    assert "MULTIHOP_DATA is not set: no dev questions to hold apart" in caplog.text


def test_a_gold_student_runs_as_its_stage_and_refuses_another_base(tmp_path, musique):
    from multihop.data.folders import sha256_file
    from multihop.lm.backends import make_lm
    from multihop.optimize.distill import MANIFEST, DistillConfig, distill
    from multihop.optimize.student_stages import trained_stages, use_student

    from helpers import StaticRetriever, scripted_lm, tiny_causal_lm

    tiny = tiny_causal_lm(tmp_path / "tiny", ["Ann Lee answer passages question Journal X Acme Press"])
    program = SingleStepRAG(retriever=StaticRetriever([]), k=4)
    source = {"path": "musique_train.json", "sha256": "5e1f", "questions": 1}
    rows(tmp_path, program, [musique], data=source)
    student = distill([tmp_path / "rows" / "answer.jsonl"], tmp_path / "student",
                      DistillConfig(base=tiny, r=4, epochs=1, batch_size=1))
    trained = json.loads((student / MANIFEST).read_text())
    assert trained["stages"] == ["answer"] and trained["rows"] == 1 and trained["data"] == [source]
    assert trained["programs"] == {"SingleStepRAG": ["answer"]}
    assert trained["base_sha256"] == sha256_file(tmp_path / "tiny" / "model.safetensors")
    lm = make_lm(f"local:{tiny}", adapter=student, max_tokens=4, engine="transformers", constrained=False)
    base, base_engine = scripted_lm(lambda prompt: {"answer": "base"})
    dspy.configure(lm=base, adapter=dspy.JSONAdapter())
    assert use_student(program, lm, student) == ["answer"]
    program(question=musique.question)
    assert len(lm.history) == 1 and base_engine.requests == []
    closed_book = NoRetrieval()  # an "answer" stage too, but of a program whose rows the student never saw
    assert trained_stages(closed_book, student) == []
    with pytest.raises(ValueError, match="learnt no stage of NoRetrieval"):
        use_student(closed_book, lm, student)
    closed_book(question=musique.question)
    assert len(lm.history) == 1 and len(base_engine.requests) == 1
    other = tiny_causal_lm(tmp_path / "other", ["Ann Lee answer"], seed=1)
    with pytest.raises(ValueError, match="was trained on"):
        make_lm(f"local:{other}", adapter=student)
    (student / MANIFEST).write_text("{}")
    with pytest.raises(ValueError, match="not a distillation manifest"):
        use_student(program, lm, student)


def test_the_per_stage_comparison_scores_each_stage_and_counts_format_failures(musique):
    from multihop.optimize.stage_comparison import per_stage, stage_table

    program = ComposeRAG()
    right, _ = scripted_lm(lambda prompt: {"reasoning": "r", "reason": "r", "valid": "Acme Press [" not in prompt,
                                           "rewritten_question": "Who founded Acme Press?", "answer": "Ann Lee",
                                           "sub_questions": '["What is the publisher of Journal X?", "Who founded '
                                                            '#1?"]'})
    unparsable, _ = scripted_lm(lambda prompt: {"nothing": "here"}, name="unparsable")
    lms = {"base": dict.fromkeys(program.stage_names(), unparsable),
           "student": dict.fromkeys(program.stage_names(), right)}
    results = per_stage(program, [musique], lms, per_stage_cap=10, adapter=dspy.ChatAdapter())
    assert {stage for stage, _ in results} == {"decompose", "construct", "answer", "verify", "finalize",
                                               "verify_final"}
    assert all(row["format_failures"] == row["n"] and row["score"] == 0 for (_, m), row in results.items()
               if m == "base")
    student = {stage: row for (stage, m), row in results.items() if m == "student"}
    assert student["decompose"]["score"] == 1.0 and student["construct"]["score"] == 1.0
    assert student["finalize"]["score"] == 1.0 and student["verify"]["n"] == 4
    # the scripted verdict rejects every "Acme Press [n]": right on hop 2's pair, wrong on hop 1's
    assert student["verify"]["score"] == 2
    assert "sub-question overlap" in str(stage_table({("ComposeRAG", "musique"): results}).columns[4]._cells)


@pytest.mark.parametrize("program", [SingleStepRAG(k=4), CoopRAG(k=4, rerank=None), CoopRAG(k=4, rerank=None,
                                                                                              unified=True),
                                     CoopRAG(k=4, rerank=None, uncertainty_mask=False)],
                         ids=["SingleStepRAG", "CoopRAG", "CoopRAG-unified", "CoopRAG-no-mask"])
def test_gold_rows_are_the_prompts_the_program_sends(tmp_path, musique, program):
    """The program run on the gold documents by an LM that replies with the gold targets sends, stage by stage,
    exactly the messages of the gold rows."""
    from multihop.optimize.gold_targets import gold_targets
    from multihop.optimize.trajectories import render_call, stage_calls

    from helpers import StaticRetriever

    targets = {target.stage: target for target in gold_targets(program, [musique])}
    fields = {stage: set(target.outputs) for stage, target in targets.items()}

    def respond(prompt: str) -> dict:
        asked = {stage for stage, names in fields.items() if all(f"[[ ## {name} ## ]]" in prompt for name in names)}
        stage = max(asked, key=lambda s: len(fields[s]))
        return {name: json.dumps(value) if isinstance(value, list) else value
                for name, value in targets[stage].outputs.items()}

    program.retriever = StaticRetriever(gold_documents(musique, program.k, GoldContext()))
    dspy.configure(lm=scripted_lm(respond)[0], adapter=dspy.ChatAdapter())
    prediction, calls = stage_calls(program, musique)
    predictors = dict(program.named_predictors())
    assert [call["stage"] for call in calls] == list(targets) and prediction.answer == "Ann Lee"
    for call in calls:
        target = targets[call["stage"]]
        gold = render_call(predictors[target.stage], target.inputs, target.outputs, dspy.ChatAdapter())
        assert call["messages"] == gold["messages"], call["stage"]


def test_composerag_gold_rows_are_the_prompts_its_pipeline_sends(tmp_path, musique):
    """ComposeRAG's multi-hop pipeline, each hop retrieving its gold documents and every stage replying its gold
    target, sends exactly the gold rows' messages: decomposition, construction, per-hop answers and verdicts, final
    answer and final verdict."""
    from multihop.optimize.gold_targets import gold_targets
    from multihop.optimize.trajectories import render_call, stage_calls
    from multihop.programs.composerag.gold import gold_solving
    from multihop.retrievers.query import Hits

    program = ComposeRAG(k=3, simple_qa=False, passage_reranking=False, retrieval_decision=False,
                         query_rewriting=False)
    targets = list(gold_targets(program, [musique]))
    solving = gold_solving(musique, program.k, GoldContext())
    by_query = {hop.question: hop for hop in solving.hops}

    class GoldRetriever(dspy.Module):
        def forward(self, query, k=5):
            hop = by_query[query]
            return Hits(passages=hop.passages[:k], ids=hop.passage_ids[:k], scores=[1.0] * len(hop.passages[:k]))

    def values(target):
        return [str(item) for value in target.inputs.values() for item in (value if isinstance(value, list) else
                                                                           [value])]

    def target_of(prompt: str):
        sent = [t for t in targets if all(f"[[ ## {name} ## ]]" in prompt for name in [*t.inputs, *t.outputs])
                and all(v in prompt for v in values(t)) and t.outputs.get("valid", True) is not False]
        return max(sent, key=lambda t: sum(len(v) for v in values(t)))

    def respond(prompt: str) -> dict:
        return {name: json.dumps(value) if isinstance(value, list) else value
                for name, value in target_of(prompt).outputs.items()}

    program.retriever = GoldRetriever()
    dspy.configure(lm=scripted_lm(respond)[0], adapter=dspy.ChatAdapter())
    prediction, calls = stage_calls(program, musique)
    assert prediction.answer == "Ann Lee" and prediction.grounded is True
    assert [call["stage"] for call in calls] == ["decompose", "answer", "verify", "construct", "answer", "verify",
                                                 "finalize", "verify_final"]
    predictors = dict(program.named_predictors())
    for call in calls:
        target = target_of(call["messages"][-1]["content"])
        assert target.stage == call["stage"]
        gold = render_call(predictors[target.stage], target.inputs, target.outputs, dspy.ChatAdapter())
        assert call["messages"] == gold["messages"], call["stage"]


@pytest.mark.slow
def test_the_shipped_student_is_smollm2s_learnt_from_train_files_and_reads_dev_questions():
    from multihop.data.folders import sha256_file
    from multihop.data.loaders import load_questions
    from multihop.data.question_sets import question_file
    from multihop.evaluation.metrics import f1
    from multihop.experiments.demo import SHIPPED_STUDENT
    from multihop.lm.backends import base_checksum, make_lm, spec_adapter
    from multihop.optimize.distill import MANIFEST
    from multihop.optimize.student_stages import use_student

    trained = json.loads((SHIPPED_STUDENT / MANIFEST).read_text())
    assert trained["base_sha256"] == base_checksum("smollm2")
    assert {record["sha256"] for record in trained["data"]} == {
        sha256_file(question_file(name, "train")) for name in ("musique", "2wiki", "hotpotqa")}
    lm = make_lm("local:smollm2", adapter=SHIPPED_STUDENT, max_tokens=32)
    program = SingleStepRAG()
    assert use_student(program, lm, SHIPPED_STUDENT) == ["answer"]
    targets = list(gold_targets(program, load_questions("2wiki", limit=3)))
    with dspy.context(adapter=spec_adapter("local:smollm2")):
        answers = [program.answer(**target.inputs).answer for target in targets]
    assert len(lm.history) == 3 and all(answers)  # one call each, every reply parsed
    assert sum(f1(answer, target.outputs["answer"]) for answer, target in zip(answers, targets, strict=True)) > 0
