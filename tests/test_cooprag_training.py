import dspy
from typer.testing import CliRunner

from multihop.cli import app
from multihop.programs import CoopRAG
from multihop.programs.chain import unrolled_query
from multihop.programs.cooprag_training import unroll_questions
from multihop.retrievers.finetune import read_unrolled

from conftest import data_root
from scripted import scripted_lm
from test_cooprag import MASKED, SUBS, cooprag_lm


def questions(n):
    return [dspy.Example(id=f"q{i}", question=f"Who founded the company that makes product {i}?", answers=["x"])
            .with_inputs("question") for i in range(n)]


def test_unrolling_file_has_eq1_queries_and_sub_questions_and_resumes(tmp_path):
    lm, engine, seen = cooprag_lm()
    dspy.configure(lm=lm)
    out = tmp_path / "unrolled.jsonl"
    unroll_questions(CoopRAG(rerank=None), questions(2), out, progress=False)
    with open(out, "a") as torn:
        torn.write('{"id": "q2", "unrol')  # a run that died mid-write
    rows = unroll_questions(CoopRAG(rerank=None), questions(4), out, progress=False)
    assert seen == ["unroll"] * 4  # q0, q1 once each; the torn q2 and q3 on the rerun
    assert list(rows) == ["q0", "q1", "q2", "q3"]
    record = read_unrolled(out)["q3"]
    assert record["sub_questions"] == SUBS and record["reasoning_chain"] == MASKED and record["hop_count"] == 2
    assert record["unrolled"] == unrolled_query(questions(4)[3].question, SUBS, MASKED)
    assert record["fallback"] is False


def test_a_failed_unrolling_keeps_the_raw_question_and_says_so(tmp_path):
    lm, _ = scripted_lm(lambda prompt: {"nonsense": "no"})
    dspy.configure(lm=lm)
    rows = unroll_questions(CoopRAG(rerank=None), questions(1), tmp_path / "u.jsonl", progress=False)
    assert rows["q0"]["fallback"] is True and rows["q0"]["sub_questions"] == []
    assert rows["q0"]["unrolled"] == questions(1)[0].question


def test_cli_unroll_writes_the_file_retriever_train_reads(tmp_path, monkeypatch):
    import multihop.cli as cli

    lm, _, seen = cooprag_lm()
    monkeypatch.setattr(cli, "_configure", lambda *args, **kwargs: dspy.configure(lm=lm))
    data = data_root() / "musique/dev/musique_qa_100.json"
    result = CliRunner().invoke(app, ["cooprag", "unroll", str(data), "--out", str(tmp_path / "u.jsonl"),
                                      "--limit", "3"])
    assert result.exit_code == 0, result.output
    assert "unrolled 3 questions (0 fell back" in result.output and seen == ["unroll"] * 3
    assert len(read_unrolled(tmp_path / "u.jsonl")) == 3
