"""HANRAG (Sun et al., 2025): the Revelator routes every question to its own path over ANRAG, the noise-resistant
single-step RAG (§4.1, Fig. 2).

``router`` (the Revelator's router, Prompt 11) names the question's route:

- straightforward → ``direct_answer`` answers from the LM's knowledge (0 steps);
- single-step → ANRAG(question) (1 step);
- compound → ``decompose`` (Prompt 10) splits it into independent sub-questions, ANRAG answers every one of them
  concurrently on a served LM (``fan_out``, one retriever shared; one after another on an in-process engine, which
  serves one call at a time), and ``aggregate`` writes the answer from the sub-questions and their answers (Eq. 5;
  1 step, as App. C and F count it);
- complex → up to ``max_steps`` rounds of {``refine`` (Prompt 12) writes the next seed question from the question and
  the seed questions answered so far → ANRAG(seed) → ``ending`` judges whether the question is settled (Eq. 12)};
  the answer is the last seed question's (Eq. 9).

ANRAG(query) retrieves the top ``k`` passages, keeps those ``relevance`` (the relevance discriminator, Prompt 13,
Eq. 13) judges relevant — one judgment a passage, sent at once to a served LM (``fan_out``) —, and ``answer`` (the
generator, Prompt 14) answers the query from them. The Revelator's five stages are ``router``, ``decompose``,
``refine``, ``relevance`` and ``ending`` (:data:`REVELATOR_STAGES`), which a LoRA Revelator serves with
``set_stage_lm`` while the generator's (``answer``, ``aggregate``, ``direct_answer``) stay on the base LM, as §4.1
keeps the generator untuned.

The paper's: the four routes and their paths, ANRAG, concurrent sub-questions, the seed-question loop ending on the
ending discriminator, the last seed answer as the answer, BM25 as the retriever (the method's declared ``first_stage``;
any project retriever by argument), Steps (§5), the ablations' names (App. E) and the idea of HANRAG-Oracle (App. C).
Ours, where the text lost Algorithm 1 and the equations or says nothing: ``k = 5`` (the paper's single-step
baseline's top 5), at most ``max_steps = 5`` seed questions (App. E's "-Ending" row averages 4.56 steps at the cap,
so the cap is at least 5; no ending judgement after the last one), at most ``max_sub_questions = 6`` sub-questions
(repeats dropped, the cut counted ``sub_questions_cut``), the oracle's labels (:mod:`.routes`: comparisons are
compound, where App. C calls whole multi-hop datasets complex), the prompts of ``ending``, ``aggregate`` and
``direct_answer`` (see :mod:`multihop.signatures.hanrag`), and the fallbacks below.

Switches: ``relevance_filter=False`` ("-Relevance discriminator": every retrieved passage reaches the generator),
``ending_judge=False`` ("-Ending discriminator": the loop runs to ``max_steps``), ``refiner=False`` ("-Refiner": the
question itself is every round's query, so its rounds retrieve the same passages and only the ending judge sees a
longer history; with DSPy's cache on, the repeated calls are served from it), ``route`` (None: the router; a route
name: every question takes it; ``"oracle"``: each question's ``gold_route`` input, HANRAG-Oracle, see
:func:`.routes.with_gold_routes`), ``max_steps``, and ``paper_demos`` (the App. G examples as the stages' demos).
Predictors exist only for the stages the switches and reachable routes use.

Counted per question: ``steps`` (the paper's Steps), ``route.<name>`` (the route taken), ``sub_questions``,
``seed_repeats`` (a seed question the refiner asked before), ``all_rejected`` (ANRAG calls whose every passage was
judged irrelevant: the generator reads the best-ranked one, the paper being silent; the hop records it as read, not
kept). The prediction's ``passage_ids`` (what recall is measured over) are the passages the generator read.
Fallbacks, each counted (``<stage>.fallback`` by ``run_stage``): an unparsable route (after one sampled retry) takes
the complex path, which subsumes the others (``router.fallback``); an unparsable decomposition asks the question whole
(``decompose.fallback``); an unparsable seed question is the question itself (``refine.fallback``; an empty one too,
``refine_empty``); an unparsable relevance verdict keeps the passage (``relevance.fallback``); an unparsable ending
verdict goes on (``ending.fallback``, bounded by ``max_steps``); an unparsable aggregate joins the sub-answers with
" && " (``aggregate.fallback``; an empty one too, ``aggregate_empty``); an unparsable answer is empty, never invented
(``answer.fallback``, ``direct_answer.fallback``). An exception a stage or a sub-question raises (a
dead endpoint) ends the question, which evaluation records as an error and goes on."""

from __future__ import annotations

from dataclasses import dataclass

import dspy

from multihop.runtime.tracing import count
from multihop.signatures.hanrag import Aggregate, Answer, Decompose, DirectAnswer, JudgeEnding, JudgeRelevance, Refine
from multihop.signatures.hanrag import Route as RouteQuestion

from ..base import MultihopProgram
from ..text import clean, safe_answer, unique
from .demos import PAPER_DEMOS
from .routes import (
    COMPLEX,
    COMPOUND,
    ROUTES,
    SINGLE_STEP,
    STRAIGHTFORWARD,
    render_steps,
    route_label,
    route_of,
    step_count,
    with_gold_routes,
)

ORACLE = "oracle"
REVELATOR_STAGES = ("router", "decompose", "refine", "relevance", "ending")


@dataclass
class Hop:
    """One ANRAG call: its query, the passages retrieved, those the relevance discriminator kept, those the generator
    read (the kept ones, or the best-ranked one when it kept none), and the answer."""

    query: str
    retrieved_ids: list[str]
    kept_ids: list[str]
    read_ids: list[str]
    answer: str = ""
    all_rejected: bool = False

    def record(self) -> dict:
        return {"query": self.query, "answer": self.answer, "retrieved_ids": self.retrieved_ids,
                "kept_ids": self.kept_ids, "read_ids": self.read_ids,
                "rejected_ids": [pid for pid in self.retrieved_ids if pid not in self.kept_ids],
                "all_rejected": self.all_rejected}


class HANRAG(MultihopProgram):
    """HANRAG: the Revelator routes each question (straightforward, single-step, compound, complex); ANRAG retrieves,
    filters the passages by relevance and answers; compound questions fan out into sub-questions answered at once;
    complex ones loop over refined seed questions until the ending judge stops them (Sun et al., 2025, §3–4). The module
    docstring says what is the paper's and what is ours.

    Args:
        retriever: the retriever (the method's first stage is BM25, §5.1); default ``dspy.settings.rm``.
        k: passages an ANRAG call retrieves (ours: 5).
        max_steps: seed questions of the complex route at most (ours: 5).
        route: None (the router), ``"oracle"`` (each question's gold route, App. C) or one route for every question.
        relevance_filter: the relevance discriminator (False: App. E's "-Relevance").
        ending_judge: the ending discriminator (False: "-Ending", the loop runs to ``max_steps``).
        refiner: the seed-question refiner (False: "-Refiner", the question itself each step).
        max_sub_questions: sub-questions of a compound question at most (ours: 6).
        paper_demos: App. G's examples as the stages' demos.

    Example:
        >>> program = HANRAG(retriever=bm25)
        >>> prediction = program(question="When was Yao Ming born and when did he retire?")
        >>> prediction.answer, prediction.route, prediction.steps, prediction.hops
    """

    count_display = {"steps": "mean", **{f"route.{route}": "rate" for route in ROUTES}}

    def __init__(
        self,
        retriever: dspy.Module | None = None,
        k: int = 5,
        max_steps: int = 5,
        route: str | None = None,
        relevance_filter: bool = True,
        ending_judge: bool = True,
        refiner: bool = True,
        max_sub_questions: int = 6,
        paper_demos: bool = True,
    ):
        if route is not None and route not in (*ROUTES, ORACLE):
            raise ValueError(f"unknown route {route!r}; choose None (the router), {ORACLE!r} or one of "
                             f"{', '.join(ROUTES)}")
        if min(k, max_steps, max_sub_questions) < 1:
            raise ValueError("k, max_steps and max_sub_questions must be at least 1")
        super().__init__(retriever=retriever)
        self.k, self.max_steps, self.route, self.max_sub_questions = k, max_steps, route, max_sub_questions
        self.relevance_filter, self.ending_judge, self.refiner = relevance_filter, ending_judge, refiner
        self.paper_demos = paper_demos
        reachable = ROUTES if route in (None, ORACLE) else (route,)
        retrieves = reachable != (STRAIGHTFORWARD,)
        self.add_stages(PAPER_DEMOS if paper_demos else None,
                        router=RouteQuestion if route is None else None,
                        direct_answer=DirectAnswer if STRAIGHTFORWARD in reachable else None,
                        decompose=Decompose if COMPOUND in reachable else None,
                        aggregate=Aggregate if COMPOUND in reachable else None,
                        refine=Refine if COMPLEX in reachable and refiner else None,
                        ending=JudgeEnding if COMPLEX in reachable and ending_judge else None,
                        relevance=JudgeRelevance if retrieves and relevance_filter else None,
                        answer=Answer if retrieves else None)

    def forward(self, question: str, gold_route: str | None = None) -> dspy.Prediction:
        route = self.choose_route(question, gold_route)
        count(f"route.{route}")
        hops, sub_questions = [], []
        if route == STRAIGHTFORWARD:
            answer = self.run_stage(self.direct_answer, {"answer": ""}, question=question).answer
        elif route == SINGLE_STEP:
            hops = [self.anrag(question)]
            answer = hops[0].answer
        elif route == COMPOUND:
            sub_questions = self.decomposition(question)
            hops = self.concurrently(sub_questions)
            answer = self.aggregated(question, hops)
        else:
            hops = self.seed_loop(question)
            answer = hops[-1].answer
        steps = step_count(route, len(hops))
        count("steps", steps)
        return dspy.Prediction(
            answer=safe_answer(answer),
            route=route,
            steps=steps,
            sub_questions=sub_questions,
            hops=[hop.record() for hop in hops],
            passage_ids=unique(pid for hop in hops for pid in hop.read_ids),
            retrieved_ids=unique(pid for hop in hops for pid in hop.retrieved_ids),
        )

    def prepare_examples(self, examples: list[dspy.Example]) -> list[dspy.Example]:
        """HANRAG-Oracle reads each example's gold route (:func:`.routes.with_gold_routes`); the others the question."""
        return with_gold_routes(examples) if self.route == ORACLE else list(examples)

    def choose_route(self, question: str, gold_route: str | None) -> str:
        if self.route == ORACLE:
            if gold_route not in ROUTES:
                raise ValueError(f"HANRAG(route='oracle') follows each question's gold_route, got {gold_route!r}: "
                                 "evaluate it (which reads the routes from the examples) or pass examples through "
                                 "multihop.programs.hanrag.with_gold_routes")
            return gold_route
        if self.route is not None:
            return self.route
        result = self.run_stage(self.router, {"route": route_label(COMPLEX)}, retries=1, question=question)
        return route_of(result.route) or COMPLEX

    def anrag(self, query: str) -> Hop:
        """ANRAG (§4.1): retrieve the top ``k``, keep the passages judged relevant, answer the query from them."""
        hits = self.search(query, k=self.k)
        passages = dict(zip(hits.ids, hits.passages, strict=True))
        if self.relevance_filter:  # one judgment a passage, independent of the others
            judged = self.fan_out(lambda pid: self.relevant(query, passages[pid]), hits.ids)
            kept = [pid for pid, relevant in zip(hits.ids, judged, strict=True) if relevant]
        else:
            kept = hits.ids
        hop = Hop(query, list(hits.ids), list(kept), list(kept))
        if not kept and hits.ids:
            hop.read_ids, hop.all_rejected = list(hits.ids[:1]), True
            count("all_rejected")
        result = self.run_stage(self.answer, {"answer": ""}, question=query,
                                documents=[passages[pid] for pid in hop.read_ids])
        hop.answer = safe_answer(result.answer)
        return hop

    def relevant(self, query: str, passage: str) -> bool:
        result = self.run_stage(self.relevance, {"relevant": True}, question=query, document=passage)
        return result.relevant is not False

    def decomposition(self, question: str) -> list[str]:
        result = self.run_stage(self.decompose, {"thought": "", "sub_questions": [question]}, retries=1,
                                question=question)
        sub_questions = unique(clean(result.sub_questions))
        count("sub_questions_cut", max(0, len(sub_questions) - self.max_sub_questions))
        sub_questions = sub_questions[: self.max_sub_questions] or [question]
        count("sub_questions", len(sub_questions))
        return sub_questions

    def concurrently(self, queries: list[str]) -> list[Hop]:
        """ANRAG on every query at once (§4.1's "asynchronous execution") through :meth:`fan_out`: the LM, the
        retriever and this trace go into its threads, whose records are kept in the queries' order. The exception of
        the first query to fail is raised here."""
        return self.fan_out(self.anrag, queries)

    def aggregated(self, question: str, hops: list[Hop]) -> str:
        joined = " && ".join(hop.answer for hop in hops)
        result = self.run_stage(self.aggregate, {"answer": joined}, question=question,
                                sub_questions=[hop.query for hop in hops], sub_answers=[hop.answer for hop in hops])
        answer = safe_answer(result.answer)
        count("aggregate_empty", int(not answer and not result.get("failed")))
        return answer or joined

    def seed_loop(self, question: str) -> list[Hop]:
        """The complex route: seed question → ANRAG → ending judgement, at most ``max_steps`` times."""
        hops: list[Hop] = []
        for step in range(1, self.max_steps + 1):
            seed = self.next_seed(question, hops)
            if self.refiner:
                count("seed_repeats", int(any(hop.query == seed for hop in hops)))
            hops.append(self.anrag(seed))
            if step == self.max_steps or (self.ending_judge and self.finished(question, hops)):
                break  # no ending judgement after the last step: it could change nothing
        return hops

    def next_seed(self, question: str, hops: list[Hop]) -> str:
        if not self.refiner:
            return question
        result = self.run_stage(self.refine, {"seed_question": ""}, retries=1, question=question,
                                thought=render_steps([(hop.query, hop.answer) for hop in hops]))
        seed = " ".join(str(result.seed_question or "").split())
        count("refine_empty", int(not seed and not result.get("failed")))
        return seed or question

    def finished(self, question: str, hops: list[Hop]) -> bool:
        result = self.run_stage(self.ending, {"finished": False}, question=question,
                                thought=render_steps([(hop.query, hop.answer) for hop in hops]))
        return result.finished is True
