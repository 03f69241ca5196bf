"""CoopRAG's training loop, step 1 (§3.6): unroll the train questions once with a chosen LM and keep the result.

§3.6 fine-tunes the retriever on unrolled queries U (Eq. 1), weighting each question by α = log(1 + |S|) (Eq. 6).
:func:`unroll_questions` writes one JSON line per question — ``{id, question, unrolled, sub_questions, reasoning_chain,
hop_count, reasoning_structure, fallback}`` — that ``multihop retriever train --unrolled FILE``
(:func:`multihop.retrievers.finetune.read_unrolled`) reads. Rows are durable as they are written and a rerun skips the
ids already in the file, so an interrupted run resumes; the file is locked while a run writes it, and a rerun with
another program setting or LM is refused (``<file>.run.json``). A question whose unrolling failed keeps the raw question
as ``unrolled`` and ``fallback: true`` (its α then counts one step, as a question without an unrolling does), so the
training set loses no question. With ``threads`` > 1 (a served LM) the questions are unrolled ``threads`` at once, in
chunks of ``threads * 4`` whose rows are appended in the questions' order once the chunk is done: the file reads as a
serial run's, and an interrupt loses at most the chunk in flight, which a rerun redoes.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import dspy
from tqdm.auto import tqdm

from multihop.folders import check_run, locked
from multihop.jsonl import append_row, read_rows
from multihop.parallel import fan_out_chunks

from .program import CoopRAG


def unroll_questions(program: CoopRAG, examples: Sequence[dspy.Example], out: str | Path,
                     progress: bool = True, threads: int = 1) -> dict[str, dict]:
    """Unroll every question of ``examples`` not yet in ``out`` with ``program``'s unrolling stage, ``threads`` at
    once; returns all rows of the file by id."""
    if not program.unrolling:
        raise ValueError("this CoopRAG has unrolling=False: there is nothing to unroll")
    out = Path(out)
    manifest = {"program": type(program).__name__, "config": program.config(),
                "lm": getattr(dspy.settings.lm, "model", None)}  # rows are per question: more questions extend it
    with locked(out, file=True):
        check_run(out.with_name(f"{out.name}.run.json"), manifest, kind="unrolling")
        return _unroll(program, examples, out, progress, threads)


def _unroll(program: CoopRAG, examples: Sequence[dspy.Example], out: Path, progress: bool,
            threads: int) -> dict[str, dict]:
    rows = read_rows(out)
    todo = [ex for ex in examples if ex.id not in rows]
    with open(out, "a", encoding="utf-8") as sink, \
            tqdm(total=len(todo), desc="unrolling", unit="q", disable=not progress) as bar:
        for chunk in fan_out_chunks(partial(unrolled_row, program), todo, threads):
            for _, row in chunk:
                append_row(sink, row)
                rows[row["id"]] = row
            bar.update(len(chunk))
    return rows


def unrolled_row(program: CoopRAG, example: dspy.Example) -> dict:
    """The file's row for ``example``: its unrolling by ``program``."""
    unrolled = program.unroll_question(example.question)
    return {"id": example.id, "question": example.question, "unrolled": unrolled.query,
            "sub_questions": unrolled.sub_questions, "reasoning_chain": unrolled.chain,
            "hop_count": unrolled.hop_count, "reasoning_structure": unrolled.reasoning_structure,
            "fallback": unrolled.fallback}
