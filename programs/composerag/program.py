"""ComposeRAG (Wu et al., 2025): atomic, swappable modules orchestrated with verification and self-reflection (§4).

Simple QA pipeline (App. A.2): retrieve the top ``k`` for the question → ``answer`` (background "none") →
``verify``. A verified answer is returned; otherwise the question escalates to the multi-hop pipeline.

Multi-hop QA pipeline (§4.2, Fig. 1): ``decompose`` into sub-questions with ``#n`` placeholders (none: the question is
its own single hop) → for each sub-question: ``construct`` (resolve ``#n`` from the earlier answers) → ``decide``
whether retrieval is needed → retrieve the top ``n`` → ``rank_passages`` (listwise, keep ``k``) → ``answer`` with
``[n]`` citations → ``verify``; a failed verification ``rewrite``s the query and retries (Fig. 4) → ``finalize`` from
the answered sub-questions. Self-reflection (§4.3, Alg. 1): ``verify_final`` checks the final answer against the
passages the hops cited; when it fails, ``improve_analysis`` diagnoses the solving record, ``improve_decomposition``
writes a new decomposition and the pipeline reruns, at most ``max_reflections`` times (3, §6.1). A final answer still
not grounded after the last reflection becomes an abstention ("I don't know.", §4.1.3: "signal an abstention if a
high-confidence, verifiable answer cannot be produced"; counted as ``abstained_ungrounded``);
``abstain_ungrounded=False`` returns it as it is. A hop whose answer fails verification after its rewrites passes that
answer on to the next hops (the paper reruns the whole decomposition instead, through self-reflection).

Switches (Tables 3, 5, 6): ``decomposition`` (QD+QC, paired as §6.2 says), ``query_rewriting`` (QR),
``passage_reranking`` (PR), ``answer_verification`` (AV), ``retrieval_decision`` (Table 5), ``simple_qa`` (Table 6),
``max_reflections`` (Fig. 5). A failed verification is what triggers QR, an escalation and a reflection, so those
need AV, and reflection needs QD. Every stage can run on its own LM with ``set_stage_lm``, and every module of the
paper (all its stages) with ``set_module_lm`` (Table 4's upgrades).

Passages: ``k`` = 10 answer a (sub-)question, as the rerank prompt asks for ("Only output the top-10 most relevant
passages") and App. A.1 keeps "the full reranked passages for future use"; the simple-QA pass reads the retriever's
top ``k``. Choices where the paper is silent: ``n`` = 10 candidates for the ranking (it then orders every passage
retrieved, which App. A.1 gives as its purpose: relevant evidence promoted from the middle of the list), one query
rewrite per sub-question (``max_rewrites``), at most 6 sub-questions, the last always kept
(MuSiQue and 2Wiki questions have at most 4 hops, but a decomposition may add a final comparison or check step: a cap of
4 dropped the comparison of 5-step decompositions; a cut is counted, ``decomposition_cut``). The first sub-question has
no earlier answers, so construction starts at the second. When retrieval is judged unnecessary, the sub-question itself
is the context; if that answer fails verification the hop retrieves after all. An abstention ("I don't know.") fails
verification without a verifier call (the verifier's step 1 rejects it by definition). An unparsable verdict counts as
not verified; an unparsable answer is an abstention; an unparsable decision retrieves; an unparsable ranking keeps the
retriever order; a ``#n`` that points to no earlier answer is left to construction, whose rule e (App. D) rewrites the
sub-question from the original question, and falls back to the original question only if a placeholder survives; a
decomposition that cannot be parsed after one retry is the question alone, whose answer generation then gets
background "none"."""

from __future__ import annotations

from dataclasses import asdict

import dspy

from multihop.runtime.tracing import count
from multihop.signatures.composerag import (
    ABSTENTION,
    DECOMPOSITION_EXAMPLES,
    REDECOMPOSITION_EXAMPLES,
    AnswerGeneration,
    AnswerVerification,
    FinalAnswering,
    FinalAnswerVerification,
    ImproveAnalysis,
    ImproveDecomposition,
    PassageReranking,
    QueryRewriting,
    QuestionConstruction,
    QuestionDecomposition,
    RetrievalDecision,
)

from ..base import MultihopProgram
from ..text import citations, clean, is_abstention, numbered, strip_citations, unique
from .composition import (
    background,
    capped,
    decomposed_information,
    final_answer,
    identifiers,
    parse_ranking,
    placeholders,
    previous_decompositions,
    qa_pairs,
    solving_record,
    substitute,
)
from .state import Hop, Solving, Verdict

MODULES = {  # the paper's module names (Tables 3-4) → this program's stages
    "QD": ("decompose", "improve_analysis", "improve_decomposition"),
    "QC": ("construct",),
    "RD": ("decide",),
    "QR": ("rewrite",),
    "PR": ("rank_passages",),
    "AG": ("answer", "finalize"),
    "AV": ("verify", "verify_final"),
}


class ComposeRAG(MultihopProgram):
    """ComposeRAG: atomic modules — decomposition, construction, retrieval decision, query rewriting, passage ranking,
    cited answers, verification, final answering — behind a simple-QA first pass, with self-reflection (Wu et al., 2025,
    §4). The module docstring says what is the paper's and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: passages a (sub-)question is answered from (the rerank prompt's top 10).
        n: candidates the listwise ranking orders (ours: 10).
        decomposition: QD and QC (Table 3).
        retrieval_decision: the retrieval decision (Table 5).
        query_rewriting: QR after a failed verification (Table 3).
        passage_reranking: PR, the LLM's listwise ranking (Table 3; the stage ``rank_passages``).
        answer_verification: AV (Table 3; rewriting, escalation and reflection act on its failures).
        simple_qa: the simple-QA pass first (Table 6).
        max_reflections: self-reflection rounds at most (§6.1: 3; Fig. 5).
        max_rewrites: query rewrites a sub-question at most (ours: 1).
        max_sub_questions: sub-questions at most, the last kept (ours: 6).
        paper_demos: the paper's worked decompositions as the decomposition stages' demos.
        abstain_ungrounded: answer "I don't know." when the final answer stays ungrounded (§4.1.3).

    Example:
        >>> program = ComposeRAG(retriever=retriever, max_reflections=3)
        >>> prediction = program(question="Who founded the company that makes the Xbox?")
        >>> prediction.answer, prediction.path, prediction.history, prediction.grounded
    """

    count_display = {"abstained": "rate", "simple_qa_resolved": "rate"}  # shares of questions: "I don't know.", Table 6

    def __init__(
        self,
        retriever: dspy.Module | None = None,
        k: int = 10,
        n: int = 10,
        decomposition: bool = True,
        retrieval_decision: bool = True,
        query_rewriting: bool = True,
        passage_reranking: bool = True,
        answer_verification: bool = True,
        simple_qa: bool = True,
        max_reflections: int = 3,
        max_rewrites: int = 1,
        max_sub_questions: int = 6,
        paper_demos: bool = True,
        abstain_ungrounded: bool = True,
    ):
        needs_verification = {"query_rewriting": query_rewriting, "simple_qa": simple_qa,
                              "max_reflections": max_reflections > 0}
        if not answer_verification and (needing := [name for name, on in needs_verification.items() if on]):
            raise ValueError(f"{', '.join(needing)} act on failed verifications: with answer_verification=False "
                             "pass query_rewriting=False, simple_qa=False, max_reflections=0")
        if max_reflections and not decomposition:
            raise ValueError("self-reflection re-decomposes the question: it needs decomposition=True")
        if max_sub_questions < 1:
            raise ValueError("max_sub_questions must be at least 1")
        super().__init__(retriever=retriever)
        self.k, self.n, self.paper_demos = k, n, paper_demos
        self.decomposition, self.retrieval_decision = decomposition, retrieval_decision
        self.query_rewriting, self.passage_reranking = query_rewriting, passage_reranking
        self.answer_verification, self.simple_qa = answer_verification, simple_qa
        self.max_reflections, self.max_rewrites = max_reflections, max_rewrites
        self.max_sub_questions, self.abstain_ungrounded = max_sub_questions, abstain_ungrounded
        demos = {"decompose": DECOMPOSITION_EXAMPLES, "improve_decomposition": REDECOMPOSITION_EXAMPLES}
        self.add_stages(demos if paper_demos else None,
                        decompose=QuestionDecomposition if decomposition else None,
                        construct=QuestionConstruction if decomposition else None,
                        decide=RetrievalDecision if retrieval_decision else None,
                        rewrite=QueryRewriting if query_rewriting else None,
                        rank_passages=PassageReranking if passage_reranking else None,
                        answer=AnswerGeneration,
                        verify=AnswerVerification if answer_verification else None,
                        finalize=FinalAnswering if decomposition else None,
                        verify_final=FinalAnswerVerification if decomposition and answer_verification else None,
                        improve_analysis=ImproveAnalysis if max_reflections else None,
                        improve_decomposition=ImproveDecomposition if max_reflections else None)

    def set_module_lm(self, module: str, lm) -> None:
        """Run one of the paper's modules (``MODULES``: QD, QC, RD, QR, PR, AG, AV) on ``lm``: every stage it has in
        this configuration (Table 4's upgrade of one module)."""
        if module not in MODULES:
            raise KeyError(f"unknown module {module!r}; modules: {', '.join(MODULES)}")
        stages = [stage for stage in MODULES[module] if stage in self.stage_names()]
        if not stages:
            raise KeyError(f"module {module} is switched off in this configuration")
        for stage in stages:
            self.set_stage_lm(stage, lm)

    def forward(self, question: str) -> dspy.Prediction:
        run = Solving(question)
        if self.simple_qa:
            hop = self.solve(run, question, pipeline=False)
            count("simple_qa_resolved", int(hop.verified))
            if hop.verified:
                run.path, run.hops = "simple", [hop]
                return self.prediction(run, hop.answer, grounded=True)
            count("escalated")
        run.decompositions.append(self.initial_decomposition(question))
        while True:
            self.solve_all(run)
            answer, grounded = self.final(run)
            if grounded is not False or len(run.analyses) == self.max_reflections:
                break
            sub_questions = self.reflect(run)
            if not sub_questions:
                count("reflection_fallback")
                break
            run.decompositions.append(sub_questions)
        abstains = grounded is False and self.abstain_ungrounded and not is_abstention(answer)  # §4.1.3
        count("abstained_ungrounded", int(abstains))
        if abstains:
            answer = ABSTENTION
        return self.prediction(run, answer, grounded)

    def initial_decomposition(self, question: str) -> list[str]:
        """QD (§4.1.1): the sub-questions, or the question as its single hop (a simple question, QD switched off, or
        a decomposition that could not be parsed)."""
        if not self.decomposition:
            return [question]
        result = self.run_stage(self.decompose, {"sub_questions": []}, retries=1, question=question)
        return self.capped(clean(result.sub_questions)) or [question]

    def capped(self, sub_questions: list[str]) -> list[str]:
        """At most ``max_sub_questions``, the last kept; a cut is counted (``decomposition_cut``)."""
        kept, cut = capped(sub_questions, self.max_sub_questions)
        count("decomposition_cut", int(cut))
        return kept

    def solve_all(self, run: Solving) -> None:
        """Iterative sub-question processing (§4.2): construct each sub-question of the current decomposition from
        the earlier answers, solve it; the round's hops replace the last round's. The hops run one after another
        even on a served LM: each is constructed from the earlier answers and answered with the earlier hops as
        background, so none is independent of the one before (no ``fan_out``)."""
        run.hops = []
        for sub_question in run.sub_questions:
            hop = self.solve(run, self.constructed(run, sub_question))
            hop.sub_question = sub_question
            run.hops.append(hop)

    def constructed(self, run: Solving, sub_question: str) -> str:
        """QC (App. A.1): the sub-question with every ``#n`` replaced by answer n. A reference to no earlier answer
        goes through construction too, whose rule e rewrites it from the original question (counted:
        ``placeholder_dangling``); a placeholder the LM left in is substituted with its answer, never with an
        abstention; one still unresolved then falls back to the original question (``placeholder_fallback``)."""
        refs = placeholders(sub_question)
        dangling = any(not 1 <= ref <= len(run.hops) for ref in refs)
        count("placeholder_dangling", int(dangling))
        if not run.hops and not dangling:
            return sub_question
        result = self.run_stage(self.construct, {"rewritten_question": ""}, original_question=run.question,
                                question_answer_pairs=qa_pairs(run.hops), new_question=sub_question)
        rewritten = (result.rewritten_question or "").strip() or sub_question
        if placeholders(rewritten):
            count("placeholder_substituted")
            answers = [None if hop.abstained else strip_citations(hop.answer).rstrip(". ") for hop in run.hops]
            rewritten = substitute(rewritten, answers)
        if placeholders(rewritten):
            count("placeholder_fallback")
            return run.question
        return rewritten

    def solve(self, run: Solving, question: str, pipeline: bool = True) -> Hop:
        """One (sub-)question: decide retrieval → retrieve (→ rank_passages) → answer → verify; a failed verification
        retrieves after a skipped retrieval, else rewrites the query (at most ``max_rewrites``) and retries. The
        pipeline's hop n is answered with the original question and the earlier hops as background. The simple
        pipeline (``pipeline=False``) is retrieve → answer → verify, once, with no background."""
        stage, note = "simple", "none"
        if pipeline:  # a question that was not decomposed is its own only hop: it has no background
            stage = f"hop {len(run.hops) + 1}"
            note = "none" if run.sub_questions == [run.question] else background(run.question, run.hops)
        retrieve = not (pipeline and self.retrieval_decision) or self.needs_retrieval(question)
        count("retrieval_skipped", int(not retrieve))
        query, last_query, queries, rewrites = question, "none", [], 0
        while True:
            if retrieve:
                queries.append(query)
                passages, ids = self.evidence(query, ranked=pipeline)
            else:
                passages, ids = [question], []
            hop = self.generate(question, passages, ids, note)
            hop.queries, hop.retrieved = list(queries), retrieve
            hop.verified = run.add_verdict(self.hop_verdict(stage, hop)) if self.answer_verification else None
            if hop.verified is not False or not pipeline:
                return hop
            if not retrieve:
                retrieve = True
                continue
            if not self.query_rewriting or rewrites == self.max_rewrites:
                return hop
            new_query = self.run_stage(self.rewrite, {"new_query": ""}, question=question,
                                       last_rewritten_query=last_query).new_query
            query = last_query = (new_query or "").strip() or query
            rewrites += 1
            count("rewrites")

    def needs_retrieval(self, question: str) -> bool:
        decision = self.run_stage(self.decide, {"needs_retrieval": True}, question=question)
        return decision.needs_retrieval is not False

    def evidence(self, query: str, ranked: bool) -> tuple[list[str], list[str]]:
        """The passages a (sub-)question is answered from: the retriever's top ``k``, or (``ranked``, the multi-hop
        pipeline with PR on) its top ``n`` ranked by the LLM (RankGPT-style listwise, §4.1.2) and cut to ``k``."""
        ranked = ranked and self.passage_reranking
        hits = self.search(query, k=self.n if ranked else self.k)
        passages, ids = list(hits.passages), list(hits.ids)
        if ranked and len(passages) > 1:
            result = self.run_stage(self.rank_passages, {"ranking": ""}, query=query,
                                    identifiers=identifiers(len(passages)), context=numbered(passages))
            order, repaired = parse_ranking(result.ranking, len(passages))
            count("rerank_repaired", int(repaired))
            passages, ids = [passages[i] for i in order], [ids[i] for i in order]
        return passages[: self.k], ids[: self.k]

    def generate(self, question: str, passages: list[str], ids: list[str], note: str) -> Hop:
        """AG (App. A.1): a cited answer, or an abstention; citations resolved to passage ids."""
        result = self.run_stage(self.answer, {"reasoning": "", "answer": ABSTENTION}, question=question,
                                context=numbered(passages), background=note)
        answer = (result.answer or "").strip() or ABSTENTION
        cited = citations(answer, len(passages))
        return Hop(question=question, passages=passages, passage_ids=ids, reasoning=result.reasoning or "",
                   answer=answer, abstained=is_abstention(answer), cited=[passages[i] for i in cited],
                   cited_ids=[ids[i] for i in cited if i < len(ids)], cited_numbers=[i + 1 for i in cited])

    def hop_verdict(self, stage: str, hop: Hop) -> Verdict:
        """AV (App. A.1) against the cited passages under the numbers the answer cites them by (all the passages read
        when it cites none), so "Bill Gates [2]." is checked against "[2] …"."""
        source = numbered(hop.cited, hop.cited_numbers) if hop.cited else numbered(hop.passages)
        return self.verdict(self.verify, stage, hop.question, hop.answer, source=source)

    def verdict(self, verifier: dspy.Predict, stage: str, question: str, answer: str, **evidence) -> Verdict:
        """One verdict: an abstention fails without a call, an unparsable reply fails."""
        if is_abstention(answer):
            return Verdict(stage, question, answer, valid=False, reason="abstained")
        result = self.run_stage(verifier, {"valid": False, "reason": "unparsable verdict"}, question=question,
                                answer=answer, **evidence)
        return Verdict(stage, question, answer, valid=result.valid is True, reason=result.reason or "")

    def final(self, run: Solving) -> tuple[str, bool | None]:
        """Final answering (App. A.1) over the answered sub-questions, and whether the answer is grounded (Alg. 1
        step 1; None without AV). A single hop on the question itself is final, with its own verdict."""
        if len(run.hops) == 1 and run.sub_questions == [run.question]:
            return run.hops[0].answer, run.hops[0].verified
        result = self.run_stage(self.finalize, {"answer": run.hops[-1].answer}, question=run.question,
                                decomposed_information=decomposed_information(run.hops))
        answer = (result.answer or "").strip() or ABSTENTION
        return answer, run.add_verdict(self.final_verdict(run, answer)) if self.answer_verification else None

    def final_verdict(self, run: Solving, answer: str) -> Verdict:
        """Alg. 1 step 1: the final answer against the passages the hops cited (all they read when none cited)."""
        hops = run.hops
        passages = unique(p for hop in hops for p in hop.cited) or unique(p for hop in hops for p in hop.passages)
        return self.verdict(self.verify_final, "final", run.question, strip_citations(answer), passages=passages)

    def reflect(self, run: Solving) -> list[str]:
        """Self-reflection (Alg. 1 steps 2-3) on the round just solved: ``improve_analysis`` diagnoses its solving
        record, ``improve_decomposition`` writes a new decomposition from every one tried so far (empty: none could
        be parsed)."""
        analysis = self.run_stage(self.improve_analysis, {"analysis": ""}, question=run.question,
                                  sub_questions_solving_record=solving_record(run.sub_questions, run.hops)).analysis
        run.analyses.append(analysis or "")
        redone = self.run_stage(self.improve_decomposition, {"new_decomposition": []}, question=run.question,
                                previous_decompositions=previous_decompositions(run.rounds()))
        count("reflections")
        return self.capped(clean(redone.new_decomposition))

    def prediction(self, run: Solving, answer: str, grounded: bool | None) -> dspy.Prediction:
        answer = final_answer(answer)
        count("abstained", int(answer == ABSTENTION))
        count("sub_questions", len(run.sub_questions))
        count("verifications", len(run.verdicts))
        count("verifications_failed", sum(not verdict.valid for verdict in run.verdicts))
        return dspy.Prediction(
            answer=answer,
            path=run.path,
            abstained=answer == ABSTENTION,
            grounded=grounded,
            sub_questions=run.sub_questions,
            decompositions=run.decompositions,
            reflection_analyses=run.analyses,
            reflections=len(run.analyses),
            history=[hop.record() for hop in run.hops],
            verdicts=[asdict(verdict) for verdict in run.verdicts],
            cited_ids=unique(i for hop in run.hops for i in hop.cited_ids),
            passage_ids=unique(i for hop in run.hops for i in hop.passage_ids),
        )
