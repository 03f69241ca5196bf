"""HANRAG benchmark (seed 003, §5–6, App. C and E): HANRAG vs the paper's "No retrieval" and "Single-step Approach"
rows vs each ablation vs HANRAG-Oracle, and with ``--revelator`` the LoRA Revelator, on the dev sets in
``MULTIHOP_DATA`` with one retriever (BM25, the paper's) and one LM for every row.

    python benchmarks/hanrag.py [--datasets musique,2wiki,hotpotqa] [--limit 5] [--revelator DIR] [--per-stage 8]
        [--lm local:smollm2 | --lm openai/<model> --api-base URL] [--judge-lm SPEC]

Each dataset's corpus is the union of its dev questions' paragraphs (IRCoT style), indexed with BM25; every retrieving
row reads the top k = 5. Reported per row: the paper's EM, F1, Acc (the gold answer contained; a gold answer joined by
"&&" scores the share of its parts, averaged per question: our reading of §6) and Steps (retrieval–generation cycles,
§5), Acc by the LLM judge (with ``--judge-lm``), R@2/R@5 over the passages the generator read, LLM calls, the route
taken (shares), every stage's fallbacks per question (its format failures) and seconds per question. HANRAG-Oracle
follows each question's gold route (:func:`multihop.programs.hanrag.gold_route`: our labels, comparisons compound, so
its Steps are not the paper's Tables 3–5 setting, where whole multi-hop datasets are complex). Each row is an
evaluation folder under ``--out``, so a rerun resumes; each row has its own cache entries (a rollout id per row).

The paper's other baselines (Table 2): IRCoT (top k = 5 a step, its paper's caps) and Adaptive-RAG, whose three
strategies are the "No retrieval", "Single-step Approach" and IRCoT rows: with ``--classifier`` (``multihop
adaptiverag labels`` on train questions, then ``multihop adaptiverag train``) the row "Adaptive-RAG" routes each
question by it; "Adaptive-RAG w/ Oracle" (Jeong et al.'s oracle row) follows each question's silver label, taken
from those three rows' results (the simplest that answered exactly, else the multi-hop bias C) once they have all
run, in a folder keyed by the labels.

The Revelator (``--revelator``, a ``multihop distill`` folder trained on ``multihop hanrag revelator-data`` rows):
"HANRAG (LoRA Revelator)" runs the stages it was trained for on it, the generator on the base LM (§5). Before the
rows, the per-stage table compares the base LM with the Revelator on the gold targets of held-apart dev questions (at
most ``--per-stage`` per stage and dataset): the share of unparsable replies and the stage score (router label
accuracy, decomposition overlap, seed-question F1, relevance and ending verdict accuracy), then the router's accuracy
per gold class (App. C).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter

import dspy
from rich.console import Console
from rich.table import Table

from multihop.benchmarks.common import baseline_rows, evaluate_rows, run_folder
from multihop.benchmarks.students import per_stage, stage_table
from multihop.data.jsonl import read_rows
from multihop.data.loaders import load_questions, questions_with_corpus
from multihop.data.question_sets import DATASETS
from multihop.evaluation.runner import render_table
from multihop.lm.options import LMOptions
from multihop.optimize.gold import gold_targets
from multihop.optimize.students import trained_stages
from multihop.programs import HANRAG, AdaptiveRAG, NoRetrieval, SingleStepRAG
from multihop.programs.baselines.adaptive_rag.complexity import bias_label, silver_label
from multihop.programs.baselines.adaptive_rag.labels import with_gold_complexity
from multihop.programs.budget import Budget
from multihop.programs.hanrag import REVELATOR_STAGES
from multihop.programs.hanrag.routes import route_of
from multihop.retrievers import BM25Retriever

console = Console(width=200)
K = 5  # §5: the single-step approach's top 5 (HANRAG's own k is not given)
ABLATIONS = {  # App. E's ablation table
    "HANRAG": {},
    "-Relevance discriminator": {"relevance_filter": False},
    "-Ending discriminator": {"ending_judge": False},
    "-Refiner": {"refiner": False},
}
STRATEGY_ROWS = {"A": "no-retrieval", "B": "single-step", "C": "baseline-ircot"}  # Adaptive-RAG's strategies' rows
FALLBACKS = ("router", "decompose", "refine", "relevance", "ending", "aggregate", "answer", "direct_answer")
COLUMNS = [("llm_eval", "Acc (LLM)"), ("em", "EM"), ("f1", "F1"), ("acc", "Acc"), ("steps", "Steps"),
           ("recall@2", "R@2"), ("recall@5", "R@5"), ("llm_calls", "LLM calls/q"),
           *((f"route.{route}", f"{route[:6]} %") for route in ("straightforward", "single-step", "compound",
                                                                 "complex")),
           ("all_rejected", "all rej./q"), *((f"{stage}.fallback", f"{stage[:6]} unp./q") for stage in FALLBACKS),
           ("seconds", "s/q")]


def adaptive_rag(retriever, **settings) -> AdaptiveRAG:
    """Adaptive-RAG whose strategies are this benchmark's rows: No retrieval, the single-step approach (top ``K``) and
    IRCoT (top ``K`` a step, its paper's step cap), as HANRAG's Table 2 runs them on one retriever."""
    return AdaptiveRAG(retriever=retriever, k=K, single_step_k=K, **settings)


def oracle_labels(out, examples) -> dict[str, str]:
    """Each question's silver label from the rows of Adaptive-RAG's three strategies (§3.2's rule: the simplest whose
    answer is exact, else its dataset's bias, C here), read from their evaluation folders under ``out``; a question a
    strategy's row lacks or could not answer (an error row) is refused, never taken as a wrong answer."""
    results = {label: read_rows(out / folder / "results.jsonl") for label, folder in STRATEGY_ROWS.items()}
    labels = {}
    for example in examples:
        rows = {label: results[label].get(str(example.id)) for label in STRATEGY_ROWS}
        unfinished = [STRATEGY_ROWS[label] for label, row in rows.items() if not row or row.get("error")]
        if unfinished:
            raise ValueError(f"question {example.id} has no answer in the {', '.join(unfinished)} row(s): run "
                             "them to the end (a rerun resumes) before Adaptive-RAG's oracle row")
        correct = {label: bool(row["metrics"].get("em")) for label, row in rows.items()}
        labels[str(example.id)] = silver_label(correct, bias_label(example))[0]
    return labels


def oracle_folder(labels: dict[str, str]) -> str:
    """The oracle row's folder, keyed by its labels: labels that change (a strategy row rerun) are another run."""
    digest = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:8]
    return f"adaptive-rag-oracle-{digest}"


def row_programs(retriever, revelator=None, classifier: str | None = None) -> list[tuple[str, str, dspy.Module]]:
    """(row name, evaluation folder, program) of every row; the Revelator's LM has a rollout id of its own.
    HANRAG-Oracle reads each question's gold route through evaluation (``HANRAG.prepare_examples``); Adaptive-RAG
    runs with ``classifier`` (a ``multihop adaptiverag train`` folder) when given."""
    rows = [("No retrieval", "no-retrieval", NoRetrieval()),
            ("Single-step Approach", "single-step", SingleStepRAG(retriever=retriever, k=K))]
    for number, (name, switches) in enumerate(ABLATIONS.items(), 1):
        rows.append((name, f"ablation{number}", HANRAG(retriever=retriever, k=K, **switches)))
    rows.append(("HANRAG-Oracle", "oracle", HANRAG(retriever=retriever, k=K, route="oracle")))
    rows += baseline_rows("HANRAG", retriever, Budget(mode="paper"), skip=("NoRetrieval", "SingleStepRAG",
                                                                         "AdaptiveRAG"), k=K)
    if classifier is not None:
        rows.append(("Adaptive-RAG", "adaptive-rag", adaptive_rag(retriever, classifier=classifier)))
    if revelator is not None:
        lm, weights, folder = revelator
        program = HANRAG(retriever=retriever, k=K)
        for stage in trained_stages(program, folder):
            program.set_stage_lm(stage, lm.copy(rollout_id=99))
        rows.append(("HANRAG (LoRA Revelator)", f"revelator-{weights}", program))
    return rows


def router_by_class(examples: list, lms: dict[str, dspy.LM], cap: int, adapter: dspy.Adapter) -> Table:
    """The router's accuracy per gold class on ``examples``' router targets (at most ``cap`` a class), per LM, as
    the program routes (an unparsable reply, after its retry, takes the complex path)."""
    program = HANRAG(route=None)
    seen, right = Counter(), Counter()
    for target in gold_targets(program, examples):
        gold = route_of(target.outputs.get("route"))
        if target.stage != "router" or seen[gold] >= cap:
            continue
        seen[gold] += 1
        for model, lm in lms.items():
            with dspy.context(lm=lm, adapter=adapter):
                right[(model, gold)] += program.choose_route(target.inputs["question"], None) == gold
    table = Table(title="Router accuracy per gold class (App. C's measure, our labels), held-apart dev questions")
    for column in ("class", "n", *lms):
        table.add_column(column, justify="left" if column == "class" else "right")
    for gold, n in seen.items():
        table.add_row(gold, str(n), *(f"{100 * right[(model, gold)] / n:.1f}" for model in lms))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="musique,2wiki,hotpotqa", help=f"comma-separated: {', '.join(DATASETS)}")
    parser.add_argument("--limit", type=int, default=5, help="questions per dataset")
    LMOptions.add_arguments(parser, max_tokens=128)  # the generation cap of every stage
    parser.add_argument("--judge-lm", default=None, help="LM for Acc by an LLM judge; none: the column is left out")
    parser.add_argument("--revelator", default=None, help="a `multihop distill` folder trained on Revelator rows")
    parser.add_argument("--classifier", default=None, help="an Adaptive-RAG classifier (`multihop adaptiverag train`) "
                        "for the Adaptive-RAG row")
    parser.add_argument("--per-stage", type=int, default=8, help="gold targets per stage and dataset (with "
                        "--revelator); 0 skips the per-stage tables")
    parser.add_argument("--rows", default=None, help="comma-separated row numbers to run (default: all)")
    parser.add_argument("--threads", type=int, default=1, help="questions at once (for served LMs)")
    parser.add_argument("--out", default="runs/bench-hanrag", help="evaluation folders (a rerun resumes)")
    args = parser.parse_args()

    options = LMOptions.from_args(args)
    lm = options.configure()
    judge = options.make(args.judge_lm) if args.judge_lm else None
    datasets = args.datasets.split(",")
    revelator = None
    if args.revelator:
        revelator = (*options.student(args.revelator), args.revelator)
        if args.per_stage:
            program, adapter = HANRAG(), options.default_adapter()
            stages = {stage: lm for stage in program.stage_names()}
            lms = {"base": stages, "student": {**stages, **dict.fromkeys(REVELATOR_STAGES, revelator[0])}}
            scored = {("HANRAG", dataset): per_stage(program, load_questions(dataset), lms, args.per_stage, adapter)
                      for dataset in datasets}
            console.print(stage_table({key: rows for key, rows in scored.items() if rows}))
            dev = [example for dataset in datasets for example in load_questions(dataset)]
            console.print(router_by_class(dev, {"base": lm, "Revelator": revelator[0]}, args.per_stage, adapter))
    for dataset in datasets:
        examples, corpus = questions_with_corpus(dataset, limit=args.limit)
        retriever = BM25Retriever(corpus)
        console.print(f"{dataset}: {len(examples)} questions, {len(corpus)} passages, LM {lm.model}")
        out = run_folder(args.out, lm, dataset, corpus)
        rows = row_programs(retriever, revelator, args.classifier)
        summaries = evaluate_rows(rows, examples, out, lm, judge, args.threads, args.rows)
        if all((out / folder / "results.jsonl").is_file() for folder in STRATEGY_ROWS.values()):
            labels = oracle_labels(out, examples)
            oracle = [("Adaptive-RAG w/ Oracle", oracle_folder(labels), adaptive_rag(retriever, route="oracle"))]
            labelled = with_gold_complexity(examples, labels)
            summaries.update(evaluate_rows(oracle, labelled, out, lm, judge, args.threads, start=len(rows) + 1))
        title = f"HANRAG on {dataset} ({len(examples)} questions), LM {lm.model}, BM25 top {K}"
        console.print(render_table(summaries, title=title, columns=COLUMNS, label="row"))


if __name__ == "__main__":
    main()
