"""Every program is safe under ``--threads``: its default reranker over a real dense index (MiniLM, no token
cache, so the rerankers encode the candidates with the shared encoder, as over a BM25 first stage) gives the same rows
at 1 and at 16 threads on a scripted LM, and no question ends in an error."""

import json

import dspy
import pytest

from multihop.evaluation.runner import evaluate
from multihop.programs import PROGRAMS, takes_retriever

from helpers import TypedScript


def program_on(name: str, retriever):
    cls = PROGRAMS[name]
    own = {"encoder": "minilm"} if "encoder" in cls.settings() else {}  # CIRAG's triple reranking: a light encoder
    return cls(retriever=retriever, **own) if takes_retriever(cls) else cls(**own)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(method.name for method in PROGRAMS.declared()))
def test_the_same_rows_at_1_and_16_threads(name, small_retriever, musique_dev, tmp_path):
    rows = {}
    for threads in (1, 16):
        program = program_on(name, small_retriever)
        with dspy.context(lm=TypedScript(program).lm):
            evaluate(program, musique_dev[:6], tmp_path / str(threads), threads=threads, progress=False)
        lines = (tmp_path / str(threads) / "results.jsonl").read_text().splitlines()
        rows[threads] = sorted((json.loads(line) for line in lines), key=lambda row: row["id"])
        for row in rows[threads]:
            row.pop("seconds")
    assert [row["error"] for row in rows[16]] == [None] * 6
    assert rows[16] == rows[1]
