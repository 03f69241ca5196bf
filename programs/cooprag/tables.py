"""CoopRAG's paper's results tables (seed 000) whose rows a program here runs, as data (:class:`PaperTable`).

Every CoopRAG row runs on CoopRAG's own retriever: an MPNet index pooled by ``[CLS]`` with the unrolling markers
(``multihop index build --markers CoopRAG``), its top n = 20 reranked by RaLa Eq. 4 to k = 5 (the program's
defaults; the paper gives neither number). The paper's encoder is MPNet fine-tuned with RaLa's loss on each dataset's
train questions (App. A: ``multihop retriever train --markers CoopRAG``); the ablations of its training (Tables 5,
17, 19, 20, 23) each need an encoder trained with their switch (``needs``: :mod:`.artifacts`), and their reference
row the encoder of the paper's own training, so that every row of such a table runs on an encoder trained the same
way but for its switch; the other tables run on that encoder when it is given or built (``PaperTable.encoder``), else
on stock MPNet, which their header says. The paper's test sets are HippoRAG's 1,000 questions a dataset with their
corpora (Table 1), not our dev sets.

Left out (no program here stands for them): the structure-augmented and embedding baselines of Tables 2-3 and
10-11 (HippoRAG, HippoRAG2, SiReRAG, HopRAG, RAPTOR, GTE-Qwen2, GritLM, NV-Embed-v2), Table 4 (SimpleQA / FreshQA),
Tables 6 and 8 (score differences, entropy ratios: analyses of the encoder and of the LM's token distributions),
Tables 9-11 (retrievers compared), 14-15 and 21-22 (latency, LLM calls, corpus size).
"""

from __future__ import annotations

from ..papers import PaperTable, TableRow, cells, grid
from .artifacts import ENCODER, encoder_artifact

MULTI = ("hotpotqa", "musique", "2wiki")
LMS = ("Gemma2-9B", "Gemma2-27B", "Llama3.3-70B-Instruct", "GPT-4o-mini")
SETUP = {"encoder": "MPNet fine-tuned with RaLa's loss (App. A)", "pooling": "[CLS] (Eq. 2)", "n": 20,
         "rerank": "rala-eq4", "k": 5, "buckets": 4}
RETRIEVAL_NOTE = ("R@2/R@5 over the passages the reader reads (the top k = 5 after RaLa); the paper's n is not given "
                  "(ours: 20).")


RALA = {"n": 20, "rerank": "rala-eq4", "k": 5}  # CoopRAG's retriever for another program: RaLa over the top 20


def _lm_rows(columns, printed: dict[str, tuple[float, ...]], **settings) -> tuple[TableRow, ...]:
    return tuple(TableRow("CoopRAG", "CoopRAG", dict(settings), cells(columns, *printed[lm]), lm=lm)
                 for lm in LMS)


TABLE_2_COLUMNS = grid((*MULTI, "nq"), ("recall@2", "recall@5"))
TABLE_2 = PaperTable(
    "Table 2", "Retrieval performance comparison across single-step methods", TABLE_2_COLUMNS,
    _lm_rows(TABLE_2_COLUMNS, {
        "Gemma2-9B": (87.9, 95.6, 59.4, 75.5, 80.1, 96.7, 71.6, 88.9),
        "Gemma2-27B": (88.3, 96.6, 59.4, 75.7, 80.8, 97.2, 72.8, 89.5),
        "Llama3.3-70B-Instruct": (86.9, 96.6, 58.2, 75.3, 80.6, 96.3, 77.2, 90.8),
        "GPT-4o-mini": (88.8, 96.8, 59.6, 75.7, 80.4, 96.6, 80.8, 92.1),
    }),
    settings=SETUP, encoder=ENCODER,
    notes=f"{RETRIEVAL_NOTE} Its baselines' rows (HippoRAG2, SiReRAG, HopRAG) are not built here. Table 10 repeats "
          "these rows.",
)

TABLE_3_COLUMNS = grid((*MULTI, "nq"), ("em", "f1"))
TABLE_3 = PaperTable(
    "Table 3", "QA performance comparison across single-step methods", TABLE_3_COLUMNS,
    (*_lm_rows(TABLE_3_COLUMNS, {
        "Gemma2-9B": (64.4, 78.1, 52.2, 65.2, 70.0, 78.1, 63.8, 72.7),
        "Gemma2-27B": (64.9, 79.5, 52.8, 66.7, 71.7, 79.0, 67.3, 75.5),
        "Llama3.3-70B-Instruct": (64.7, 79.0, 52.6, 66.6, 71.2, 78.8, 70.9, 80.3),
        "GPT-4o-mini": (65.6, 78.9, 52.3, 67.1, 71.7, 79.2, 72.0, 82.3),
    }),
     TableRow("SingleStepRAG on CoopRAG's retriever (ours: the raw question, RaLa top 5)", "SingleStepRAG",
              RALA)),
    settings=SETUP, encoder=ENCODER,
    notes="Its baselines' rows (HippoRAG2, SiReRAG, HopRAG) are not built here; Table 11 repeats these rows. "
          "SingleStepRAG is ours: the question itself, read through the same retriever and reader LM.",
)

TABLE_5_COLUMNS = grid(MULTI, ("recall@2", "recall@5"))
TABLE_5 = PaperTable(
    "Table 5", "Ablation study on the effect of difficulty-aware weights", TABLE_5_COLUMNS,
    (TableRow("w/o α_U, ω_U,D", "CoopRAG", {"omega": False},
              cells(TABLE_5_COLUMNS, 84.4, 94.3, 56.3, 72.7, 76.1, 92.3),
              needs=(encoder_artifact("--no-alpha", "--no-omega"),)),
     TableRow("w/o α_U", "CoopRAG", {}, cells(TABLE_5_COLUMNS, 87.8, 95.2, 58.2, 74.6, 79.9, 96.0),
              needs=(encoder_artifact("--no-alpha"),)),
     TableRow("w/o ω_U,D", "CoopRAG", {"omega": False}, cells(TABLE_5_COLUMNS, 85.6, 94.5, 57.0, 73.8, 77.7, 93.5),
              needs=(encoder_artifact("--no-omega"),)),
     TableRow("CoopRAG", "CoopRAG", {}, cells(TABLE_5_COLUMNS, 88.1, 95.9, 59.6, 75.7, 81.4, 96.6), needs=(ENCODER,))),
    settings=SETUP, encoder=ENCODER,
    notes="α (Eq. 6) weighs the training loss only; ω (Eq. 4) both the training score and the reranking "
          "(``omega=False``). The LM is not given.",
)

TABLE_7_COLUMNS = tuple((dataset, metric) for dataset in MULTI for metric in ("recall@2", "em"))
TABLE_7 = PaperTable(
    "Table 7", "Impact of the uncertainty mask on the retrieval and QA performances", TABLE_7_COLUMNS,
    (TableRow("w/o <UNCERTAIN>", "CoopRAG", {"uncertainty_mask": False},
              cells(TABLE_7_COLUMNS, 86.9, 60.9, 55.2, 47.2, 73.8, 65.6)),
     TableRow("w/ <UNCERTAIN>", "CoopRAG", {}, cells(TABLE_7_COLUMNS, 88.1, 65.6, 59.6, 52.3, 80.4, 71.7))),
    settings=SETUP, encoder=ENCODER,
    notes="w/o <UNCERTAIN>: no mask in the unrolling, no chain completion (§4.6). The LM is not given (the w/ row's "
          "EM is Table 3's GPT-4o-mini row).",
)

TABLE_12_COLUMNS = grid(MULTI, ("recall@2", "recall@5"))
IRCOT = {"k": 5, "max_steps": 8, "max_paragraphs": 15}  # IRCoT's paper's caps (not CoopRAG's), k = 5 as every row
IRCOT_ON_COOPRAG = {**IRCOT, **RALA}  # IRCoT over CoopRAG's retriever: RaLa reranks each step's top 20
NOT_HERE = "its retriever ({}) is not built here: only MPNet dense and BM25 first stages"
TABLE_12 = PaperTable(
    "Table 12", "Overall retrieval performance comparison across multi-step methods", TABLE_12_COLUMNS,
    (TableRow("IRCoT + BM25 (Default)", "IRCoT", IRCOT, cells(TABLE_12_COLUMNS, 65.6, 79.0, 34.2, 44.7, 61.2, 75.6),
              first_stage="bm25"),
     TableRow("IRCoT + Contriever", "IRCoT", IRCOT, cells(TABLE_12_COLUMNS, 65.9, 81.6, 39.1, 52.2, 51.6, 63.8),
              runnable=False, why_not=NOT_HERE.format("Contriever")),
     TableRow("IRCoT + ColBERTv2", "IRCoT", IRCOT, cells(TABLE_12_COLUMNS, 67.9, 82.0, 41.7, 53.7, 64.1, 74.4),
              runnable=False, why_not=NOT_HERE.format("ColBERTv2")),
     TableRow("IRCoT + HippoRAG (Contriever)", "IRCoT", IRCOT,
              cells(TABLE_12_COLUMNS, 65.8, 82.3, 43.9, 56.6, 75.3, 93.4), runnable=False,
              why_not=NOT_HERE.format("HippoRAG's knowledge graph over Contriever")),
     TableRow("IRCoT + HippoRAG (ColBERTv2)", "IRCoT", IRCOT,
              cells(TABLE_12_COLUMNS, 67.0, 83.0, 45.3, 57.6, 75.8, 93.9), runnable=False,
              why_not=NOT_HERE.format("HippoRAG's knowledge graph over ColBERTv2")),
     TableRow("IRCoT + CoopRAG", "IRCoT", IRCOT_ON_COOPRAG,
              cells(TABLE_12_COLUMNS, 87.3, 90.9, 62.2, 74.9, 81.0, 95.9), lm="GPT-4o-mini"),
     TableRow("KeyExtract + CoopRAG", "CoopRAG", {"key_extract_rounds": 3},
              cells(TABLE_12_COLUMNS, 88.6, 93.9, 62.9, 76.8, 81.8, 97.2), lm="Gemma2-9B"),
     TableRow("KeyExtract + CoopRAG", "CoopRAG", {"key_extract_rounds": 3},
              cells(TABLE_12_COLUMNS, 90.2, 97.2, 64.5, 78.6, 83.6, 97.6), lm="GPT-4o-mini")),
    encoder=ENCODER,
    settings={**SETUP, "ircot": "IRCoT's paper's caps (8 steps, 15 paragraphs)", "key_extract_rounds": 3},
    notes="IRCoT + CoopRAG: IRCoT over CoopRAG's retriever (MPNet [CLS] + RaLa); IRCoT + BM25 reads BM25's top k "
          "alone. KeyExtract's rounds are not given (App. H.4): ours 3. The rows of other retrievers are kept for "
          "their numbers, IRCoT being the nearest program.",
)

TABLE_13_COLUMNS = grid(MULTI, ("em", "f1"))
TABLE_13 = PaperTable(
    "Table 13", "Overall QA performance comparison across multi-step methods", TABLE_13_COLUMNS,
    (TableRow("IRCoT + ColBERTv2", "IRCoT", IRCOT, cells(TABLE_13_COLUMNS, 45.5, 58.4, 19.1, 30.5, 35.4, 45.1),
              lm="GPT-4o-mini", runnable=False, why_not=NOT_HERE.format("ColBERTv2")),
     TableRow("IRCoT + HippoRAG", "IRCoT", IRCOT, cells(TABLE_13_COLUMNS, 45.7, 59.2, 21.9, 33.3, 47.7, 62.7),
              lm="GPT-3.5-turbo", runnable=False, why_not=NOT_HERE.format("HippoRAG's knowledge graph")),
     TableRow("IRCoT + CoopRAG", "IRCoT", IRCOT_ON_COOPRAG, cells(TABLE_13_COLUMNS, 64.3, 75.5, 52.3, 65.9, 72.2, 77.7),
              lm="GPT-4o-mini"),
     TableRow("KeyExtract + CoopRAG", "CoopRAG", {"key_extract_rounds": 3},
              cells(TABLE_13_COLUMNS, 64.9, 77.9, 52.5, 66.1, 71.5, 78.9), lm="Gemma2-9B"),
     TableRow("KeyExtract + CoopRAG", "CoopRAG", {"key_extract_rounds": 3},
              cells(TABLE_13_COLUMNS, 66.7, 79.2, 53.8, 68.6, 72.2, 78.2), lm="GPT-4o-mini")),
    settings=TABLE_12.settings, encoder=ENCODER,
    notes="The reader LM is each row's (the table's \"Reader (LLM)\" column). " + TABLE_12.notes,
)

TABLE_16_COLUMNS = grid(MULTI, ("recall@2", "recall@5"))
TABLE_16 = PaperTable(
    "Table 16", "Ablation study on the effect of question unrolling", TABLE_16_COLUMNS,
    (TableRow("MQ", "CoopRAG", {"unrolling": False}, cells(TABLE_16_COLUMNS, 71.6, 82.8, 43.7, 56.5, 71.5, 88.6)),
     TableRow("MQ + SQ", "CoopRAG", {"query_parts": "MQ+SQ"},
              cells(TABLE_16_COLUMNS, 80.3, 90.9, 51.6, 67.9, 77.7, 89.9)),
     TableRow("MQ + RC", "CoopRAG", {"query_parts": "MQ+RC"},
              cells(TABLE_16_COLUMNS, 86.4, 93.9, 57.7, 73.3, 78.7, 92.9)),
     TableRow("MQ + SQ + RC", "CoopRAG", {}, cells(TABLE_16_COLUMNS, 88.1, 95.9, 59.6, 75.7, 80.4, 96.6))),
    settings=SETUP, encoder=ENCODER,
    notes="The paper prompts for only the parts of each row; ours drops the others from the full unrolling (one "
          "unrolling for every row: the program's query_parts). The LM is not given.",
)

TABLE_17_COLUMNS = grid(MULTI, ("recall@2", "recall@5"))
TABLE_17 = PaperTable(
    "Table 17", "The effect of different contrastive reranking strategies", TABLE_17_COLUMNS,
    (TableRow("Contrasting token embeddings", "CoopRAG", {},
              cells(TABLE_17_COLUMNS, 86.6, 94.4, 52.2, 69.9, 77.1, 91.2), runnable=False,
              why_not="Eq. 7 (contrasting the token embeddings themselves) is not rebuilt: the paper reports it the "
              "weakest and does not adopt it"),
     TableRow("Contrasting similarity scores", "CoopRAG", {"rerank": "rala-eq3"},
              cells(TABLE_17_COLUMNS, 88.4, 96.6, 60.0, 76.2, 81.8, 96.7), needs=(encoder_artifact("--score eq3"),)),
     TableRow("Optimization based on ω_U,D", "CoopRAG", {},
              cells(TABLE_17_COLUMNS, 88.1, 95.9, 59.6, 75.7, 81.4, 96.6), needs=(ENCODER,))),
    settings=SETUP, encoder=ENCODER,
)

TABLE_18_COLUMNS = (("hotpotqa", "em"), ("hotpotqa", "f1"))
TABLE_18 = PaperTable(
    "Table 18", "QA performance under unified vs separate strategies for reasoning chain completion and reasoning",
    TABLE_18_COLUMNS,
    tuple(TableRow(label, "CoopRAG", {"unified": True} if label == "Unified" else {},
                   cells(TABLE_18_COLUMNS, em, f1), lm=lm)
          for label, lm, em, f1 in (("Unified", "Gemma2-9B", 58.7, 72.7), ("Separated", "Gemma2-9B", 64.2, 77.8),
                                    ("Unified", "Gemma2-27B", 59.9, 75.5), ("Separated", "Gemma2-27B", 64.9, 79.5),
                                    ("Unified", "GPT-4o-mini", 63.1, 76.6), ("Separated", "GPT-4o-mini", 64.7, 78.8),
                                    ("Unified", "GPT-o3", 70.2, 83.3), ("Separated", "GPT-o3", 71.1, 82.8))),
    settings=SETUP, encoder=ENCODER,
    notes="Unified: completion and answer in one call (App. D.2; Table 15 gives its LLM calls a question: 2 instead "
          "of 3).",
)

TABLE_19_COLUMNS = grid(MULTI, ("recall@2", "recall@5"))
TABLE_19 = PaperTable(
    "Table 19", "Retrieval performance using the number of sub-questions and the length of a reasoning chain as "
    "weights", TABLE_19_COLUMNS,
    (TableRow("w/o difficulty-aware weight", "CoopRAG", {}, cells(TABLE_19_COLUMNS, 87.8, 95.2, 58.2, 74.6, 79.9, 96.0),
              needs=(encoder_artifact("--no-alpha"),)),
     TableRow("Number of sub-questions", "CoopRAG", {}, cells(TABLE_19_COLUMNS, 88.1, 95.9, 59.6, 75.7, 81.4, 96.6),
              needs=(ENCODER,)),
     TableRow("Reasoning chain length", "CoopRAG", {}, cells(TABLE_19_COLUMNS, 87.8, 95.8, 60.3, 76.4, 81.4, 96.5),
              needs=(encoder_artifact("--alpha-from chain"),))),
    settings=SETUP, encoder=ENCODER,
)

TABLE_20_COLUMNS = tuple((dataset, "recall@2") for dataset in MULTI)
TABLE_20 = PaperTable(
    "Table 20", "Comparison of retrieval performance using different loss functions", TABLE_20_COLUMNS,
    (TableRow("Cross-entropy", "CoopRAG", {}, cells(TABLE_20_COLUMNS, 77.5, 30.9, 63.3),
              needs=(encoder_artifact("--loss bce"),)),
     TableRow("InfoNCE", "CoopRAG", {}, cells(TABLE_20_COLUMNS, 88.1, 59.6, 80.4), needs=(ENCODER,))),
    settings=SETUP, encoder=ENCODER,
)

TABLE_23_COLUMNS = grid(MULTI, ("recall@2", "recall@5"))
TABLE_23 = PaperTable(
    "Table 23", "Effect of bucket size on retrieval performance", TABLE_23_COLUMNS,
    tuple(TableRow(str(size), "CoopRAG", {"buckets": size}, cells(TABLE_23_COLUMNS, *printed),
                   needs=(ENCODER if size == 4 else encoder_artifact(f"--buckets {size}"),))
          for size, printed in ((2, (87.7, 94.5, 58.8, 75.3, 80.1, 95.2)), (4, (88.1, 95.9, 59.6, 75.7, 80.4, 96.6)),
                                (6, (88.1, 96.2, 59.9, 75.5, 80.6, 97.0)), (12, (88.3, 96.3, 60.1, 75.9, 81.0, 97.3)))),
    settings=SETUP, encoder=ENCODER,
    notes="MPNet's 12 layers split into that many buckets, one layer drawn from each (App. F.3; App. A says 3).",
)

TABLES = (TABLE_2, TABLE_3, TABLE_5, TABLE_7, TABLE_12, TABLE_13, TABLE_16, TABLE_17, TABLE_18, TABLE_19, TABLE_20,
          TABLE_23)
