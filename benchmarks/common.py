"""What the benchmark scripts share: the IRCoT corpus's cached dense index loaded as a retriever, the folder a
benchmark's rows resume in, and the loop that evaluates a benchmark's rows. The question sets by dataset name and
the LM options are the library's (:mod:`multihop.data.question_sets`, :mod:`multihop.lm.options`); nothing outside
``benchmarks/`` imports this module.

Imports stay light (the heavy modules load inside the functions), so a script's ``--help`` answers at once.
"""

from __future__ import annotations

from pathlib import Path


def cached_retriever(corpus, encoder: str = "mpnet", token_layers: tuple[int, ...] | None = None,
                     special_tokens: tuple[str, ...] = (), pooling: str = "mean"):
    """``corpus``'s dense index under ``MULTIHOP_HOME/indexes`` (built on first use, the encoding resumable), loaded
    as a dense retriever (its ``corpus`` attribute is ``corpus``). ``token_layers=()`` keeps the last layer's token
    states for reranking; ``special_tokens`` are the markers a program's queries carry, ``pooling`` its index's
    first-stage pooling."""
    from multihop.retrievers import DenseRetriever

    return DenseRetriever.load(DenseRetriever.build_cached(corpus, encoder=encoder, token_layers=token_layers,
                                                           special_tokens=special_tokens, pooling=pooling))


def run_folder(root: str | Path, lm, dataset: str, corpus) -> Path:
    """Where a benchmark's rows on ``dataset`` resume: one folder per LM, dataset and corpus."""
    return Path(root) / f"{Path(str(lm.model)).name}-{dataset}-{corpus.checksum()[:8]}"


def evaluate_rows(rows: list[tuple], examples: list, out: Path, lm, judge_lm=None, threads: int = 1,
                  chosen: str | None = None, start: int = 1) -> dict[str, dict]:
    """Evaluate each ``(name, folder, program)`` row (only the 1-based row numbers ``chosen`` lists, "2,5", when
    given) into ``out / folder``; each row's LM has its own rollout id, its row number counted from ``start`` (rows
    evaluated in a second call go on from the first call's) — the same whichever rows are chosen —, so no row is
    served from another row's cache. Returns the summaries by row name."""
    import dspy

    from multihop.evaluation.runner import evaluate

    numbered = list(enumerate(rows, start))
    if chosen:
        numbered = [numbered[int(i) - 1] for i in chosen.split(",")]
    summaries = {}
    for number, (name, folder, program) in numbered:
        with dspy.context(lm=lm.copy(rollout_id=number)):
            summaries[name] = evaluate(program, examples, out / folder, threads=threads, name=name, judge_lm=judge_lm)
    return summaries


def baseline_rows(method: str, retriever, budget, skip: tuple[str, ...] = (), **switches) -> list[tuple]:
    """``(row name, evaluation folder, program)`` of each baseline ``method``'s paper reports
    (``Method(paper_baselines=...)``) but those in ``skip`` (rows the benchmark builds its own way), on ``retriever``
    under ``budget`` (a :class:`multihop.programs.budget.Budget`: ``k`` and ``max_iterations``, each set where the baseline
    has the knob, or each baseline's paper's settings), with ``switches`` where a baseline has them (``rerank``,
    ``n``)."""
    from multihop.programs import METHODS, program_under_budget

    return [(f"{name} (baseline)", f"baseline-{name.lower()}",
             program_under_budget(name, retriever, budget, **switches))
            for name in METHODS[method].paper_baselines if name not in skip]
