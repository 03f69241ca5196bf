"""ComposeRAG benchmark (seed 002, §6): the module ablation of Table 3, self-reflection (Fig. 5) and the simple-QA
path (Table 6) on real dev sets, with the same retriever and LM for every row, and the retrieval decision (Table 5).

    python benchmarks/composerag.py [--datasets musique,hotpotqa] [--limit 6] [--lm local:smollm2 |
        --lm openai/<model> --api-base URL] [--judge-lm SPEC]

Each dataset's corpus is the union of its questions' paragraphs (IRCoT style), indexed once with MPNet (cached under
``MULTIHOP_HOME``). The rows add the modules in the order of Table 3 (QR acts on failed verifications, so it comes after
AV), on the multi-hop pipeline without reflection and with the retrieval decision off in every row (it is Table 5's
module); then Table 6's simple-QA path in front of Table 3's last row (Table 6's "no" row is Table 3's all-modules row:
the same Hotpot numbers); then Table 5's decision on; then Fig. 5's curve: the default program (decision, the simple
path in front — §6.1's 0-reflection baseline is "a single pass through the multi-hop pipeline or an early exit via the
Simple QA pathway" — and reflection) with 0, 1, … ``--reflections`` rounds, the last being the default program. Table
5's "no" row matches no Table 3 row, so the paper ran it on a setting it does not name; ours is Table 3's all-modules
setting with the decision switched on (our reading). With ``--upgrade-lm``, Table 5's upgraded decision and
Table 4's rows follow: Table 3's all-modules setting with QD, QC, QR, PR, AG, AV moved to the stronger LM one after
another. Last, Self-Ask with retrieval: the paper's baselines RQ-RAG (a fine-tuned query rewriter) and Search-o1 (a
reasoning model's agentic search) need models that do not install here; Self-Ask, the self-reflection prompting its
§2 builds on, is the decomposition row (ComposeRAG's k, its own cap of follow-ups). Reported per row: Cover-EM, EM,
F1 (and LLM Eval with ``--judge-lm``), the abstention rate, the share of questions the simple path answered,
reflections, rewrites, LLM calls, tokens and seconds per question. Every row is an evaluation folder under ``--out``,
so a rerun resumes. Each row has its own cache entries (a rollout id per row), so its tokens and seconds are what it
costs run alone, never calls served from another row's cache."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

from rich.console import Console

from multihop.benchmarks.common import baseline_rows, cached_retriever, evaluate_rows, run_folder
from multihop.data.loaders import questions_with_corpus
from multihop.data.question_sets import DATASETS
from multihop.evaluation.runner import render_table
from multihop.lm.options import LMOptions
from multihop.programs import ComposeRAG
from multihop.programs.budget import Budget

console = Console(width=170)
MODULES_OFF = {"decomposition": False, "passage_reranking": False, "answer_verification": False,
               "query_rewriting": False}
ALL_MODULES = {"simple_qa": False, "max_reflections": 0}  # Table 3's last row: every module, one pass, no simple path
ROWS = {  # Table 3 (the retrieval decision off in every row: it is Table 5's module), Table 6, Table 5, Fig. 5
    "none (retrieve → answer)": MODULES_OFF,
    "+ QD + QC": {**MODULES_OFF, "decomposition": True},
    "+ PR": {**MODULES_OFF, "decomposition": True, "passage_reranking": True},
    "+ AV": {"query_rewriting": False},
    "+ QR (all modules; Table 5 decision off, Table 6 simple QA off)": {},
    "all modules + simple QA (Table 6 on)": {"simple_qa": True},
    "all modules + retrieval decision (Table 5 on)": {"retrieval_decision": True},
}
REFLECTING = {"retrieval_decision": True, "simple_qa": True}  # Fig. 5's rows: the default program, reflections aside
ROW_DEFAULTS = {**ALL_MODULES, "retrieval_decision": False}
UPGRADES = ("QD", "QC", "QR", "PR", "AG", "AV")  # Table 4's order
COLUMNS = [("cover_em", "Cover-EM"), ("em", "EM"), ("f1", "F1"), ("llm_eval", "LLM Eval"),
           ("abstained", "abstained %"), ("simple_qa_resolved", "simple path %"), ("reflections", "reflections/q"),
           ("rewrites", "rewrites/q"), ("llm_calls", "LLM calls/q"), ("tokens", "tokens/q"), ("seconds", "s/q")]


def row_programs(retriever, reflections: int, upgrade_lm=None) -> list[tuple[str, str, ComposeRAG]]:
    """(row name, evaluation folder, program) of every row: Table 3 → Table 6 → Table 5 (decision on) → Fig. 5 (0 to
    ``reflections`` rounds, the last the default program), then with ``upgrade_lm`` Table 5's upgraded decision and
    Table 4's rows: Table 3's all-modules setting with its modules moved to the stronger LM one after another,
    cumulatively; last, the decomposition baseline (Self-Ask, for the paper's RQ-RAG and Search-o1, which need
    models not here) with ComposeRAG's k."""
    rows = []
    for number, (name, switches) in enumerate(ROWS.items(), 1):
        rows.append((name, f"row{number}", ComposeRAG(retriever=retriever, **{**ROW_DEFAULTS, **switches})))
    default = inspect.signature(ComposeRAG.__init__).parameters["max_reflections"].default
    for rounds in range(reflections + 1):
        name = f"decision + simple QA, {rounds} reflection rounds (Fig. 5{'; default' if rounds == default else ''})"
        rows.append((name, f"reflections{rounds}", ComposeRAG(retriever=retriever, **{**ROW_DEFAULTS, **REFLECTING,
                                                                                     "max_reflections": rounds})))
    if upgrade_lm is not None:
        upgraded = ComposeRAG(retriever=retriever, **ALL_MODULES, retrieval_decision=True)
        upgraded.set_module_lm("RD", upgrade_lm)
        rows.append(("all modules + upgraded retrieval decision (Table 5)",
                     f"upgrade-{Path(str(upgrade_lm.model)).name}-RD", upgraded))
        for count in range(1, len(UPGRADES) + 1):
            program = ComposeRAG(retriever=retriever, **ALL_MODULES, retrieval_decision=False)
            for module in UPGRADES[:count]:
                program.set_module_lm(module, upgrade_lm)
            modules = " + ".join(UPGRADES[:count])
            folder = f"upgrade-{Path(str(upgrade_lm.model)).name}-{'-'.join(UPGRADES[:count])}"
            rows.append((f"{modules} on the upgrade LM (Table 4)", folder, program))
    k = inspect.signature(ComposeRAG.__init__).parameters["k"].default
    return rows + baseline_rows("ComposeRAG", retriever, Budget(mode="paper"), k=k)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="musique,hotpotqa", help=f"comma-separated: {', '.join(DATASETS)}")
    parser.add_argument("--limit", type=int, default=6, help="questions per dataset")
    LMOptions.add_arguments(parser, max_tokens=128)  # the generation cap of every stage
    parser.add_argument("--judge-lm", default=None, help="LM for LLM Eval (§5.1); none: the column is left out")
    parser.add_argument("--reflections", type=int, default=3, help="reflection bound of the last two rows (paper: 3)")
    parser.add_argument("--upgrade-lm", default=None, help="a stronger LM: adds Table 4's module-upgrade rows")
    parser.add_argument("--rows", default=None, help="comma-separated row numbers to run (default: all)")
    parser.add_argument("--threads", type=int, default=1, help="questions at once (for served LMs)")
    parser.add_argument("--out", default="runs/bench-composerag", help="evaluation folders (a rerun resumes)")
    args = parser.parse_args()

    options = LMOptions.from_args(args)
    lm = options.configure()
    judge = options.make(args.judge_lm) if args.judge_lm else None
    upgrade = options.make(args.upgrade_lm, max_tokens=args.max_tokens) if args.upgrade_lm else None
    for dataset in args.datasets.split(","):
        examples, corpus = questions_with_corpus(dataset, limit=args.limit)
        retriever = cached_retriever(corpus, token_layers=())
        console.print(f"{dataset}: {len(examples)} questions, {len(corpus)} passages, LM {lm.model}")
        out = run_folder(args.out, lm, dataset, corpus)
        rows = row_programs(retriever, args.reflections, upgrade)
        summaries = evaluate_rows(rows, examples, out, lm, judge, args.threads, args.rows)
        title = f"ComposeRAG on {dataset} ({len(examples)} questions), LM {lm.model}"
        console.print(render_table(summaries, title=title, columns=COLUMNS, label="modules"))


if __name__ == "__main__":
    main()
