"""The five papers' own headline numbers on MuSiQue, HotpotQA and 2Wiki, which ``multihop compare`` shows beside ours,
labelled as theirs: each with the LM it was measured with, where it was read (seed file and table) and how its
setting differs from ours (their questions, corpus and retriever).

Numbers are fractions, as our summaries keep them; only numbers read in the papers' text are here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperResult:
    """One paper's reported scores of its method on one dataset: ``metrics`` by our summary keys (em, f1, acc,
    cover_em, llm_eval, recall@2, recall@5), the paper's ``lm``, where it was read (``source``) and its ``setting``."""

    program: str
    dataset: str
    lm: str
    metrics: dict[str, float]
    source: str
    setting: str

    def label(self) -> str:
        return f"paper (theirs, {self.lm})"


def _rows(program: str, lm: str, source: str, setting: str, by_dataset: dict[str, dict[str, float]]
          ) -> list[PaperResult]:
    """One :class:`PaperResult` per dataset; ``by_dataset`` holds percentages as the papers print them."""
    return [PaperResult(program, dataset, lm, {key: value / 100 for key, value in numbers.items()}, source, setting)
            for dataset, numbers in by_dataset.items()]


PAPER_RESULTS: tuple[PaperResult, ...] = (
    # seed 000 (CoopRAG), Table 3 (single-step QA, EM/F1) and Table 2 (single-step retrieval, R@2/R@5), the
    # CoopRAG (GPT-4o-mini) rows
    *_rows("CoopRAG", "GPT-4o-mini", "seed 000, Tables 2-3", "HippoRAG's 1,000-question test sets and their "
           "corpora (Table 1); fine-tuned MPNet + RaLa", {
               "hotpotqa": {"em": 65.6, "f1": 78.9, "recall@2": 88.8, "recall@5": 96.8},
               "musique": {"em": 52.3, "f1": 67.1, "recall@2": 59.6, "recall@5": 75.7},
               "2wiki": {"em": 71.7, "f1": 79.2, "recall@2": 80.4, "recall@5": 96.6},
           }),
    # seed 001 (DualRAG), Table 2, the DualRAG row under Qwen2.5-72B-Instruct (per dataset: LLM judge, EM, Acc, F1;
    # its Acc/F1 are Table 3's DualRAG row)
    *_rows("DualRAG", "Qwen2.5-72B-Instruct", "seed 001, Table 2", "1,000 sampled questions; HotpotQA on its "
           "Wikipedia corpus; bge-small + bge-reranker (top-50 to 10)", {
               "hotpotqa": {"llm_eval": 79.7, "em": 49.7, "acc": 70.0, "f1": 65.7},
               "2wiki": {"llm_eval": 84.8, "em": 65.6, "acc": 85.0, "f1": 77.3},
               "musique": {"llm_eval": 70.1, "em": 40.8, "acc": 66.3, "f1": 56.3},
           }),
    # seed 002 (ComposeRAG), Table 1, the "Ours GPT-4o-mini" rows (the ComposeRAG row of its Table 2)
    *_rows("ComposeRAG", "GPT-4o-mini", "seed 002, Table 1", "500 sampled dev questions a dataset; Cortex "
           "Search over wiki2019", {
        "hotpotqa": {"llm_eval": 70.2, "cover_em": 55.8},
        "2wiki": {"llm_eval": 74.0, "cover_em": 72.8},
        "musique": {"llm_eval": 37.6, "cover_em": 32.8},
    }),
    # seed 003 (HANRAG), Table 2 (multi-hop), the HANRAG row
    *_rows("HANRAG", "Llama-3.1-8B-Instruct", "seed 003, Table 2", "Adaptive-RAG's splits; BM25; a fine-tuned "
           "Revelator", {
               "musique": {"em": 29.8, "f1": 36.6, "acc": 43.2},
               "hotpotqa": {"em": 49.2, "f1": 58.9, "acc": 61.3},
               "2wiki": {"em": 47.2, "f1": 58.9, "acc": 60.8},
           }),
    # seed 004 (CIRAG), Table 1, the "Ours" row under Qwen2.5-7B(-Instruct)
    *_rows("CIRAG", "Qwen2.5-7B-Instruct", "seed 004, Table 1", "1,000 sampled dev questions, IRCoT corpus; "
           "distilled integrator", {
               "2wiki": {"f1": 69.5, "em": 59.0},
               "hotpotqa": {"f1": 67.1, "em": 52.5},
               "musique": {"f1": 40.9, "em": 29.3},
           }),
)


def paper_results(programs: list[str], datasets: list[str]) -> list[PaperResult]:
    """The papers' numbers for these programs on these datasets (dataset names as ``multihop compare`` uses them:
    musique, hotpotqa, 2wiki), in the order of ``programs``."""
    return [result for program in programs for result in PAPER_RESULTS
            if result.program == program and result.dataset in datasets]
