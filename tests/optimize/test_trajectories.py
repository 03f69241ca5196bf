import hashlib
import json
import time

import dspy
import pytest

from multihop.optimize.trajectories import EmptyTrajectoriesError, collect, stage_calls
from multihop.programs.base import MultihopProgram

from helpers import scripted_lm


class ThreeHops(MultihopProgram):
    """Calls one predictor three times per question (one per hop), then a second predictor once."""

    def __init__(self):
        super().__init__()
        self.hop = dspy.Predict("question, hop -> note")
        self.answer = dspy.Predict("question, notes -> answer")

    def forward(self, question):
        notes = [self.hop(question=question, hop=str(i)).note for i in range(3)]
        return self.answer(question=question, notes=" | ".join(notes))


def respond(prompt: str) -> dict:
    if "[[ ## note ## ]]" in prompt:
        return {"note": "hop " + prompt.rsplit("[[ ## hop ## ]]", 1)[-1].split()[0]}
    number = prompt.rsplit("question ", 1)[-1].split()[0]
    return {"answer": f"answer {number}" if int(number) % 2 == 0 else "wrong"}


def examples(n):
    return [dspy.Example(id=f"q{i}", question=f"question {i}", answers=[f"answer {i}"]).with_inputs("question")
            for i in range(n)]


def test_a_stage_called_three_times_yields_three_rows_with_its_own_inputs():
    lm, _ = scripted_lm(respond)
    dspy.configure(lm=lm)
    _, calls = stage_calls(ThreeHops(), examples(1)[0])
    assert [(c["stage"], c["call"]) for c in calls] == [("hop", 0), ("hop", 1), ("hop", 2), ("answer", 0)]
    for i, call in enumerate(calls[:3]):
        assert f"[[ ## hop ## ]]\n{i}" in call["messages"][-1]["content"]
        assert call["completion"].startswith(f"[[ ## note ## ]]\nhop {i}")
    assert "hop 0 | hop 1 | hop 2" in calls[3]["messages"][-1]["content"]
    assert calls[0]["messages"][0]["role"] == "system"


def test_collect_keeps_only_passing_questions_and_writes_one_file_per_stage(tmp_path):
    lm, _ = scripted_lm(respond, name="teacher")
    manifest = collect(ThreeHops(), examples(4), tmp_path, teacher_lm=lm, metric="em")
    assert manifest["kept"] == 2 and manifest["failed"] == 2 and manifest["stages"] == {"hop": 6, "answer": 2}
    hops = [json.loads(line) for line in (tmp_path / "hop.jsonl").read_text().splitlines()]
    assert {row["question_id"] for row in hops} == {"q0", "q2"}
    assert [row["call"] for row in hops] == [0, 1, 2, 0, 1, 2]
    assert all(row["teacher"] == "local/teacher" and row["score"] == 1.0 for row in hops)


def test_a_threaded_collection_writes_the_serial_files(tmp_path):
    def jittered(prompt):  # calls sent at once end out of order
        time.sleep(int(hashlib.sha256(prompt.encode()).hexdigest()[:2], 16) / 255 * 0.02)
        return respond(prompt)

    lm, _ = scripted_lm(jittered, name="teacher", cache=False)
    files = {}
    for threads in (1, 4):
        manifest = collect(ThreeHops(), examples(12), tmp_path / str(threads), teacher_lm=lm, metric="em",
                           threads=threads)
        assert manifest["kept"] == 6 and manifest["stages"] == {"hop": 18, "answer": 6}
        files[threads] = {path.name: path.read_text() for path in sorted((tmp_path / str(threads)).glob("*.json*"))}
    assert files[4] == files[1] and set(files[1]) == {"hop.jsonl", "answer.jsonl", "manifest.json"}


def test_all_failing_trajectories_are_a_clear_error(tmp_path):
    lm, _ = scripted_lm(lambda prompt: {"note": "x", "answer": "wrong"})
    with pytest.raises(EmptyTrajectoriesError, match="none of 3 questions"):
        collect(ThreeHops(), examples(3), tmp_path, teacher_lm=lm, metric="em")
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]  # the lock aside


def test_json_adapter_trajectories_hold_json_completions():
    from dspy.utils import DummyLM

    answers = [{"note": f"hop {i}"} for i in range(3)] + [{"answer": "answer 0"}]
    dspy.configure(lm=DummyLM(answers, adapter=dspy.JSONAdapter()), adapter=dspy.JSONAdapter())
    _, calls = stage_calls(ThreeHops(), examples(1)[0])
    assert [json.loads(c["completion"]) for c in calls] == answers
    assert all(c["adapter"] == "JSONAdapter" for c in calls) and "json" in calls[0]["messages"][0]["content"].lower()
