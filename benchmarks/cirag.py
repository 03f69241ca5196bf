"""CIRAG benchmark (seed 004, §4, Tables 1–3, Figs. 6 and 8): CIRAG vs ``SingleStepRAG`` (the paper's NativeRAG) vs the
reranker and granularity ablations, optionally the online variant, iteration caps and the distilled integrator, on the
dev sets in ``MULTIHOP_DATA`` with one retriever and one LM for every row.

    python benchmarks/cirag.py [--datasets musique,2wiki,hotpotqa] [--limit 5] [--iterations 1,2] [--online]
        [--triples 10,50,100] [--student DIR] [--lm local:smollm2 | --lm openai/<model> --api-base URL]
        [--judge-lm SPEC]

Each dataset's corpus is the union of its dev questions' paragraphs (IRCoT style), indexed once with MPNet; its triples
are extracted once into the offline cache (``multihop cirag extract``'s, under ``--out``; the paper's default) and every
cached row reads it; ``--online`` adds the row that extracts at every round (Fig. 6). Reported per row: EM and F1 (the
paper's metrics), Acc, Acc by the LLM judge (with ``--judge-lm``), R@2/R@5 over the core documents, iterations, LLM
calls split into extraction / the rest, the share of questions each granularity answered (Figs. 3, 5), the core triples
that matched no candidate and the distiller's fallbacks per question, and seconds per question. ``--triples`` adds one
row per number of candidate triples N (Fig. 7 varies it from 10 to 100; the other rows keep N = 30). ``--student`` takes
a ``multihop distill`` folder trained on CIRAG's rows (``multihop trajectories --program CIRAG --gold``, or a teacher's)
and makes it the integrator of the main row "CIRAG (TD)" (§3.5's setting) and of the ablation, L, N and online rows, as
Tables 2–3 run them; "CIRAG w/o TD" keeps the base LM as integrator. A student ``multihop distill --preset cirag``
trained is the paper's, the integrator's alone (Eq. 8). One trained with ``--all-stages`` learnt our extract_entities /
extract_triples rows too: its main row is "CIRAG (TD, all-stages student)", and two more rows read a second cache it
extracted, "w/o TD, student extractor" and "CIRAG (TD, all-stages student), student extractor". The paper's baselines
follow as the last rows (``Method(paper_baselines=...)``: IRCoT, FLARE, MetaRAG, DualRAG; App. B.3 runs them on the same
retriever and LM, IRCoT and FLARE as DualRAG implements them; ours: CIRAG's K = 10 and L = 4 for each, the loop bound of
each, no reranker but DualRAG's own). Each row is an evaluation folder under ``--out``, so a rerun resumes. Not printed:
the paper's own numbers (GPT/Qwen-7B settings, another corpus: not comparable here)."""

from __future__ import annotations

import argparse

import dspy
from rich.console import Console

from multihop.benchmarks.common import baseline_rows, cached_retriever, evaluate_rows, run_folder
from multihop.data.loaders import questions_with_corpus
from multihop.data.question_sets import DATASETS
from multihop.evaluation.runner import render_table
from multihop.lm.options import LMOptions, served_student
from multihop.optimize.students import trained_stages
from multihop.programs import CIRAG, SingleStepRAG
from multihop.programs.budget import Budget
from multihop.programs.cirag.cache import build_cache

console = Console(width=200)
K = 10  # §4.3: the top-10 documents a round
INTEGRATOR = "integrate"  # the stage §3.5 distils (Eq. 8)
ABLATIONS = {  # Table 2's reranker row and Table 3's granularity rows, on the integrator of the main row
    "w/o reranker": {"reranker": False},
    "w/o Passage": {"granularities": ("triple", "sentence")},
    "w/o Triple": {"granularities": ("sentence", "passage")},
    "w/o Sentence + Passage": {"granularities": ("triple",)},
    "w/o Triple + Passage": {"granularities": ("sentence",)},
    "w/o Triple + Sentence": {"granularities": ("passage",)},
}
COLUMNS = [("llm_eval", "Acc (LLM)"), ("em", "EM"), ("f1", "F1"), ("acc", "Acc"), ("recall@2", "R@2"),
           ("recall@5", "R@5"), ("iterations", "iter/q"), ("llm_calls", "LLM calls/q"),
           ("extraction_calls", "extraction calls/q"), ("cache_misses", "cache misses/q"),
           *((f"answered.{level}", f"{level} %") for level in ("triple", "sentence", "passage", "top_k", "default")),
           ("core_unmatched", "unmatched core/q"), ("integrate.fallback", "integrate unp./q"), ("seconds", "s/q")]


def student_stages(student: str) -> list[str]:
    """The CIRAG stages a ``--student`` learnt: its ``multihop distill`` manifest's; a served student given without
    its folder, every stage."""
    _, folder = served_student(student)
    program = CIRAG()
    stages = trained_stages(program, folder) if folder is not None else program.stage_names()
    if INTEGRATOR not in stages:
        raise SystemExit(f"error: the student {student} learnt no {INTEGRATOR} rows (it learnt: "
                         f"{', '.join(stages) or 'no CIRAG stage'}); train it on CIRAG's integrate.jsonl")
    return stages


def all_stages(learnt: list[str]) -> bool:
    """Whether a student learnt more than the integrator (``multihop distill --all-stages``)."""
    return set(learnt) != {INTEGRATOR}


def row_programs(retriever, cache: str, iterations: list[int], online: bool, student=None,
                 student_cache: str | None = None, candidate_counts: list[int] = (),
                 learnt: list[str] = (INTEGRATOR,)) -> list[tuple]:
    """(row name, evaluation folder, program) of every row. The main row is "CIRAG" with the student as integrator
    (TD) when there is one, and the ablation, L, N (``candidate_counts``) and online rows use the main row's
    integrator, as Tables 2–3 do; "CIRAG w/o TD" is always the base integrator. A student that ``learnt`` more than
    the integrator is labelled the all-stages student, and its extractor rows read ``student_cache``."""
    lm, weights = student if student is not None else (None, "")
    suffix = f"-{weights}" if weights else ""
    td = "CIRAG (TD, all-stages student)" if all_stages(learnt) else "CIRAG (TD)"

    def cirag(triples: str | None = cache, distilled: bool = lm is not None, **switches) -> CIRAG:
        program = CIRAG(retriever=retriever, k=K, triple_cache=triples, **switches)
        if distilled:
            program.set_stage_lm(INTEGRATOR, lm)
        return program

    rows = [("SingleStepRAG (NativeRAG)", "single-step", SingleStepRAG(retriever=retriever, k=K)),
            ("CIRAG w/o TD (base integrator)", "base", cirag(distilled=False))]
    if lm is not None:
        rows.append((td, f"student{suffix}", cirag()))
    rows += [(name, f"ablation{number}{suffix}", cirag(**switches))
             for number, (name, switches) in enumerate(ABLATIONS.items(), 1)]
    rows += [(f"L = {cap} (Fig. 8)", f"iterations{cap}{suffix}", cirag(max_iterations=cap)) for cap in iterations]
    rows += [(f"N = {n} triples (Fig. 7)", f"triples{n}{suffix}", cirag(n_triples=n)) for n in candidate_counts]
    if online:
        rows.append(("CIRAG (online)", f"online{suffix}", cirag(triples=None)))
    if lm is not None and all_stages(learnt):
        rows += [("w/o TD, student extractor", f"student-extractor{suffix}", cirag(student_cache, distilled=False)),
                 (f"{td}, student extractor", f"student-both{suffix}", cirag(student_cache))]
    # App. B.3: the baselines on the same retriever and LM; ours: CIRAG's K = 10 and L = 4 for each
    return rows + baseline_rows("CIRAG", retriever, Budget(k=K, max_iterations=4), skip=("SingleStepRAG",))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="musique,2wiki,hotpotqa", help=f"comma-separated: {', '.join(DATASETS)}")
    parser.add_argument("--limit", type=int, default=5, help="questions per dataset")
    LMOptions.add_arguments(parser, max_tokens=512)  # the generation cap of every stage: a triple list is long
    parser.add_argument("--judge-lm", default=None, help="LM for Acc by an LLM judge; none: the column is left out")
    parser.add_argument("--iterations", default="", help="comma-separated caps L for Fig. 8's rows (e.g. 1,2)")
    parser.add_argument("--online", action="store_true", help="add the row that extracts at every round (Fig. 6)")
    parser.add_argument("--triples", default="", help="comma-separated numbers of candidate triples N for Fig. 7's "
                        "rows (e.g. 10,50,100; the other rows keep N = 30)")
    parser.add_argument("--student", default=None, help="a `multihop distill` folder trained on CIRAG's rows (the "
                        "integrator's, or with --all-stages the extractors' too)")
    parser.add_argument("--rows", default=None, help="comma-separated row numbers to run (default: all)")
    parser.add_argument("--out", default="runs/bench-cirag", help="evaluation folders and caches (a rerun resumes)")
    args = parser.parse_args()

    options = LMOptions.from_args(args)
    lm = options.configure()
    judge = options.make(args.judge_lm) if args.judge_lm else None
    student, learnt = None, [INTEGRATOR]
    if args.student:
        student, learnt = options.student(args.student), student_stages(args.student)
    iterations = [int(cap) for cap in args.iterations.split(",") if cap.strip()]
    triples = [int(n) for n in args.triples.split(",") if n.strip()]
    for dataset in args.datasets.split(","):
        examples, corpus = questions_with_corpus(dataset, limit=args.limit)
        retriever = cached_retriever(corpus)
        out = run_folder(args.out, lm, dataset, corpus)
        cache = out / "triple-cache"
        build_cache(corpus, cache, CIRAG().extract, extractor=str(lm.model))
        student_cache = None
        if student is not None and all_stages(learnt):  # it extracts a cache of its own
            student_cache = out / f"triple-cache-{student[1]}"
            with dspy.context(lm=student[0]):
                build_cache(corpus, student_cache, CIRAG().extract, extractor=f"{lm.model}+{student[1]}")
        console.print(f"{dataset}: {len(examples)} questions, {len(corpus)} passages (triples cached), LM {lm.model}")
        rows = row_programs(retriever, str(cache), iterations, args.online, student,
                            str(student_cache) if student_cache else None, triples, learnt)
        summaries = evaluate_rows(rows, examples, out, lm, judge, chosen=args.rows)
        title = f"CIRAG on {dataset} ({len(examples)} questions), LM {lm.model}, MPNet top {K}"
        console.print(render_table(summaries, title=title, columns=COLUMNS, label="row"))


if __name__ == "__main__":
    main()
