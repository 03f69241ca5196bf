"""CoopRAG's training loop (§3.6): unroll the train questions once with a chosen LM and keep the result (step 1), then
fine-tune the encoder on the unrolled questions (step 2). This module holds what is CoopRAG's own — the unrolling
file, which questions train and on what query, α's count, the samples each recipe draws —; its commands are
``multihop cooprag unroll`` and ``multihop cooprag train`` (:mod:`.cli`), and the training loop that fits an encoder to
the drawn batches, any method's, is the shared :mod:`multihop.retrievers.finetune`.

§3.6 fine-tunes the retriever on unrolled queries U (Eq. 1), weighting each question by α = log(1 + |S|) (Eq. 6).
:func:`unroll_questions` writes one JSON line per question — ``{id, question, unrolled, sub_questions, reasoning_chain,
hop_count, reasoning_structure, fallback}`` — that ``multihop cooprag train --unrolled FILE``
(:func:`read_unrolled`) reads. Rows are durable as they are written and a rerun skips the
ids already in the file, so an interrupted run resumes; the file is locked while a run writes it, and a rerun with
another program setting or LM is refused (``<file>.run.json``). A question whose unrolling failed keeps the raw question
as ``unrolled`` and ``fallback: true`` (its α then counts one step, as a question without an unrolling does), so the
training set loses no question. With ``threads`` > 1 (a served LM) the questions are unrolled ``threads`` at once, in
chunks of ``threads * 4`` whose rows are appended in the questions' order once the chunk is done: the file reads as a
serial run's, and an interrupt loses at most the chunk in flight, which a rerun redoes.

Step 2 (:func:`fine_tune`) draws the training samples and hands them to the shared trainer
(:func:`multihop.retrievers.finetune.train`, RaLa's loss). :func:`training_questions` reads each question of a train
file with paragraphs marked ``is_supporting`` (MuSiQue, HotpotQA, 2Wiki), its query (the unrolled one when the
unrolling file has it) and |S| (the sub-questions its unrolling wrote; ``alpha_from="chain"``: its chain's triples,
Table 19). A question without an unrolling, or whose unrolling fell back, counts one step (our reading: α = log 2, the
weight of the simplest question, so no question drops out; the released code would weigh a question with no
sub-questions log 1 = 0); without an unrolling file every question does, and α does nothing: it warns.
:func:`training_batches` draws the samples of each epoch with the seed, as the recipe says:

- ``paper`` (§3.6, App. A): one sample a question an epoch — a positive drawn from its supporting paragraphs (so
  every question weighs the same, whatever its number of hops), a distractor (a non-supporting paragraph of the
  same question: the hard negative) and a random negative (a paragraph of another question) —, its other supporting
  paragraphs out of its denominator (they are no negatives of it). Both are our reading: Eq. 5 writes one positive
  D_i per question and sums over the batch without saying what a question with several supporting paragraphs
  contributes. A batch holds each question once.
- ``released`` (RaLa/utils.py ``Making_datasets``, trainer.py): one sample per (question, supporting paragraph), each
  with a hard negative drawn without replacement from the question's non-supporting paragraphs — from all the
  training paragraphs when it has fewer of them than supporting ones —, no random negative and no exclusion (a
  batch may hold a question twice, each its other's negative). Its schedule's horizon counts questions, not samples
  (``len(train_data) // batch_size`` steps an epoch), so its learning rate is zero from that step on and the later
  steps leave the weights as they are: the batches stop there, the same encoder in fewer steps.

Both shuffle the epoch's samples and drop its ragged last batch. The released code's query text (``[Question]`` +
the question, sub-questions and triples) and document text (``[Passage]`` + title + text) are not followed: training
encodes the texts the index and the reranker encode (the unrolled query of Eq. 1, ``title: text``).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import dspy
from tqdm.auto import tqdm

from multihop.data.corpus import Passage
from multihop.data.folders import check_run, locked
from multihop.data.jsonl import append_row, read_rows
from multihop.runtime.parallel import fan_out_chunks

from .program import CoopRAG

if TYPE_CHECKING:  # the trainer's module imports sentence-transformers' trainer: loaded when training only
    from multihop.retrievers.finetune import TrainConfig, TrainingSample

ALPHA_FROM = ("sub_questions", "chain")  # what |S| counts in α = log(1 + |S|): Eq. 6, or Table 19's chain length
NEGATIVES = 16  # random negatives kept per question, one drawn each epoch (paper)
logger = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class TrainingQuestion:
    """One training question: its query (the question, or its unrolled form U), its supporting paragraphs, its other
    paragraphs (distractors), paragraphs of other questions (random negatives; ``paper`` only) and |S| for α."""

    query: str
    positives: tuple[str, ...]
    distractors: tuple[str, ...]
    negatives: tuple[str, ...]
    sub_questions: int


def check_alpha_from(alpha_from: str, recipe: str = "paper") -> None:
    """Refuse, in one line, an ``alpha_from`` that is not one of :data:`ALPHA_FROM` or that ``recipe`` does not count
    (``released`` counts sub-questions only)."""
    if alpha_from not in ALPHA_FROM:
        raise ValueError(f"alpha_from must be one of {', '.join(ALPHA_FROM)}, not {alpha_from!r}")
    if recipe == "released" and alpha_from != "sub_questions":
        raise ValueError("the released recipe counts sub-questions only (doc.py subq_count); drop --alpha-from or use "
                         "--recipe paper")


def training_questions(examples: Iterable[dspy.Example], unrolled: dict[str, dict] | None = None, seed: int = 0,
                       alpha_from: str = "sub_questions", recipe: str = "paper") -> list[TrainingQuestion]:
    """The training questions of ``examples`` (the module docstring); ``unrolled`` maps a question id to its unrolling
    record (:func:`read_unrolled`). Repeated question ids are skipped, as are questions without a supporting
    paragraph and, under ``paper``, without a non-supporting one. ``released`` counts sub-questions only."""
    check_alpha_from(alpha_from, recipe)
    rng = random.Random(seed)
    examples = list({e.id: e for e in examples if e.get("paragraphs")}.values())
    pool = [(i, _render(p)) for i, e in enumerate(examples) for p in e.paragraphs]
    if len({i for i, _ in pool}) < 2:
        raise ValueError("fine-tuning needs at least two questions with paragraphs")
    questions, without = [], 0
    for i, example in enumerate(examples):
        gold = tuple(_render(p) for p in example.paragraphs if p.get("is_supporting"))
        others = tuple(_render(p) for p in example.paragraphs if not p.get("is_supporting"))
        if not gold or (not others and recipe == "paper"):
            continue
        record = (unrolled or {}).get(example.id, {})
        without += not record or bool(record.get("fallback"))
        steps = record.get("sub_questions" if alpha_from == "sub_questions" else "reasoning_chain") or []
        negatives = tuple(_draw_other(rng, pool, i, gold) for _ in range(NEGATIVES)) if recipe == "paper" else ()
        questions.append(TrainingQuestion(record.get("unrolled", example.question), gold, others, negatives,
                                          max(1, len(steps))))
    if not questions:
        raise ValueError("no question has both a supporting and a non-supporting paragraph" if recipe == "paper" else
                         "no question has a supporting paragraph")
    if without:
        logger.warning("%d of %d training questions have no unrolling (or one that fell back): each counts one step "
                       "(α = log 2), so they train with no difficulty weighting; unroll them first (`multihop cooprag "
                       "unroll`, then --unrolled)", without, len(questions))
    return questions


def read_unrolled(path: str | Path) -> dict[str, dict]:
    """An unrolling file: JSON lines ``{"id": ..., "unrolled": ..., "sub_questions": [...]}`` (as ``multihop cooprag
    unroll`` writes; ``sub_questions`` is optional), by question id."""
    out = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                record = json.loads(line)
                if not isinstance(record["unrolled"], str):
                    raise TypeError("unrolled must be a string")
                out[str(record["id"])] = record
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: expected {{\"id\", \"unrolled\"}} JSON, got {line[:80]!r}") from exc
    return out


def training_batches(questions: Sequence[TrainingQuestion], config: TrainConfig) -> list[list[TrainingSample]]:
    """The batches of ``config.epochs`` epochs of samples of ``questions`` under ``config.recipe`` (the module
    docstring), drawn with ``config.seed``."""
    rng = random.Random(config.seed)
    size, batches = config.batch_size, []
    released = config.recipe == "released"
    pool = list(dict.fromkeys(text for q in questions for text in (*q.positives, *q.distractors))) if released else []
    horizon = len(questions) // size * config.epochs if released else None  # where the released schedule reaches 0
    for _ in range(config.epochs):
        samples = _released_epoch(questions, pool, rng) if released else _paper_epoch(questions, rng)
        batches += [samples[i : i + size] for i in range(0, len(samples) - size + 1, size)]
        if horizon is not None and len(batches) >= horizon:
            break
    batches = batches[:horizon]
    if not batches:
        raise ValueError(f"{len(questions)} questions make no batch of {size}")
    return batches


def fine_tune(questions: Sequence[TrainingQuestion], out_dir: str | Path, config: TrainConfig) -> Path:
    """Fine-tune ``config.encoder`` on :func:`training_batches` of ``questions`` into ``out_dir``
    (:func:`multihop.retrievers.finetune.train`: resumable, a sentence-transformers folder with its stamp)."""
    from multihop.retrievers.finetune import train

    return train(training_batches(questions, config), out_dir, config, questions=len(questions),
                 epoch_steps=len(questions) // config.batch_size)  # released: its schedule's epoch, in questions


def _paper_epoch(questions: Sequence[TrainingQuestion], rng: random.Random) -> list[TrainingSample]:
    from multihop.retrievers.finetune import TrainingSample

    order = list(questions)
    rng.shuffle(order)
    return [TrainingSample(q.query, (rng.choice(q.positives), rng.choice(q.distractors), rng.choice(q.negatives)),
                           q.sub_questions, q.positives) for q in order]


def _released_epoch(questions: Sequence[TrainingQuestion], pool: list[str],
                    rng: random.Random) -> list[TrainingSample]:
    from multihop.retrievers.finetune import TrainingSample

    samples = []
    for q in questions:
        k = len(q.positives)
        negatives = rng.sample(q.distractors, k) if k <= len(q.distractors) else rng.sample(pool, k)
        samples += [TrainingSample(q.query, (p, n), q.sub_questions)
                    for p, n in zip(q.positives, negatives, strict=True)]
    rng.shuffle(samples)
    return samples


def _render(paragraph: dict) -> str:
    return Passage.make(paragraph["title"], paragraph["text"]).render()


def _draw_other(rng: random.Random, pool: list[tuple[int, str]], question: int, gold: tuple[str, ...]) -> str:
    while True:
        owner, text = rng.choice(pool)
        if owner != question and text not in gold:
            return text
