"""Gold stage targets from the data's annotations: the registry each method's package fills, and the pure helpers its
builders share (:mod:`multihop.optimize.gold_targets` renders and writes the rows).

A builder turns one annotated train example into zero or more ``(inputs, outputs)`` pairs for one stage of one program,
given the program (whose switches shape the targets): the stage's input fields as the program would pass them and the
target output fields. It returns ``[]`` when the example carries no annotation for that stage (a HotpotQA question has
no decomposition, say). A stage no annotation can supervise is registered with :func:`register_no_gold` and the reason,
and is left to teacher trajectories (``multihop trajectories`` without ``--gold``).

Documents shown to a stage are the example's supporting paragraphs among its own distractor paragraphs (the IRCoT corpus
of the question), ``k`` in all, shuffled with a seed drawn from the question id, so a student learns to find the
evidence among retrieved-looking noise, as it will at inference."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

import dspy

from multihop.data.corpus import Passage

from .text import split_sentences

Pairs = list[tuple[dict, dict]]
Builder = Callable[[dspy.Module, dspy.Example, "GoldContext"], Pairs]  # (program, example, context): the program's
# switches decide the targets
GOLD_BUILDERS: dict[str, dict[str, Builder]] = {}  # program class name -> stage -> builder
NO_GOLD: dict[str, dict[str, str]] = {}  # program class name -> stage -> why no annotation supervises it

PLACEHOLDER = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class GoldHop:
    """One annotated hop of a question: the title of its supporting paragraph (``entity``), the hop as a question with
    the earlier answers substituted (``query``), its answer, the paragraph (id and rendered as a passage), the
    paragraph's sentences that state the answer (``knowledge``), and ``depth``: 0 for a hop that reads no earlier
    answer, else one more than the deepest hop it reads."""

    entity: str
    query: str
    answer: str
    paragraph_id: str | None
    paragraph: str
    knowledge: str
    depth: int = 0


@dataclass(frozen=True)
class GoldContext:
    """What every builder shares: the seed of the distractors drawn beside the gold paragraphs."""

    seed: int = 0

    def rng(self, example: dspy.Example) -> random.Random:
        """A generator seeded by the question: the same rows however many questions are built, in any order."""
        return random.Random(f"{self.seed}:{example.get('id')}")


def register_gold_builder(program: str, stage: str) -> Callable[[Builder], Builder]:
    """Decorator: register the builder of ``program``'s ``stage``; a second builder for the same stage is refused."""

    def add(builder: Builder) -> Builder:
        stages = GOLD_BUILDERS.setdefault(program, {})
        if stages.get(stage, builder) is not builder:
            raise ValueError(f"{program}.{stage} has a gold builder already ({stages[stage].__qualname__})")
        stages[stage] = builder
        return builder

    return add


def register_no_gold(program: str, stage: str, why: str) -> None:
    """Record that no annotation supervises ``program``'s ``stage``, and why."""
    NO_GOLD.setdefault(program, {})[stage] = why


def gold_documents(example: dspy.Example, k: int, context: GoldContext, gold_ids: list[str] | None = None,
                   salt: str = "") -> list[Passage]:
    """The gold paragraphs (``gold_ids``, default the example's supporting ones; every one, even past ``k``) and
    enough of its unsupporting paragraphs to make ``k``, shuffled with the question's seed (and ``salt``, which gives
    each hop of a question its own draw). A paragraph the example repeats is shown once, as a merged corpus has it."""
    paragraphs = list({p.get("id"): p for p in example.get("paragraphs") or []}.values())
    wanted = set(gold_ids) if gold_ids is not None else {p.get("id") for p in paragraphs if p.get("is_supporting")}
    gold = [p for p in paragraphs if p.get("id") in wanted]
    others = [p for p in paragraphs if not p.get("is_supporting")]
    rng = random.Random(f"{context.rng(example).random()}:{salt}") if salt else context.rng(example)
    chosen = gold + rng.sample(others, min(len(others), max(0, k - len(gold))))
    rng.shuffle(chosen)
    return [Passage.make(p["title"], p["text"], p.get("id")) for p in chosen]


def reader_pairs(example: dspy.Example, k: int, context: GoldContext,
                 render: Callable[[Passage], str] = Passage.render) -> Pairs:
    """A reader's row (``passages``, ``question`` → ``answer``): the supporting paragraphs among the question's
    distractors, ``k`` in all (each shown by ``render``, as the program shows it) → the gold answer; none for a
    question without either."""
    if not example.get("answer") or not example.get("gold_passage_ids"):
        return []
    documents = [render(p) for p in gold_documents(example, k, context)]
    return [({"passages": documents, "question": example.question}, {"answer": example.answer})]


def hop_question(hop: str) -> str:
    """A MuSiQue hop as a question: ``"E >> relation"`` is "What is the relation of E?" ("What is the cast member of
    E?" for a relation already ending in "of"); a question stays as it is (``#n`` kept)."""
    if ">>" not in hop:
        return hop
    entity, relation = (part.strip() for part in hop.split(">>", 1))
    joined = "" if relation.lower().endswith(" of") else " of"
    return f"What is the {relation}{joined} {entity}?"


def evidence_sentence(text: str, answer: str) -> str:
    """The first sentence of ``text`` that states ``answer`` (case-insensitive), else its first sentence."""
    sentences = split_sentences(text)
    return next((s for s in sentences if answer.lower() in s.lower()), sentences[0] if sentences else "")


def substitute(question: str, answers: list[str]) -> str:
    """``question`` with every ``#n`` replaced by the answer of hop ``n`` (left as it is when there is none)."""
    def answer(match: re.Match) -> str:
        n = int(match.group(1))
        return answers[n - 1] if 0 < n <= len(answers) and answers[n - 1] else match.group(0)

    return " ".join(PLACEHOLDER.sub(answer, question).split())


def render_paragraph(paragraph: dict) -> str:
    """A question's paragraph as the corpus renders it as a passage."""
    return Passage.make(paragraph.get("title") or "", paragraph["text"]).render()


def annotated_hops(example: dspy.Example) -> list[GoldHop]:
    """The question's hops in annotation order, each with its supporting paragraph; empty when the question has no
    decomposition or one hop cannot be tied to its paragraph.

    - MuSiQue: one hop per decomposition step (a ``"E >> relation"`` step as :func:`hop_question` writes it, the
      earlier answers substituted for ``#n``), its paragraph the step's supporting one, its knowledge the paragraph's
      sentence that states the step's answer.
    - 2Wiki: one hop per evidence triple ``[head, relation, tail]``, a triple whose head is an earlier tail one level
      deeper; its query the record's own sub-question (else "What is the relation of head?"), its paragraph the
      supporting one titled like the head (else the one that states the tail), its knowledge that paragraph's
      supporting sentences (else its sentence stating the tail).
    """
    paragraphs = {p.get("id"): p for p in example.get("paragraphs") or []}
    if example.get("evidences"):
        return _evidence_hops(example, paragraphs)
    questions, answers = example.get("decomposition") or [], example.get("decomposition_answers") or []
    support = example.get("decomposition_support") or []
    if not questions or len(answers) != len(questions) or len(support) != len(questions) or not all(answers):
        return []
    hops: list[GoldHop] = []
    for i, (question, answer, pid) in enumerate(zip(questions, answers, support, strict=True)):
        paragraph = paragraphs.get(pid)
        if paragraph is None:
            return []
        reads = [int(n) - 1 for n in PLACEHOLDER.findall(question) if 0 < int(n) <= i]
        depth = 1 + max(hops[n].depth for n in reads) if reads else 0
        hops.append(GoldHop(paragraph["title"], substitute(hop_question(question), answers[:i]), answer, pid,
                            render_paragraph(paragraph), evidence_sentence(paragraph["text"], answer), depth))
    return hops


def _evidence_hops(example: dspy.Example, paragraphs: dict) -> list[GoldHop]:
    triples = example.evidences
    own = list(example.get("decomposition") or [])
    queries = own if len(own) == len(triples) else [f"What is the {relation} of {head}?"
                                                    for head, relation, _ in triples]
    supporting = [p for p in paragraphs.values() if p.get("is_supporting")]
    sentences = example.get("supporting_sentences") or []
    hops: list[GoldHop] = []
    for i, (head, _, tail) in enumerate(triples):
        paragraph = next((p for p in supporting if p["title"].lower() == head.lower()), None)
        if paragraph is None:
            paragraph = next((p for p in supporting if tail.lower() in p["text"].lower()), None)
        if paragraph is None:
            return []
        before = [j for j in range(i) if triples[j][2] == head]
        stated = [s for s in sentences if s in paragraph["text"]]
        knowledge = " ".join(stated) if stated else evidence_sentence(paragraph["text"], tail)
        hops.append(GoldHop(paragraph["title"], queries[i], tail, paragraph.get("id"), render_paragraph(paragraph),
                            knowledge, hops[before[-1]].depth + 1 if before else 0))
    return hops
