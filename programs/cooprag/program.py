"""CoopRAG (Ko et al., 2025): question unrolling → unrolling-augmented retrieval → RaLa reranking → reasoning-chain
completion → reasoning (§3.1, Fig. 1).

1. ``unroll`` (§3.2, App. H.1): hop count, reasoning structure, sub-questions S and a triple chain R whose uncertain
   entities are ``<UNCERTAIN>`` and whose last tail is ``<FILL>``.
2. Retrieval (§3.3): the unrolled query U = Q ‖ S ‖ R (Eq. 1) goes to the first stage for the top ``n``. Eq. 2 scores
   ⟨q0, d0⟩, the ``[CLS]`` states: an index built for CoopRAG (on the fly by the CLI, or ``multihop index build
   --markers CoopRAG``) pools by ``[CLS]`` (``index_pooling``); any retriever handed in is used as it is.
3. Reranking (§3.4): RaLa (Eq. 4 by default, Eq. 3 or plain MaxSim as switches) keeps the top ``k``.
4. ``complete`` (§3.5, App. H.2): the placeholders are replaced by verbatim document text.
5. ``reason`` (§3.5, App. H.3): the shortest answer from the documents, question, sub-questions and completed chain.

Switches (the paper's ablations): ``uncertainty_mask=False`` is §4.6's "w/o <UNCERTAIN>" (no mask instruction, no
completion stage, reasoning over the unmasked chain, no ``<UNCERTAIN>`` in the query). It keeps ``<FILL>`` as the last
tail: Table 8 measures ``<FILL>`` generation in both variants, while Figs. 10–11 print w/o-mask chains that end in a
guessed answer; we follow Table 8 (our reading), so the guessed answer never reaches the query in either variant.
``unrolling=False`` queries with the raw question and answers from the documents alone (Table 16's MQ row);
``query_parts`` keeps only some parts of U (Table 16: ``MQ``, ``MQ+SQ``, ``MQ+RC``, default the full ``MQ+SQ+RC``;
the paper's rows prompt for only those parts, ours drop the others from the full unrolling — our approximation, one
unrolling for every row); ``rerank`` None or a reranker of the registry
(:data:`multihop.retrievers.RERANKERS`: "rala-eq4", "rala-eq3", "maxsim") with ``omega`` and ``buckets`` for RaLa
(Tables 5, 17, 23); ``unified=True`` completes and answers in one call (App. D.2, Table 15: 2 LLM calls per question
instead of 3); ``key_extract_rounds`` > 0 adds App. H.4's KeyExtract (below). The reranker's encoder keeps the
unrolling markers whole (``SPECIAL_TOKENS``); it shares the first stage's encoder and token cache when the index was
built with them (``multihop index build --markers CoopRAG``, or an encoder fine-tuned with them), and otherwise loads
the same model with them and encodes the candidates.

KeyExtract (App. H.4, Tables 12–13; the paper's iterative variant against IRCoT): after retrieving with U, the
``key_extract`` stage (Fig. 15's prompt) selects the most helpful of the retrieved documents, copies its key sentence
and gives the answer when the documents determine it, else False. While it answers False, the key sentence is appended
to the query and the retrieval runs again, at most ``key_extract_rounds`` times. The paper gives neither the number of
rounds nor which documents the later stages read; our reading: the rounds are a setting (0, off, by default; the paper's
KeyExtract rows in :mod:`.tables` run 3), the loop also stops when the key sentence is empty or already in the query,
and the documents are the ones selected in the rounds, in order, then the last retrieval's, without repeats, cut at
``k`` (each keeps the score of the retrieval that found it, so scores of different rounds are not comparable). The paper
prompts with three shots, which are not printed: the stage has no demos until an optimizer gives it some.
Fig. 15's "Beam Retrieval framework" wording and ``(Title: …)`` layout are dropped (documents are numbered
``Document [i]: title: text``).
Its answer only ends the loop: the completion and reasoning stages answer as without it. Counted:
``key_extract_rounds`` (LLM calls of the stage) and ``key_extract_answered`` (the loop ended with an answer).

Defaults the paper leaves open: k = 5 reranked documents (the top-5 its App. G examples show) and n = 20 first-stage
candidates (20 keeps the RaLa rerank under 50 ms with cached states); RaLa's buckets and layer-draw ``seed`` default
to those the encoder was fine-tuned with, else 4 buckets (App. F.3's choice) and seed 0.

Not rebuilt: Table 17's third strategy (contrasting token embeddings, Eq. 7 applied to the embeddings themselves),
which the paper reports as the weakest and does not adopt, and Table 8's entropy measurement, an analysis of the LM's
token distributions rather than a stage of the method.

Robustness (small models): an unrolling that cannot be parsed, or that returns neither sub-questions nor a chain, is
retried once (sampled), then the raw question is used (counted as ``unrolling_fallback``); a chain whose last tail is
not ``<FILL>`` gets it back (``fill_repaired``); a completion that fails keeps the masked chain
(``complete.fallback``, or ``complete_and_reason.fallback`` when unified); an answer that cannot be parsed is the
empty string, never invented.
"""

from __future__ import annotations

import dspy

from multihop.retrievers import checked_reranker
from multihop.retrievers.query import merge_hits, pick
from multihop.runtime.tracing import count
from multihop.signatures.cooprag import (
    SPECIAL_TOKENS,
    CompletionAndReasoning,
    KeyExtraction,
    QuestionUnrolling,
    QuestionUnrollingWithoutMask,
    Reasoning,
    ReasoningChainCompletion,
)

from ..base import MultihopProgram
from ..text import safe_answer
from .chain import QUERY_PARTS, normalize_chain, repair_fill, unrolled_query


class CoopRAG(MultihopProgram):
    """CoopRAG: unroll the question, retrieve with the unrolled query, rerank by contrasting layers (RaLa), complete the
    masked reasoning chain and answer (Ko et al., 2025, §3). The module docstring says what is the paper's and what is
    ours.

    Args:
        retriever: the first stage (a reranked retriever gives its first stage); default ``dspy.settings.rm``.
        n: first-stage candidates the reranker sees.
        k: documents kept after reranking, read by the later stages.
        uncertainty_mask: ``<UNCERTAIN>`` masks and the completion stage (False: §4.6 "w/o <UNCERTAIN>").
        unrolling: unroll the question (False: the raw question is the query, Table 16's MQ).
        rerank: the reranker, a name of :data:`multihop.retrievers.RERANKERS` (``rala-eq4``, ``rala-eq3``,
            ``maxsim``, ``cross-encoder:MODEL``), or None for the first stage's top ``k``.
        omega: RaLa's gap-aware weight ω (False: Table 5's "w/o ω").
        buckets: RaLa's layer buckets (None: the encoder's fine-tuning, else 4).
        unified: complete and answer in one call (App. D.2).
        seed: RaLa's layer draw (None: the encoder's fine-tuning, else 0).
        query_parts: which parts of U query the retriever (Table 16: ``MQ``, ``MQ+SQ``, ``MQ+RC``, ``MQ+SQ+RC``).
        key_extract_rounds: App. H.4's KeyExtract rounds (0: off).

    Example:
        >>> program = CoopRAG(retriever=retriever, n=20, k=5)
        >>> prediction = program(question="Who founded the company that makes the Xbox?")
        >>> prediction.answer, prediction.sub_questions, prediction.completed_chain, prediction.passage_ids
    """

    special_tokens = SPECIAL_TOKENS
    index_pooling = "cls"  # Eq. 2's first stage ⟨q0, d0⟩

    def __init__(
        self,
        retriever: dspy.Module | None = None,
        n: int = 20,
        k: int = 5,
        uncertainty_mask: bool = True,
        unrolling: bool = True,
        rerank: str | None = "rala-eq4",
        omega: bool = True,
        buckets: int | None = None,
        unified: bool = False,
        seed: int | None = None,
        query_parts: str = "MQ+SQ+RC",
        key_extract_rounds: int = 0,
    ):
        if query_parts not in QUERY_PARTS:
            raise ValueError(f"unknown query_parts {query_parts!r}; choose one of {', '.join(QUERY_PARTS)}")
        if key_extract_rounds < 0:
            raise ValueError("key_extract_rounds must be 0 (no KeyExtract) or more")
        super().__init__(retriever=retriever)
        self.key_extract_rounds = key_extract_rounds
        self.n, self.k, self.seed, self.query_parts = n, k, seed, query_parts
        self.uncertainty_mask, self.unrolling, self.unified = uncertainty_mask, unrolling, unified
        self.rerank, self.omega, self.buckets = checked_reranker(rerank), omega, buckets
        completes = unrolling and uncertainty_mask
        self.add_stages(
            unroll=(QuestionUnrolling if uncertainty_mask else QuestionUnrollingWithoutMask) if unrolling else None,
            key_extract=KeyExtraction if key_extract_rounds else None,
            complete_and_reason=CompletionAndReasoning if completes and unified else None,
            complete=ReasoningChainCompletion if completes and not unified else None,
            reason=Reasoning if not (completes and unified) else None,
        )

    def reranker_options(self) -> dict:
        """The reranker keeps the unrolling markers whole (a cross-encoder, which reads text, takes none); RaLa
        draws its layers with ``omega``, ``buckets``, ``seed``."""
        rala = {"omega": self.omega, "buckets": self.buckets, "seed": self.seed} \
            if self.rerank in ("rala-eq4", "rala-eq3") else {}
        return {"special_tokens": self.special_tokens, **rala}

    def unroll_question(self, question: str) -> dspy.Prediction:
        """Stage 1 and Eq. 1: the unrolling (sub-questions, masked chain, hop count, structure) and the query U, with
        whether it fell back to the question (both counted, with the ``<FILL>`` repair). Without unrolling, U is the
        question."""
        if not self.unrolling:
            count("unrolling_fallback", 0)
            count("fill_repaired", 0)
            return dspy.Prediction(sub_questions=[], chain=[], hop_count=None, reasoning_structure=None,
                                   query=question, fallback=False)
        unrolled = self.run_stage(self.unroll, {}, retries=1, question=question)
        sub_questions = [str(s).strip() for s in (unrolled.get("sub_questions") or []) if str(s).strip()]
        chain = normalize_chain(unrolled.get("reasoning_chain"), mask=self.uncertainty_mask)
        fallback = not sub_questions and not chain
        chain, repaired = repair_fill(chain)
        count("unrolling_fallback", int(fallback))
        count("fill_repaired", int(repaired))
        return dspy.Prediction(sub_questions=sub_questions, chain=chain, hop_count=unrolled.get("hop_count"),
                               reasoning_structure=unrolled.get("reasoning_structure"),
                               query=unrolled_query(question, sub_questions, chain, self.query_parts),
                               fallback=fallback)

    def extract_keys(self, question: str, query: str, hits) -> tuple[dspy.Prediction, str, list[dict]]:
        """App. H.4's loop from the first retrieval ``hits`` of ``query`` (U): the documents for the later stages, the
        last query and one record per round (``document``, ``key_sentence``, ``answer``)."""
        steps, selected = [], []
        for _ in range(self.key_extract_rounds):
            documents = [f"Document [{i}]: {passage}" for i, passage in enumerate(hits.passages, start=1)]
            result = self.run_stage(self.key_extract, {"document": None, "key_sentence": "", "answer": "False"},
                                    question=question, documents=documents)
            choice = result.get("document")
            sentence = str(result.get("key_sentence") or "").strip()
            step = {"document": choice, "key_sentence": sentence, "answer": str(result.get("answer") or "").strip()}
            steps.append(step)
            if isinstance(choice, int) and 1 <= choice <= len(hits.ids):
                selected.append(pick(hits, [choice - 1], [hits.scores[choice - 1]]))
            if answer_determined(step["answer"]) or not sentence or sentence in query:
                break
            query = f"{query} {sentence}"
            hits = self.search(query, k=self.k)
        count("key_extract_rounds", len(steps))
        count("key_extract_answered", int(bool(steps) and answer_determined(steps[-1]["answer"])))
        kept = merge_hits([*selected, hits], self.k)
        kept["candidates"] = list(hits.get("candidates") or hits.ids)
        return kept, query, steps

    def forward(self, question: str) -> dspy.Prediction:
        unrolled = self.unroll_question(question)
        chain = unrolled.chain
        hits = self.search(unrolled.query, k=self.k)
        query, key_steps = unrolled.query, []
        if self.key_extract_rounds:
            hits, query, key_steps = self.extract_keys(question, unrolled.query, hits)
        completed = chain
        inputs = {"documents": hits.passages, "question": question, "sub_questions": unrolled.sub_questions}
        if hasattr(self, "complete_and_reason"):
            result = self.run_stage(self.complete_and_reason, {"completed_chain": chain, "answer": ""},
                                    reasoning_chain=chain, **inputs)
            completed, answer = normalize_chain(result.completed_chain) or chain, result.answer
        else:
            if hasattr(self, "complete") and chain:
                result = self.run_stage(self.complete, {"completed_chain": chain}, reasoning_chain=chain, **inputs)
                completed = normalize_chain(result.completed_chain) or chain
            answer = self.run_stage(self.reason, {"answer": ""}, reasoning_chain=completed, **inputs).answer
        return dspy.Prediction(
            answer=safe_answer(answer),
            hop_count=unrolled.hop_count,
            reasoning_structure=unrolled.reasoning_structure,
            sub_questions=unrolled.sub_questions,
            masked_chain=chain,
            completed_chain=completed,
            query=query,
            key_extraction=key_steps,
            passages=hits.passages,
            passage_ids=hits.ids,
            scores=list(hits.scores),
            candidates=list(hits.get("candidates") or hits.ids),
        )


def answer_determined(answer: str) -> bool:
    """Whether a KeyExtract answer is one: Fig. 15 writes False (or nothing) when the documents do not determine it."""
    return answer.strip().rstrip(".").lower() not in ("", "false", "none")
