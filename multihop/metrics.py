"""Answer and retrieval metrics the papers report, and their DSPy-metric wrappers.

- ``exact_match`` / ``f1``: SQuAD v1.1 normalisation (lowercase, strip punctuation and articles, squash spaces),
  maximum over the gold answer and its aliases.
- ``accuracy`` (Acc, DualRAG/CIRAG): a normalised gold answer is contained in the normalised prediction.
- ``cover_em`` (ComposeRAG §5.1): the tokens of a gold answer (lowercased, punctuation removed, whitespace
  tokenised; articles kept, as the paper's Normalize() does) form a contiguous subsequence of the prediction's tokens.
- ``recall_at_k``: the share of a question's gold passage ids found in its first k retrieved ids (HippoRAG, CoopRAG).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _golds(gold: str | Sequence[str]) -> list[str]:
    return [gold] if isinstance(gold, str) else list(gold)


def exact_match(prediction: str, gold: str | Sequence[str]) -> float:
    return float(any(normalize_answer(prediction) == normalize_answer(g) for g in _golds(gold)))


def _f1(prediction: str, gold: str) -> float:
    pred_tokens, gold_tokens = normalize_answer(prediction).split(), normalize_answer(gold).split()
    # SQuAD's special case: yes/no/noanswer must match exactly
    if {normalize_answer(prediction), normalize_answer(gold)} & {"yes", "no", "noanswer"}:
        return float(normalize_answer(prediction) == normalize_answer(gold))
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str, gold: str | Sequence[str]) -> float:
    return max((_f1(prediction, g) for g in _golds(gold)), default=0.0)


def accuracy(prediction: str, gold: str | Sequence[str]) -> float:
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(g) and normalize_answer(g) in pred for g in _golds(gold)))


def _cover_tokens(text: str) -> list[str]:
    return "".join(ch for ch in str(text).lower() if ch not in _PUNCT).split()


def cover_em(prediction: str, gold: str | Sequence[str]) -> float:
    pred = _cover_tokens(prediction)
    for g in _golds(gold):
        tokens = _cover_tokens(g)
        n = len(tokens)
        if n and any(pred[i : i + n] == tokens for i in range(len(pred) - n + 1)):
            return 1.0
    return 0.0


def recall_at_k(ids: Sequence[str], gold_ids: Sequence[str], k: int) -> float | None:
    """Share of ``gold_ids`` in the first ``k`` of ``ids``; None when the question has no gold passages."""
    gold = set(gold_ids)
    if not gold:
        return None
    return len(gold & set(list(ids)[:k])) / len(gold)


ANSWER_METRICS: dict[str, Callable[[str, Sequence[str]], float]] = {
    "em": exact_match,
    "f1": f1,
    "acc": accuracy,
    "cover_em": cover_em,
}


def answer_scores(prediction: str, answers: Sequence[str]) -> dict[str, float]:
    return {name: fn(prediction or "", answers) for name, fn in ANSWER_METRICS.items()}


def dspy_metric(name: str) -> Callable:
    """A DSPy metric ``(example, prediction, trace=None) -> float`` by name: em, f1, acc, cover_em, or recall@k.

    Answer metrics compare ``prediction.answer`` with ``example.answers``; ``recall@k`` compares the prediction's
    passage ids (``prediction.passage_ids`` or ``prediction.ids``) with ``example.gold_passage_ids``.
    """
    if name in ANSWER_METRICS:
        fn = ANSWER_METRICS[name]

        def metric(example, prediction, trace=None):
            return fn(getattr(prediction, "answer", "") or "", example.answers)

    elif match := re.fullmatch(r"recall@(\d+)", name):
        k = int(match.group(1))

        def metric(example, prediction, trace=None):
            ids = prediction.get("passage_ids") or prediction.get("ids") or []
            return recall_at_k(ids, example.gold_passage_ids, k) or 0.0

    else:
        raise ValueError(f"unknown metric {name!r}; use one of {', '.join(ANSWER_METRICS)} or recall@K")
    metric.__name__ = name
    return metric
