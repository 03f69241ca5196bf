"""FLARE (Jiang et al., EMNLP 2023), FLARE-direct, the baseline DualRAG and CIRAG report: the program
(:mod:`.program`), the token confidence it reads from the LM (:mod:`.tokens`) and its gold rows (:mod:`.gold`)."""

from ...papers import Paper
from ...registry import Declaration
from . import gold  # noqa: F401 - registers FLARE's gold stage targets
from .program import FLARE
from .tokens import Piece, field_pieces, low_confidence, masked_query

__all__ = ["FLARE", "Piece", "field_pieces", "low_confidence", "masked_query"]

Declaration(
    FLARE,
    kind="baseline",
    paper=Paper("Active Retrieval Augmented Generation", "Zhengbao Jiang, Frank F. Xu, Luyu Gao, Zhiqing Sun, "
                "Qian Liu, Jane Dwivedi-Yu, Yiming Yang, Jamie Callan, Graham Neubig", 2023, "EMNLP"),
    compare=True,  # DualRAG (App. H.5, Table 16) and CIRAG (Tables 1 and 4) report it
    loop_budget="max_sentences",
    paper_settings={
        # jzbjyb/FLARE configs/2wikihop_flare_config.json: "topk": 2 documents a retrieval,
        # "look_ahead_filter_prob": 0.8 (θ), "look_ahead_mask_prob": 0.4 (β); openai.sh: max_generation_len=256
        "k": 2, "threshold": 0.8, "mask_threshold": 0.4, "max_generation_tokens": 256,
        # the paper caps tokens, not sentences: every sentence has a token, so 256 sentences never bind first
        "max_sentences": 256,
    },
)
