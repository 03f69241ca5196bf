"""Answer and retrieval metrics the papers report, and their DSPy-metric wrappers.

- ``exact_match`` / ``f1``: SQuAD v1.1 normalisation (lowercase, strip punctuation and articles, squash spaces),
  maximum over the gold answer and its aliases.
- ``accuracy`` (Acc, DualRAG/HANRAG): a normalised gold answer is contained in the normalised prediction.
- ``cover_em`` (ComposeRAG §5.1): the tokens of a gold answer (lowercased, punctuation removed, whitespace
  tokenised; articles kept, as the paper's Normalize() does) form a contiguous subsequence of the prediction's tokens.
- ``recall_at_k``: the share of a question's gold passage ids found in its first k retrieved ids (HippoRAG, CoopRAG).
  Evaluation records recall@2 and recall@5 (the papers' cut-offs) and ``recall@k``: the recall over every passage
  the program read on the question (k is the program's own count there, so programs that read different numbers of
  passages are each measured on what they read; compare it with their retrieval counts).
- ``ndcg_at_k`` and ``reciprocal_rank``: the ranking measures of IR toolkits, with binary relevance (a gold passage
  id is relevant, any other is not), as ``ranx`` computes ``ndcg@k`` and ``mrr`` for one query (the tests check them
  against ``ranx.evaluate``). Evaluation records ``ndcg@10`` and ``mrr`` over the passages in the order the program
  read them; :mod:`multihop.evaluation.results` writes them as a TREC run file for ``ranx`` or ``trec_eval``.
- ``LLMJudge``: ComposeRAG's "LLM Eval" (§5.1, App. D's evaluation prompt as the ``LLMEvaluation`` signature) over any
  LM: true when the answer aligns in meaning with a gold answer and keeps its key details. DualRAG's Acc judge asks
  the same question of a judge LM, so one judge serves both.
"""

from __future__ import annotations

import logging
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

import dspy

logger = logging.getLogger(__name__)
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
    """Whether a gold answer is contained in the prediction (after normalisation). A gold answer of several parts
    joined by "&&" (a compound question's, HANRAG §6) scores the share of its parts the prediction contains; the
    best gold answer counts."""
    pred = normalize_answer(prediction)
    return max((_share_contained(pred, g) for g in _golds(gold)), default=0.0)


def _share_contained(pred: str, gold: str) -> float:
    parts = [normalize_answer(part) for part in gold.split("&&")]
    parts = [part for part in parts if part]
    return sum(part in pred for part in parts) / len(parts) if parts else 0.0


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


def _ranked_once(ids: Sequence[str]) -> list[str]:
    """``ids`` with each id at its first rank only (a run file, as ``ranx`` keys it, holds a document once)."""
    return list(dict.fromkeys(ids))


def ndcg_at_k(ids: Sequence[str], gold_ids: Sequence[str], k: int) -> float | None:
    """nDCG@k with binary relevance: the DCG of the first ``k`` of ``ids`` (a gold id at rank r adds 1 / log2(r + 1))
    over the DCG of a ranking with every gold id first (min(k, gold) of them); an id repeated counts at its first rank
    only. None when the question has no gold passages."""
    gold = set(gold_ids)
    if not gold:
        return None
    dcg = sum(1 / math.log2(rank + 1) for rank, pid in enumerate(_ranked_once(ids)[:k], 1) if pid in gold)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(k, len(gold)) + 1))
    return dcg / ideal


def reciprocal_rank(ids: Sequence[str], gold_ids: Sequence[str], k: int | None = None) -> float | None:
    """1 / the rank of the first gold id among ``ids`` (its first ``k`` when given; a repeated id counts at its first
    rank), 0 when none is there; None when the question has no gold passages. Its mean over questions is the MRR."""
    gold = set(gold_ids)
    if not gold:
        return None
    ranked = _ranked_once(ids)
    return next((1 / rank for rank, pid in enumerate(ranked[:k] if k else ranked, 1) if pid in gold), 0.0)


ANSWER_METRICS: dict[str, Callable[[str, Sequence[str]], float]] = {
    "em": exact_match,
    "f1": f1,
    "acc": accuracy,
    "cover_em": cover_em,
}


def answer_scores(prediction: str, answers: Sequence[str]) -> dict[str, float]:
    return {name: fn(prediction or "", answers) for name, fn in ANSWER_METRICS.items()}


class LLMEvaluation(dspy.Signature):
    """You are an evaluator that determines whether an answer aligns in meaning with the ground truth answer.
    Evaluation criteria:
    a. Relevance: the answer directly addresses the question and is a coherent, appropriate response.
    b. Semantic alignment: the answer conveys the same core meaning or intent as a ground truth, even if phrased
       differently.
    c. Completeness: the answer includes all essential information present in the ground truth.
    The ground truth is a list of one or several valid expressions of the correct answer; several are semantically
    equivalent but worded differently.
    Output true if the answer aligns in meaning with at least one ground truth expression and includes all key
    details; output false if it aligns with none of them or omits important information."""

    question: str = dspy.InputField()
    ground_truth_answer: list[str] = dspy.InputField()
    our_answer: str = dspy.InputField()
    reasoning: str = dspy.OutputField(desc="whether our answer is correct compared to the ground truth")
    correct: bool = dspy.OutputField()


class LLMJudge:
    """The LLM Eval metric over ``lm`` (any ``dspy.LM``). ``judge(question, prediction, answers)`` is 1.0 or 0.0, or
    None when the judge's reply cannot be parsed or its endpoint fails (logged; the question is then left out of the
    average, never guessed, and the prediction is kept); an empty prediction scores 0 without a call."""

    def __init__(self, lm: dspy.BaseLM):
        self.lm = lm
        self.evaluate = dspy.Predict(LLMEvaluation)

    def __call__(self, question: str, prediction: str, answers: Sequence[str]) -> float | None:
        if not (prediction or "").strip():
            return 0.0
        try:
            with dspy.context(lm=self.lm):
                verdict = self.evaluate(question=question, ground_truth_answer=list(answers), our_answer=prediction)
        except Exception as exc:  # a judge failure must not cost the program's answer
            logger.warning("LLM judge failed on %r: %s", question[:80], exc)
            return None
        return float(verdict.correct is True)


def dspy_metric(name: str, judge_lm: dspy.BaseLM | None = None) -> Callable:
    """A DSPy metric ``(example, prediction, trace=None) -> float`` by name: em, f1, acc, cover_em, recall@K (a number),
    recall@k (over every passage the prediction read), ndcg@K, mrr, or llm_eval (which needs ``judge_lm``).

    Answer metrics compare ``prediction.answer`` with ``example.answers``; the retrieval metrics compare the
    prediction's passage ids (``prediction.passage_ids`` or ``prediction.ids``) with ``example.gold_passage_ids``.
    """
    if name == "llm_eval":
        if judge_lm is None:
            raise ValueError("the llm_eval metric needs a judge LM")
        judge = LLMJudge(judge_lm)

        def metric(example, prediction, trace=None):
            return judge(example.question, getattr(prediction, "answer", "") or "", example.answers) or 0.0

    elif name in ANSWER_METRICS:
        fn = ANSWER_METRICS[name]

        def metric(example, prediction, trace=None):
            return fn(getattr(prediction, "answer", "") or "", example.answers)

    elif match := re.fullmatch(r"recall@(\d+|k)", name):
        k = None if match.group(1) == "k" else int(match.group(1))

        def metric(example, prediction, trace=None):
            ids = prediction.get("passage_ids") or prediction.get("ids") or []
            return recall_at_k(ids, example.gold_passage_ids, len(ids) if k is None else k) or 0.0

    elif match := re.fullmatch(r"ndcg@(\d+)|mrr", name):
        cutoff = int(match.group(1)) if match.group(1) else None

        def metric(example, prediction, trace=None):
            ids = prediction.get("passage_ids") or prediction.get("ids") or []
            if cutoff is None:
                return reciprocal_rank(ids, example.gold_passage_ids) or 0.0
            return ndcg_at_k(ids, example.gold_passage_ids, cutoff) or 0.0

    else:
        raise ValueError(f"unknown metric {name!r}; use one of {', '.join(ANSWER_METRICS)}, llm_eval, recall@K, "
                         "recall@k, ndcg@K or mrr")
    metric.__name__ = name
    return metric
