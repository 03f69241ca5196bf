"""CoopRAG benchmark (seed 000, §4.2–4.6): unrolling-augmented retrieval and end-to-end QA on a real dev set.

    python benchmarks/cooprag.py [--data FILE] [--limit 20] [--lm local:smollm2 | --lm openai/<model> --api-base URL]

The corpus is the union of the questions' paragraphs (IRCoT style), indexed once (cached under ``MULTIHOP_HOME``) with
MPNet (CoopRAG's unrolling markers added as special tokens) and the token states RaLa Eq. 4 reads, twice: pooled by
[CLS] (Eq. 2, CoopRAG's own index) and by mean (the model's own pooling).

Table 1 (Tables 7, 9 and 16 of the paper, in small): Recall@2/5 of three queries — the raw question, the unrolled query
U = Q ‖ S ‖ R (Eq. 1) with ``<UNCERTAIN>``, and U from the unrolling without it (§4.6) — each against both dense
first stages alone and reranked by RaLa Eq. 4 (top-``n`` → top-5). The unrollings come from ``--lm`` and are kept in
``--out`` as ``multihop cooprag unroll`` writes them (a rerun resumes); the share that fell back to the raw question
is reported.

Table 2: EM/F1/Acc, Recall, LLM calls, tokens and seconds per question of SingleStepRAG, CoopRAG (three-call,
unified, and with App. H.4's KeyExtract for up to ``--key-extract-rounds`` rounds, Table 13) and the paper's multi-step
baseline IRCoT (Tables 12-13; its paper's step and paragraph caps, k = 5 as every row) with the same retriever
(CoopRAG's: MPNet [CLS] + RaLa Eq. 4) and the same LM; stages that write only the answer are capped at
``--answer-tokens``, the others at ``--max-tokens`` (a small local model that rambles then costs less time). Results are
saved under ``--out`` per program and a rerun resumes them. With the 135M local model the QA numbers are low in absolute
terms (it rarely writes a parsable unrolling, so CoopRAG mostly falls back to the raw question); ``--lm`` with an
OpenAI-compatible ``--api-base`` runs the same script against a served model."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from multihop.benchmarks.common import baseline_rows, cached_retriever
from multihop.data.jsonl import read_rows
from multihop.data.loaders import questions_with_corpus
from multihop.data.question_sets import question_file
from multihop.evaluation.metrics import recall_at_k
from multihop.evaluation.runner import evaluate, render_table
from multihop.lm.options import LMOptions
from multihop.programs import CoopRAG, SingleStepRAG
from multihop.programs.budget import Budget
from multihop.programs.cooprag.training import unroll_questions
from multihop.retrievers import DenseRetriever, RaLa, Retriever

console = Console(width=160)
ANSWER_STAGES = {"answer", "reason"}  # stages whose output is the short answer alone get --answer-tokens


def unrolled_queries(examples, uncertainty_mask: bool, out: Path) -> tuple[list[str], float, float | None]:
    """The query U of every question (from the resumable unrolling file ``out``, as ``multihop cooprag unroll``
    writes it), the share that fell back to the question, and s/question over the unrollings made in this run."""
    done = len(read_rows(out))
    start = time.perf_counter()
    rows = unroll_questions(CoopRAG(uncertainty_mask=uncertainty_mask, rerank=None), examples, out)
    made = len(rows) - done
    seconds = (time.perf_counter() - start) / made if made else None
    fallbacks = np.mean([rows[example.id]["fallback"] for example in examples])
    return [rows[example.id]["unrolled"] for example in examples], float(fallbacks), seconds


def recall(retriever, queries: list[str], examples, k: int) -> float:
    values = [recall_at_k(retriever(query, k=5).ids, example.gold_passage_ids, k)
              for query, example in zip(queries, examples, strict=True)]
    values = [v for v in values if v is not None]
    return 100 * float(np.mean(values))


def retrieval_table(examples, firsts: dict[str, DenseRetriever], n: int, out: Path) -> Table:
    queries = {"raw question": ([e.question for e in examples], 0.0, None)}
    queries["unrolled U, with <UNCERTAIN>"] = unrolled_queries(examples, True, out / "unrolled.jsonl")
    queries["unrolled U, without <UNCERTAIN>"] = unrolled_queries(examples, False, out / "unrolled-no-mask.jsonl")
    passages = len(next(iter(firsts.values())).corpus)
    table = Table(title=f"Recall of the query kinds ({len(examples)} questions, {passages} passages)")
    for column in ("query", "retriever", "R@2", "R@5", "fallbacks %", "unrolling s/q"):
        table.add_column(column, justify="left" if column in ("query", "retriever") else "right")
    retrievers = [pair for name, dense in firsts.items()
                  for pair in ((f"dense MPNet {name}", dense),
                               (f"MPNet {name} + RaLa Eq. 4 (top-{n})", Retriever(dense, RaLa("eq4"), n=n)))]
    for name, (texts, fallbacks, seconds) in queries.items():
        for label, retriever in retrievers:
            table.add_row(name, label, f"{recall(retriever, texts, examples, 2):.1f}",
                          f"{recall(retriever, texts, examples, 5):.1f}", f"{100 * fallbacks:.0f}",
                          f"{seconds:.1f}" if seconds is not None else "-")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="musique", help="question file or dataset name (default: MuSiQue dev)")
    parser.add_argument("--limit", type=int, default=20, help="questions to use")
    LMOptions.add_arguments(parser, max_tokens=256)  # the generation cap of the chain-writing stages
    parser.add_argument("--answer-tokens", type=int, default=64, help="generation cap of the answer-only stages")
    parser.add_argument("--n", type=int, default=20, help="first-stage passages RaLa reranks")
    parser.add_argument("--threads", type=int, default=1, help="questions at once (for served LMs)")
    parser.add_argument("--key-extract-rounds", type=int, default=3, help="KeyExtract rounds of its row (0: no row)")
    parser.add_argument("--out", default="runs/bench-cooprag", help="evaluation folders (a rerun resumes)")
    args = parser.parse_args()

    data = question_file(args.data)
    examples, corpus = questions_with_corpus(data, limit=args.limit)
    firsts = {pooling: cached_retriever(corpus, token_layers=(), special_tokens=CoopRAG.special_tokens,
                                        pooling=pooling) for pooling in (CoopRAG.index_pooling, "mean")}
    rala = Retriever(firsts[CoopRAG.index_pooling], RaLa("eq4"), n=args.n, k=5)
    options = LMOptions.from_args(args)
    lm = options.configure()
    console.print(f"{len(examples)} questions from {Path(data).name}, {len(corpus)} passages, LM {lm.model}")

    out = Path(args.out) / f"{Path(str(lm.model)).name}-{corpus.checksum()[:8]}"  # resumes only the same setting
    programs = {"SingleStepRAG (MPNet + RaLa)": SingleStepRAG(retriever=rala, k=5),
                "CoopRAG": CoopRAG(retriever=rala, n=args.n),
                "CoopRAG unified (App. D.2)": CoopRAG(retriever=rala, n=args.n, unified=True)}
    if args.key_extract_rounds:
        programs["CoopRAG + KeyExtract (App. H.4)"] = CoopRAG(retriever=rala, n=args.n,
                                                              key_extract_rounds=args.key_extract_rounds)
    # Tables 12-13's multi-step baseline, IRCoT (its paper's caps) over the same retriever (MPNet [CLS] + RaLa: their
    # "IRCoT + CoopRAG" retrieval), k = 5 as every row
    programs.update({name: program for name, _, program in baseline_rows("CoopRAG", rala, Budget(mode="paper"), k=5)})
    short = options.make(max_tokens=args.answer_tokens)
    for program in programs.values():
        for stage in ANSWER_STAGES & {name.split(".")[0] for name in program.stage_names()}:
            program.set_stage_lm(stage, short)
    summaries = {name: evaluate(program, examples, out / name.split(" (")[0].replace(" ", "_"), threads=args.threads,
                                name=name) for name, program in programs.items()}
    qa = render_table(summaries, title=f"QA on {Path(data).name} with {lm.model} (same retriever and LM)")
    console.print(retrieval_table(examples, firsts, args.n, out))
    console.print(qa)


if __name__ == "__main__":
    main()
