"""How well one stage call did against its gold target (:mod:`multihop.optimize.gold_targets`): pure functions of
the predicted and target output fields, chosen by the fields a stage writes, so no method is named here.

- sub-questions (``sub_questions``, ``new_decomposition``): :func:`sub_question_overlap` with the gold decomposition;
- a completed chain (``completed_chain``): :func:`chain_accuracy`;
- a verdict (``valid``, ``relevant``, ``finished``) or a label (``route``): 1 when it agrees with the gold one;
- a rewritten or next question (``rewritten_question``, ``seed_question``) or an answer (``answer``): token F1
  (citations kept: a hop's answer cites its passage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from multihop.evaluation.metrics import exact_match, f1

SCORED = ("sub_questions", "new_decomposition", "completed_chain", "valid", "relevant", "finished", "route",
          "rewritten_question", "seed_question", "answer")
AGREEMENTS = ("valid", "relevant", "finished", "route")  # scored 1 when the prediction is the gold value
SCORE_NAMES = {"sub_questions": "sub-question overlap", "new_decomposition": "sub-question overlap",
               "completed_chain": "chain accuracy", "valid": "verdict accuracy", "relevant": "verdict accuracy",
               "finished": "verdict accuracy", "route": "label accuracy", "rewritten_question": "question F1",
               "seed_question": "question F1", "answer": "answer F1"}


def sub_question_overlap(predicted: Sequence[str], gold: Sequence[str]) -> float:
    """Mean over the gold sub-questions of the best token F1 any predicted sub-question reaches (0 with none)."""
    if not gold:
        return 0.0
    return sum(max((f1(str(p), g) for p in predicted), default=0.0) for g in gold) / len(gold)


def chain_accuracy(predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> float:
    """The share of gold triples whose tail the predicted chain has, in the same position (exact match after answer
    normalisation): a completion is right where it fills in what the documents say."""
    if not gold:
        return 0.0
    right = sum(i < len(predicted) and len(predicted[i]) == 3 and bool(exact_match(str(predicted[i][2]), tail))
                for i, (_, _, tail) in enumerate(gold))
    return right / len(gold)


def scored_field(outputs: Mapping) -> str:
    """The output field a stage is scored by: the first of :data:`SCORED` it writes."""
    field = next((name for name in SCORED if name in outputs), None)
    if field is None:
        raise ValueError(f"no stage score for the outputs {sorted(outputs)}")
    return field


def stage_score(predicted: Mapping, target: Mapping) -> float:
    """The score of one stage call's ``predicted`` outputs against its gold ``target`` outputs."""
    field = scored_field(target)
    got, want = predicted.get(field), target[field]
    if field in ("sub_questions", "new_decomposition"):
        return sub_question_overlap([str(s) for s in got or []], want)
    if field == "completed_chain":
        return chain_accuracy(got if isinstance(got, list) else [], want)
    if field in AGREEMENTS:
        return float(got == want and type(got) is type(want))
    return f1(str(got or ""), str(want))
