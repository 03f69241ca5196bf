"""CIRAG's paper's results tables (Wei et al., 2025) whose rows a program here runs, as data (:class:`PaperTable`).

§4.3 and App. B.4 run every row on the top K = 10 documents a round (NV-Embed-v2 over the IRCoT corpus of 1,000 sampled
dev questions a dataset; ours MPNet over the questions' paragraphs) with at most L = 4 iteration steps (each
program's own knob), CIRAG with N = 30 candidate triples and its triples extracted offline into a cache (``multihop
cirag extract``; "CIRAG (online)" extracts at every round, Fig. 6). App. B.3: IRCoT and FLARE as DualRAG implements
them, every baseline on the same retriever and backbone. "Ours" with Qwen2.5-7B runs its integrator on the distilled
student (trajectory distillation, §3.5: ``multihop trajectories --program CIRAG``, then ``multihop distill --preset
cirag``); the ablations of Tables 2-3 keep that integrator, "w/o TD" the frozen base model.

Figs. 6-8 print no numbers in the text (Fig. 7: "fluctuations below 2%" over N = 10-100; Fig. 8: CIRAG "stabilizes at
L = 2"): their rows (the online variant, N and L) are kept in Table 2 as ours, without numbers.

Fig. 3's granularity shares are printed for triples alone (76.3% on 2WikiMQA, 57.3% on MuSiQue): its table holds them.

Left out: the KiRAG rows of Tables 1, 5 and 6 (no program here), Table 4 (NQ, WebQ).
"""

from __future__ import annotations

from ..papers import Artifact, PaperTable, StageLMs, TableRow, cells, grid
from .artifacts import TRIPLE_CACHE

K, STEPS, N = 10, 4, 30  # App. B.4
DATASETS = ("2wiki", "hotpotqa", "musique")  # the paper's order
COLUMNS = grid(DATASETS, ("f1", "em"))
SMALL, MAX = "Qwen2.5-7B-Instruct", "Qwen2.5-max"
SETUP = {"k": K, "max_iterations": STEPS, "n_triples": N, "retriever": "NV-Embed-v2 (ours: MPNet)",
         "triples": "extracted offline into a cache"}
CACHE = (TRIPLE_CACHE,)  # the corpus's triples extracted offline, passed as triple_cache
STUDENT_CACHE = Artifact("triple-cache-student", "triple_cache", "multihop cirag extract DATA-dev-file --lm "
                         "STUDENT_SPEC --out DIR, the student trained with `multihop distill --all-stages`")
INTEGRATOR = StageLMs("student", ("integrate",), f"{SMALL} distilled on Qwen-max trajectories (§3.5, App. B.4)")
DUALRAG_FT = StageLMs("student", ("reason", "identify", "summarize"), f"{SMALL} fine-tuned as DualRAG-FT")
CIRAG = {"k": K}  # 4 iterations and N = 30 are its defaults
BASELINES = {  # App. B.3: K = 10 and at most 4 steps through each program's own knob
    "SingleStepRAG": {"k": K},
    "IRCoT": {"k": K, "max_steps": STEPS},
    "FLARE": {"k": K, "max_sentences": STEPS},
    "MetaRAG": {"k": K, "max_iterations": STEPS},
    "DualRAG": {"k": K, "max_iterations": STEPS, "rerank": None},  # every method reads the first stage's top 10
}
DUALRAG_READS = ("DualRAG and DualRAG-FT read the first stage's top 10 without DualRAG's reranker (its own setting "
                 "reranks the top 50 to 10, Cheng et al., 2025, App. H.4; this paper gives every method K = 10 "
                 "documents a retrieval and names no reranker).")

TABLE_1_PRINTED = {  # label → program, Qwen2.5-7B cells, Qwen2.5-max cells (None: not run)
    "NativeRAG": ("SingleStepRAG", (31.5, 28.2, 50.2, 34.5, 16.8, 9.9), (47.1, 39.2, 66.9, 52.4, 27.6, 18.2)),
    "IRCOT": ("IRCoT", (45.7, 36.4, 56.8, 42.4, 23.5, 13.4), (65.7, 55.3, 72.8, 58.1, 34.2, 22.1)),
    "FLARE": ("FLARE", (43.1, 35.2, 56.4, 41.9, 23.8, 13.5), None),
    "MetaRAG": ("MetaRAG", (50.4, 44.7, 63.3, 49.6, 31.9, 21.2), (58.7, 52.4, 74.6, 60.8, 43.8, 32.4)),
    "DualRAG": ("DualRAG", (62.3, 51.7, 58.7, 44.8, 33.7, 22.1), (75.6, 65.8, 73.3, 57.8, 50.2, 36.6)),
    "DualRAG-FT": ("DualRAG", (65.6, 53.8, 62.6, 47.1, 35.8, 25.1), None),
    "Ours": ("CIRAG", (69.5, 59.0, 67.1, 52.5, 40.9, 29.3), (76.4, 67.1, 74.9, 60.9, 56.0, 44.9)),
}


def _table_1_row(label: str, program: str, printed: tuple[float, ...], lm: str) -> TableRow:
    students = {"DualRAG-FT": DUALRAG_FT, "Ours": INTEGRATOR if lm == SMALL else None}
    return TableRow(label, program, BASELINES.get(program, CIRAG), cells(COLUMNS, *printed), lm=lm,
                    stage_lms=students.get(label), needs=CACHE if program == "CIRAG" else ())


TABLE_1 = PaperTable(
    "Table 1", "Results on three MHQA benchmarks with Qwen2.5-7B-Instruct and Qwen2.5-max as base LLMs", COLUMNS,
    tuple(_table_1_row(label, program, printed, lm) for index, lm in enumerate((SMALL, MAX))
          for label, (program, *both) in TABLE_1_PRINTED.items() if (printed := both[index]) is not None),
    settings=SETUP,
    notes="With Qwen2.5-max the teacher itself integrates (no student); FLARE and DualRAG-FT were not run with it "
          "(\"-\"). " + DUALRAG_READS + " KiRAG's rows are left out.",
)

TABLE_2 = PaperTable(
    "Table 2", "Ablation on trajectory distillation and the reranker (Qwen2.5-7B-Instruct)", COLUMNS,
    (TableRow("CIRAG", "CIRAG", CIRAG, cells(COLUMNS, 68.1, 58.9, 67.1, 52.5, 40.9, 29.3), stage_lms=INTEGRATOR,
              needs=CACHE),
     TableRow("w/o TD", "CIRAG", CIRAG, cells(COLUMNS, 59.7, 49.8, 62.5, 48.8, 33.1, 22.2), needs=CACHE),
     TableRow("w/o reranker", "CIRAG", {**CIRAG, "reranker": False},
              cells(COLUMNS, 66.3, 57.3, 64.7, 50.6, 38.3, 27.2), stage_lms=INTEGRATOR, needs=CACHE),
     TableRow("CIRAG (online, Fig. 6; ours: its numbers are not printed)", "CIRAG", CIRAG, stage_lms=INTEGRATOR),
     *(TableRow(f"L = {cap} (Fig. 8; ours: its numbers are not printed)", "CIRAG", {**CIRAG, "max_iterations": cap},
                stage_lms=INTEGRATOR, needs=CACHE) for cap in (1, 2, 3)),
     *(TableRow(f"N = {n} triples (Fig. 7; ours: its numbers are not printed)", "CIRAG", {**CIRAG, "n_triples": n},
                stage_lms=INTEGRATOR, needs=CACHE) for n in (10, 50, 100)),
     TableRow("w/o TD, student extractor (ours)", "CIRAG", CIRAG,
              needs=(STUDENT_CACHE,)),
     TableRow("CIRAG (TD, all-stages student), student extractor (ours)", "CIRAG", CIRAG,
              stage_lms=StageLMs("student", ("integrate",), "an all-stages student"),
              needs=(STUDENT_CACHE,))),
    lm=SMALL, settings=SETUP,
    notes="Its CIRAG row (68.1 / 58.9 on 2Wiki) differs from Table 1's (69.5 / 59.0). The online row extracts at every "
          "round (no cache); the L and N rows vary Figs. 8 and 7's knobs with the distilled integrator.",
)

TABLE_3 = PaperTable(
    "Table 3", "Ablation on the cascaded multi-granularity knowledge (Qwen2.5-7B-Instruct)", COLUMNS,
    tuple(TableRow(label, "CIRAG", {**CIRAG, **({"granularities": levels} if levels else {})},
                   cells(COLUMNS, *printed), stage_lms=INTEGRATOR, needs=CACHE)
          for label, levels, printed in (
              ("CIRAG (Full)", None, (68.1, 58.9, 67.0, 52.6, 40.9, 29.5)),
              ("w/o Passage", ("triple", "sentence"), (67.4, 57.5, 65.5, 51.1, 40.8, 28.9)),
              ("w/o Triple", ("sentence", "passage"), (67.5, 58.8, 64.9, 51.0, 38.7, 26.9)),
              ("w/o Sentence + Passage", ("triple",), (64.1, 54.7, 59.1, 45.4, 37.1, 24.5)),
              ("w/o Triple + Passage", ("sentence",), (64.7, 56.5, 59.7, 46.1, 36.7, 24.2)),
              ("w/o Triple + Sentence", ("passage",), (61.9, 53.2, 61.1, 46.5, 34.1, 21.1)))),
    lm=SMALL, settings=SETUP,
    notes="Every row keeps the distilled integrator (Table 2's CIRAG row).",
)

LLAMA = "Llama-3-8B-Instruct"
TABLE_5_6_ROWS = {  # label (as Tables 5-6 print it) → program, Table 5 cells, Table 6 cells; KiRAG's rows left out
    "IRCOT": ("IRCoT", (41.1, 23.1, 56.7, 41.3, 23.1, 13.6), (44.8, 35.9, 55.1, 41.2, 21.8, 12.2)),
    "FLARE": ("FLARE", (40.5, 24.8, 56.8, 41.2, 24.5, 14.0), (41.2, 34.4, 54.1, 39.6, 21.3, 11.8)),
    "MetaRAG": ("MetaRAG", (44.9, 30.6, 62.5, 48.5, 31.7, 20.8), (48.6, 42.8, 60.3, 47.6, 29.2, 18.8)),
    "Dualrag": ("DualRAG", (56.8, 37.6, 57.5, 43.6, 32.4, 21.1), (61.2, 51.1, 57.6, 44.5, 32.9, 21.0)),
    "Dualrag-FT": ("DualRAG", (60.1, 39.7, 61.9, 46.0, 34.6, 24.7), (64.5, 52.3, 61.7, 46.7, 35.2, 24.8)),
    "Ours": ("CIRAG", (64.0, 44.9, 66.7, 51.4, 40.7, 28.2), (66.8, 57.3, 65.6, 51.8, 39.9, 27.8)),
}


def _table_5_6_rows(index: int, integrator: StageLMs, dualrag_ft: StageLMs) -> tuple[TableRow, ...]:
    students = {"Dualrag-FT": dualrag_ft, "Ours": integrator}
    return tuple(TableRow(label, program, BASELINES.get(program, CIRAG), cells(COLUMNS, *printed[index]),
                          stage_lms=students.get(label), needs=CACHE if program == "CIRAG" else ())
                 for label, (program, *printed) in TABLE_5_6_ROWS.items())


TABLE_5 = PaperTable(
    "Table 5", "Results with Llama-3-8B-Instruct as backbone (NV-Embed-v2 retriever)", COLUMNS,
    _table_5_6_rows(0, StageLMs("student", ("integrate",), f"the distilled integrator (for {LLAMA}: not said)"),
                    StageLMs("student", DUALRAG_FT.stages, "DualRAG-FT's fine-tuned model (for this backbone: not "
                             "said)")),
    lm=LLAMA, settings=SETUP,
    notes="App. C.1 names only the backbone; ours reads the rows as Table 1's, \"Ours\" with its integrator "
          "on a student as with Qwen2.5-7B and Dualrag-FT on its fine-tuned roles (whether the paper distilled or "
          "fine-tuned Llama-3-8B is not said). " + DUALRAG_READS + " KiRAG's row is left out.",
)

TABLE_6 = PaperTable(
    "Table 6", "Results with the bge-small-en-v1.5 retriever (Qwen2.5-7B-Instruct)", COLUMNS,
    _table_5_6_rows(1, INTEGRATOR, DUALRAG_FT),
    lm=SMALL, settings={**SETUP, "retriever": "bge-small-en-v1.5 (ours: MPNet)"},
    notes="Table 1's Qwen2.5-7B rows (NativeRAG's aside) with bge-small-en-v1.5 in place of NV-Embed-v2 (App. C.1); "
          "ours retrieves with MPNet in both, so its rows run Table 1's configurations. " + DUALRAG_READS + " KiRAG's "
          "row is left out.",
)

FIG_3_COLUMNS = (("2wiki", "answered.triple"), ("musique", "answered.triple"))
FIG_3 = PaperTable(
    "Fig. 3", "Context granularity distribution: the share of questions the triples answer", FIG_3_COLUMNS,
    (TableRow("CIRAG", "CIRAG", CIRAG, cells(FIG_3_COLUMNS, 0.763, 0.573), stage_lms=INTEGRATOR, needs=CACHE),),
    lm=SMALL, settings=SETUP, rates=("answered.triple",),
    notes="§4.4 prints the triples' shares alone (76.3% on 2WikiMQA, 57.3% on MuSiQue; the sentences' and passages' "
          "are in the figure only), kept as fractions: the share of questions whose cascade answered at the triple "
          "level, our `answered.triple` (each question counts the level that answered it). The LM is not said: ours "
          "Table 1's Qwen2.5-7B row with its distilled integrator (Fig. 5 sets the same shares against w/o TD).",
)

TABLES = (TABLE_1, TABLE_2, TABLE_3, TABLE_5, TABLE_6, FIG_3)
