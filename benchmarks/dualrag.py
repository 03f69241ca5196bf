"""DualRAG benchmark (seed 001, §4): DualRAG vs ``SingleStepRAG`` (the paper's NativeRAG) vs each ablation of Tables
3, 14 and 15, the iteration cap of Table 12, and with ``--student`` DualRAG-FT and Table 4's per-role rows, on the dev
sets in ``MULTIHOP_DATA`` with one retriever and one LM for every row.

    python benchmarks/dualrag.py [--datasets musique,2wiki,hotpotqa] [--limit 5] [--iterations 0,1,2]
        [--ablations independent|cumulative] [--student DIR]
        [--lm local:smollm2 | --lm openai/<model> --api-base URL] [--judge-lm SPEC]

Each dataset's corpus is the union of its dev questions' paragraphs (IRCoT style, the paper's corpus for 2Wiki and
MuSiQue), indexed once with MPNet (cached under ``MULTIHOP_HOME``); every DualRAG row reranks with MaxSim over the
same encoder (the paper's bge-reranker does not ship offline), n = 50 → k = 10 per entity. NativeRAG gets the same
retrieval, as the paper gives every baseline (§4.3, App. H.4: top 50 → reranker → top 10): "SingleStepRAG (NativeRAG)"
reranks the question's first-stage top n to k with DualRAG's reranker, n and k; "SingleStepRAG (NativeRAG, w/o
rerank)" reads the first stage's top k alone (ours, to show the reranker's share). The paper's other baselines follow
as the last rows (``Method(paper_baselines=...)``: Direct, IRCoT, MetaRAG, GenGround, and FLARE of App. H.5), as §4.3
runs them: at most 5 iteration steps each (IRCoT's steps, MetaRAG's and GenGround's rounds, FLARE's sentences) and
the same top 50 → reranker → top 10. With k = 10, IRCoT's
15-paragraph cap (its paper's) is full after its first sentence's retrieval.

Reported per row: Acc by the LLM judge (with ``--judge-lm``), EM, Acc (the gold answer contained), F1, R@2 and R@5 over
the passages behind the outline, retrieval iterations, LLM calls, output tokens per module (Tables 7–8: Reasoner, Entity
Identifier, Knowledge Summarizer, answer), searches sent, the unparsable replies of each stage per question (its format
failures; the Entity Identifier's fallback also counts parsed replies that name no entity) and seconds per question.
"w/o EI" summarizes each title of the round's documents on its own, so its summarizer calls and tokens grow with the
titles found (up to k a round). Each row is an evaluation folder under ``--out``, so a rerun resumes; each row has its
own cache entries (a rollout id per row), so its tokens and seconds are its own.

Table 3's ablations (``--ablations``): §4.5 says it removes the components "incrementally" while describing each row as
one change, and its numbers do not fall row by row (HotpotQA Acc 68.7 → 69.2 → 69.5; MuSiQue 56.1 → 54.2 → 58.1).
``independent`` (the default) removes one component a row from the full system (w/o R, w/o EI, w/o KO), so each row
measures that component alone; ``cumulative`` removes one more a row in the paper's order (w/o R; w/o R + EI;
w/o R + EI + KO). Tables 14 (w/o KO*) and 15 (w/o rerank) are one change from the full system either way.

DualRAG-FT (Table 4): ``--student`` is a ``multihop distill`` folder trained on DualRAG rows (``multihop dualrag sft``,
from a teacher or ``--gold``). "DualRAG-FT" runs the Reasoner, Entity Identifier and Knowledge Summarizer on it (the
answer stays on the base LM, as the paper fine-tunes those three); "w/o R-FT", "w/o EI-FT", "w/o KS-FT" put one of them
back on the base LM; "w/o FT" is the plain DualRAG row.
"""

from __future__ import annotations

import argparse

import dspy
from rich.console import Console

from multihop.benchmarks.common import baseline_rows, cached_retriever, evaluate_rows, run_folder
from multihop.data.loaders import questions_with_corpus
from multihop.data.question_sets import DATASETS
from multihop.evaluation.runner import render_table
from multihop.lm.options import LMOptions
from multihop.programs import DualRAG, SingleStepRAG
from multihop.programs.budget import Budget

console = Console(width=200)
K = 10  # §4.3: the top-10 documents after reranking the top-50
TABLE_3 = {  # §4.5's order: the Reasoner, the Entity Identifier, the Knowledge Outline
    "R": ("IRCoT trigger", {"reasoner": False}),
    "EI": ("thought as query", {"entity_identifier": False}),
    "KO": ("raw documents", {"knowledge_outline": False}),
}
ONE_CHANGE = {  # Table 14, Table 15
    "w/o KO* (flat summaries)": {"outline_structure": False},
    "w/o rerank": {"rerank": None},
}
ABLATION_READINGS = ("independent", "cumulative")
ROLES = {"R": "reason", "EI": "identify", "KS": "summarize"}  # Table 4's fine-tuned roles
COLUMNS = [("llm_eval", "Acc (LLM)"), ("em", "EM"), ("acc", "Acc"), ("f1", "F1"), ("recall@2", "R@2"),
           ("recall@5", "R@5"), ("retrieval_iterations", "iter/q"), ("llm_calls", "LLM calls/q"),
           ("completion_tokens.reason", "R out tok"), ("completion_tokens.identify", "EI out tok"),
           ("completion_tokens.summarize", "KS out tok"), ("completion_tokens.answer", "answer out tok"),
           ("queries", "queries/q"), ("reason.fallback", "R unparsed/q"), ("identify.fallback", "EI unparsed/q"),
           ("entity_fallback", "EI fallback/q"), ("summarize.fallback", "KS unparsed/q"),
           ("answer.fallback", "answer unparsed/q"), ("seconds", "s/q")]


def ablations(reading: str = "independent") -> dict[str, dict]:
    """Row name → DualRAG switches of the ablation rows, the full system first: Table 3's rows one component each
    (``independent``) or one more each in §4.5's order (``cumulative``), then Tables 14 and 15."""
    if reading not in ABLATION_READINGS:
        raise ValueError(f"--ablations is one of {', '.join(ABLATION_READINGS)}, not {reading!r}")
    rows, removed, switches = {"DualRAG": {}}, [], {}
    for component, (what, off) in TABLE_3.items():
        if reading == "cumulative":
            removed, switches = [*removed, component], {**switches, **off}
        else:
            removed, switches = [component], off
        rows[f"w/o {' + '.join(removed)} ({what})"] = switches
    return {**rows, **ONE_CHANGE}


def native_rag(retriever, dualrag: DualRAG) -> list[tuple[str, str, dspy.Module]]:
    """NativeRAG as App. H.4 runs every baseline, with DualRAG's reranker, n and k; and the first stage's top k alone
    (labelled: the reranker's share)."""
    reranked = SingleStepRAG(retriever=retriever, k=dualrag.k, n=dualrag.n, rerank=dualrag.rerank)
    return [("SingleStepRAG (NativeRAG)", f"single-step-{dualrag.rerank}", reranked),
            ("SingleStepRAG (NativeRAG, w/o rerank)", "single-step-first-stage",
             SingleStepRAG(retriever=retriever, k=dualrag.k))]


def row_programs(retriever, iterations: list[int], student=None, reading: str = "independent"
                 ) -> list[tuple[str, str, dspy.Module]]:
    """(row name, evaluation folder, program) of every row; a student row's student LM has a rollout id of its own,
    so no row replays another's student calls from the cache. ``reading`` is Table 3's (:func:`ablations`); a row
    of both readings (the full system, w/o R, Tables 14–15) resumes in the same folder under either."""
    dualrag = DualRAG(retriever=retriever, k=K)
    rows = native_rag(retriever, dualrag)
    independent = [*ablations("independent").values()]
    for number, (name, switches) in enumerate(ablations(reading).items(), 1):
        folder = f"ablation{independent.index(switches) + 1}" if switches in independent else f"cumulative{number}"
        rows.append((name, folder, DualRAG(retriever=retriever, k=K, **switches)))
    for cap in iterations:
        rows.append((f"max_iterations = {cap} (Table 12)", f"iterations{cap}",
                     DualRAG(retriever=retriever, k=K, max_iterations=cap)))
    if student is not None:
        lm, weights = student
        for number, (name, base_role) in enumerate([("DualRAG-FT", None), *((f"w/o {role}-FT", role)
                                                                           for role in ROLES)], 1):
            program = DualRAG(retriever=retriever, k=K)
            for role, stage in ROLES.items():
                if role != base_role:
                    program.set_stage_lm(stage, lm.copy(rollout_id=number))
            rows.append((name, f"student-{weights}-{base_role or 'all'}", program))
    # §4.3: every iterative baseline at most 5 iteration steps, on the same top 50 → reranker → top 10
    return rows + baseline_rows("DualRAG", retriever, Budget(k=dualrag.k, max_iterations=5), skip=("SingleStepRAG",),
                                rerank=dualrag.rerank, n=dualrag.n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="musique,2wiki,hotpotqa", help=f"comma-separated: {', '.join(DATASETS)}")
    parser.add_argument("--limit", type=int, default=5, help="questions per dataset")
    LMOptions.add_arguments(parser, max_tokens=160)  # the generation cap of every stage
    parser.add_argument("--judge-lm", default=None, help="LM for Acc by an LLM judge; none: the column is left out")
    parser.add_argument("--iterations", default="", help="comma-separated caps for Table 12's rows (e.g. 0,1,2)")
    parser.add_argument("--ablations", default="independent", choices=ABLATION_READINGS,
                        help="Table 3's rows: one component removed a row (independent, the default) or one more a "
                        "row in §4.5's order (cumulative)")
    parser.add_argument("--student", default=None, help="a `multihop distill` folder trained on DualRAG rows")
    parser.add_argument("--rows", default=None, help="comma-separated row numbers to run (default: all)")
    parser.add_argument("--threads", type=int, default=1, help="questions at once (for served LMs)")
    parser.add_argument("--out", default="runs/bench-dualrag", help="evaluation folders (a rerun resumes)")
    args = parser.parse_args()

    options = LMOptions.from_args(args)
    lm = options.configure()
    judge = options.make(args.judge_lm) if args.judge_lm else None
    student = None
    if args.student:
        student = options.student(args.student)
    iterations = [int(cap) for cap in args.iterations.split(",") if cap.strip()]
    for dataset in args.datasets.split(","):
        examples, corpus = questions_with_corpus(dataset, limit=args.limit)
        retriever = cached_retriever(corpus, token_layers=())
        console.print(f"{dataset}: {len(examples)} questions, {len(corpus)} passages, LM {lm.model}")
        out = run_folder(args.out, lm, dataset, corpus)
        rows = row_programs(retriever, iterations, student, args.ablations)
        summaries = evaluate_rows(rows, examples, out, lm, judge, args.threads, args.rows)
        title = f"DualRAG on {dataset} ({len(examples)} questions), LM {lm.model}"
        console.print(render_table(summaries, title=title, columns=COLUMNS, label="row"))


if __name__ == "__main__":
    main()
