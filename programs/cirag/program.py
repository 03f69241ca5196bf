"""CIRAG (Wei et al., 2025): iterative triple construction with provenance, the knowledge distiller's integration loop
and cascaded multi-granularity answering (ACMG) (§3.3–3.4, Fig. 2).

Each of at most ``max_iterations`` rounds (L = 4): the current query (the question, then the distiller's next question)
retrieves the top ``k`` documents (K = 10); each document's triples (``extract_entities`` then ``extract_triples``,
Figs. 9–10, or its row of the offline triple cache) keep their provenance: the document and the document's sentence most
similar to the triple by the encoder (the paper leaves that link open: ours); the triples are reranked by the encoder's
cosine to the current query (a traced ``rerank`` step, the ``cosine`` reranker) and the top ``n_triples`` (N = 30) are
the candidates. ``integrate`` (the knowledge distiller, Fig. 11, Eqs. 1–2) reads the question, the candidates and the
earlier rounds (each written in Fig. 11's section markers: its candidates, thought, core triples and next question — Eq.
2's history), and writes a thought, the core triples and the next question; the core triples are matched back to the
candidates (exact in normal form, else the same subject and object with the relation reworded, counted ``core_fuzzy``;
the others dropped and counted ``core_unmatched``) and add their triples, sentences (shown after their document's title,
ours: a pronoun's sentence keeps its subject) and documents to the three pools (Eqs. 3–4). The loop stops on a reply
that is "<no question>" (or empty, or a bare "none") or after L rounds. ACMG (Eqs. 5–6) then answers from the triple
pool; on "Unanswerable" from the sentences; then from the documents; when every level refuses (an "Unanswerable" or any
abstention), the answer is empty (never the refusal; counted ``answered.default``, Fig. 5's "default": Eq. 6 defaults to
the document level's answer, a refusal, which is never returned as an answer; a level whose pool is empty is skipped,
ours); ``topk_fallback=True`` (ours, off by default) gives the last round's top-K documents one more passage-level try
when no core document was found.

The paper's: the three phases, K = 10, N = 30, L = 4, provenance, the pools, the cascade and its order, the offline
cache (the paper's default, following KiRAG) vs online extraction, and the ablations. Ours: the triple → sentence link
(above), the fuzzy match (:func:`.triples.match_core`), the sentence- and passage-level prompts and examples (see
:mod:`multihop.signatures.cirag`), the encoder (MPNet by default; the paper's NV-Embed-v2 does not ship offline).

The baselines its paper reports (Table 1, App. B.3–B.4) run on the same retriever and backbone, each reading the top
K = 10 documents a retrieval with at most L = 4 steps through its own knob (``tables.py``'s ``BASELINES``). DualRAG
among them runs without its reranker (``rerank=None``): its own setting retrieves the top 50 for a query and reranks
them to 10 with bge-reranker (Cheng et al., 2025, §4.3, App. H.4), which CIRAG's paper does not mention; ours reads
its K = 10 per retrieval, as every method's, as the first stage's top 10 (DualRAG's Table 15 setting without the
reranker).

Switches: ``reranker=False`` (Table 2: every extracted triple is a candidate), ``granularities`` (Table 3: any
non-empty ordered subset of triple, sentence, passage), ``max_iterations`` (Fig. 8), ``triple_cache`` (a folder of
:mod:`.cache`; None: extraction at every round, Fig. 6's "online"); "w/o TD" is the base LM as the integrator and
CIRAG's distilled student is ``set_stage_lm("integrate", student)``; ``paper_demos`` gives the extractors and the
triple-level answer App. A's examples as demos (:mod:`.demos`).

Counted per question: ``iterations``, ``extraction_calls`` (LLM calls of the construction phase, apart from the
others), ``cache_hits`` / ``cache_misses`` (a passage the cache lacks is extracted online) / ``cache_failed`` (a
cached row whose extraction failed: its triples, none or few, are used as they are), ``candidates``,
``core_triples``, ``core_unmatched``, ``answered.<level>`` (which granularity answered, Figs. 3 and 5) and the
fallbacks (``<stage>.fallback``, counted by ``run_stage``): an unparsable extraction yields no triples for that
document (``extract_entities.fallback``, ``extract_triples.fallback``); an unparsable distiller reply (after one
sampled retry) ends the loop (``integrate.fallback``); an unparsable answer counts as a refusal
(``answer_<level>.fallback``).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

import dspy
import numpy as np

from multihop.data.corpus import Passage
from multihop.retrievers import Cosine, RerankStep
from multihop.retrievers.query import texts_of, titles_of
from multihop.runtime.tracing import count
from multihop.signatures.cirag import (
    CASCADE_LEVELS,
    NO_QUESTION,
    UNANSWERABLE,
    ExtractEntities,
    ExtractTriples,
    Integrate,
)

from ..base import MultihopProgram
from ..text import is_abstention, safe_answer, split_sentences, unique
from .cache import Extraction, TripleCache
from .demos import PAPER_DEMOS
from .triples import Triple, assign, match_core, well_formed

LEVELS = tuple(CASCADE_LEVELS)
SENTENCE_CACHE = 10_000  # passages whose sentence embeddings stay in memory (~5 sentences × 3 KB each)


@dataclass
class Pools:
    """The core triples, their sentences and their documents (Eqs. 3–4), each once, in order: a triple by its normal
    form (the first document stating it keeps it), a sentence by its document and text, shown after its document's
    title ("Erik Hort: He was born in Montebello." keeps the pronoun's subject)."""

    triples: dict[tuple[str, str, str], Triple] = field(default_factory=dict)
    sentences: dict[tuple[str, str], str] = field(default_factory=dict)
    documents: dict[str, str] = field(default_factory=dict)

    def add(self, core: list[Triple], passages: dict[str, Passage]) -> None:
        for triple in core:
            self.triples.setdefault(triple.key, triple)
            passage = passages.get(triple.doc_id)
            if triple.sentence:
                title = passage.title if passage is not None else ""
                self.sentences.setdefault((triple.doc_id, triple.sentence),
                                          f"{title}: {triple.sentence}" if title else triple.sentence)
            self.documents.setdefault(triple.doc_id, passage.render() if passage is not None else "")


def history_entry(candidates: list[str], thought: str, core: list[str], next_question: str) -> str:
    """One earlier round as the distiller's ``historical_context`` shows it: Fig. 11's loop sections in the paper's
    markers, the round's candidates first (Eq. 2's history holds each round's output and its candidate triples)."""
    return "\n".join([f"[[## fact_before_filter ##]]: {json.dumps(candidates, ensure_ascii=False)}",
                      f"[[## thought ##]]: {thought}",
                      f"[[## fact_after_filter ##]]: {json.dumps(core, ensure_ascii=False)}",
                      f"[[## question ##]]: {next_question}"])


def is_stop(question: str) -> bool:
    """The distiller's stop: a reply that is empty, "<no question>" (with or without its brackets, or starting the
    reply) or a bare "none" / "n/a"; a question that merely contains the words is no stop."""
    text = " ".join(str(question or "").lower().split())
    return not text or text.startswith(NO_QUESTION) or text.strip(" .<>") in {"no question", "none", "n/a", "nothing"}


class CIRAG(MultihopProgram):
    """CIRAG: rounds of triple construction with provenance and integration by the knowledge distiller, then a
    cascaded answer over triples, sentences and documents (Wei et al., 2025, §3). The module docstring says what is the
    paper's and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: documents a round retrieves (K = 10).
        n_triples: candidate triples the distiller reads after reranking (N = 30).
        max_iterations: construction/integration rounds at most (L = 4; Fig. 8).
        reranker: rerank the triples by the encoder's cosine to the query (False: Table 2's "w/o reranker").
        granularities: the cascade's levels, finest first (Table 3: any ordered subset of triple, sentence,
            passage).
        triple_cache: a ``multihop cirag extract`` folder (the paper's offline cache), or None to extract online.
        encoder: the encoder of the triple reranking and the triple → sentence link.
        paper_demos: App. A's examples as the stages' demos.
        topk_fallback: one passage-level answer over the last round's documents when no core document was found
            (ours, off).

    Example:
        >>> program = CIRAG(retriever=retriever, triple_cache="runs/triples")
        >>> prediction = program(question="Where was the director of Eisenstein in Guanajuato born?")
        >>> prediction.answer, prediction.answered_level, prediction.core_triples, prediction.rounds
    """

    count_display = {"iterations": "mean", "extraction_calls": "mean", "core_unmatched": "mean",
                     **{f"answered.{level}": "rate" for level in (*LEVELS, "top_k", "default")}}

    def __init__(
        self,
        retriever: dspy.Module | None = None,
        k: int = 10,
        n_triples: int = 30,
        max_iterations: int = 4,
        reranker: bool = True,
        granularities: tuple[str, ...] = LEVELS,
        triple_cache: str | None = None,
        encoder: str = "mpnet",
        paper_demos: bool = True,
        topk_fallback: bool = False,
    ):
        granularities = tuple(granularities)
        if not granularities or any(g not in LEVELS for g in granularities) or len(set(granularities)) != len(
                granularities):
            raise ValueError(f"granularities must be distinct levels among {', '.join(LEVELS)}, got {granularities}")
        if tuple(sorted(granularities, key=LEVELS.index)) != granularities:
            raise ValueError(f"granularities run finest first ({', '.join(LEVELS)}), got {granularities}")
        if min(k, n_triples, max_iterations) < 1:
            raise ValueError("k, n_triples and max_iterations must be at least 1")
        super().__init__(retriever=retriever)
        self.k, self.n_triples, self.max_iterations, self.reranker = k, n_triples, max_iterations, reranker
        self.granularities, self.triple_cache, self.encoder = list(granularities), triple_cache, encoder  # JSON's list
        self._cache = TripleCache(triple_cache) if triple_cache else None
        self.paper_demos, self.topk_fallback = paper_demos, topk_fallback
        if reranker:  # a traced rerank step, by the encoder's cosine (the encoder loads on first use)
            self.rank_triples = RerankStep(Cosine(encoder))
        levels = [*granularities, *(["passage"] if topk_fallback and "passage" not in granularities else [])]
        self.add_stages(PAPER_DEMOS if paper_demos else None, extract_entities=ExtractEntities,
                        extract_triples=ExtractTriples, integrate=Integrate,
                        **{f"answer_{level}": CASCADE_LEVELS[level] for level in levels})  # top-K reads passages

    def embed(self, texts: list[str]):
        from multihop.retrievers.encoder import shared_encoder

        return shared_encoder(self.encoder).encode(texts)

    def extract(self, passage: Passage) -> Extraction:
        """Figs. 9–10 on one passage: its named entities, then its triples; an unparsable reply (after
        ``run_stage``'s retry) gives none and marks the extraction failed."""
        entities = self.run_stage(self.extract_entities, {"named_entities": []}, passage=passage.render())
        triples = self.run_stage(self.extract_triples, {"triples": []}, title=passage.title, text=passage.text,
                                 named_entities=list(entities.named_entities or []))
        failed = bool(entities.get("failed")) or bool(triples.get("failed"))
        count("extraction_calls", 2)
        return Extraction([str(e) for e in entities.named_entities or []], well_formed(triples.triples), failed)

    def cached(self, pid: str) -> Extraction | None:
        """The offline cache's row of passage ``pid``; None without a cache or when it lacks the passage."""
        return self._cache.get(pid) if self._cache is not None else None

    def document_triples(self, passage: Passage) -> list[Triple]:
        """The passage's triples (cached, else extracted), each tied to its most similar sentence."""
        cached = self._cache.get(passage.id) if self._cache is not None else None
        if self._cache is not None:
            count("cache_hits" if cached is not None else "cache_misses")
            count("cache_failed", int(cached is not None and cached.failed))
        raw = (cached if cached is not None else self.extract(passage)).triples
        if not raw:
            return []
        sentences, sentence_vectors = passage_sentences(self.encoder, passage.text)
        triples = [Triple(*t, doc_id=passage.id) for t in raw]
        similarity = self.embed([t.words() for t in triples]) @ sentence_vectors.T
        return [Triple(t.subject, t.relation, t.obj, passage.id, sentences[j]) for t, j in
                zip(triples, assign(similarity.tolist()), strict=True)]

    @staticmethod
    def passages_of(hits) -> list[Passage]:
        return [Passage(pid, title, text) for pid, title, text in
                zip(hits.ids, titles_of(hits), texts_of(hits), strict=True)]

    def candidates(self, query: str, passages: list[Passage]) -> list[Triple]:
        """The round's triples, reranked by cosine to ``query`` to the top ``n_triples`` (all of them without the
        reranker). The documents' extractions are independent: they run at once on a served LM (``fan_out``)."""
        triples, seen = [], set()
        for triple in (t for document in self.fan_out(self.document_triples, passages) for t in document):
            if triple.key not in seen:  # one triple per normal form, where it first appeared
                seen.add(triple.key)
                triples.append(triple)
        if self.reranker and len(triples) > 1:
            units = dspy.Prediction(passages=[t.words() for t in triples], ids=[str(i) for i in range(len(triples))])
            triples = [triples[int(i)] for i in self.rank_triples(query, units, self.n_triples).ids]
        count("candidates", len(triples))
        return triples

    def forward(self, question: str) -> dspy.Prediction:
        pools, history, rounds, query, last = Pools(), [], [], question, []
        for _ in range(self.max_iterations):
            hits = self.search(query, k=self.k)
            last = self.passages_of(hits)
            candidates = self.candidates(query, last)
            shown = [t.render() for t in candidates]
            result = self.run_stage(self.integrate, {"thought": "", "fact_after_filter": [], "question": NO_QUESTION},
                                    retries=1, query=question, fact_before_filter=shown,
                                    historical_context=list(history))
            failed = bool(result.get("failed"))
            core, unmatched, fuzzy = match_core(result.fact_after_filter or [], candidates)
            count("core_unmatched", unmatched)
            count("core_fuzzy", fuzzy)
            pools.add(core, {p.id: p for p in last})
            next_question = " ".join(str(result.question or "").split())
            rounds.append({"query": query, "retrieved_ids": list(hits.ids), "candidates": len(candidates),
                           "thought": result.thought or "", "core": [t.render() for t in core],
                           "question": next_question})
            history.append(history_entry(shown, result.thought or "", [t.render() for t in core], next_question))
            if failed or is_stop(next_question):
                break
            query = next_question
        count("iterations", len(rounds))
        count("core_triples", len(pools.triples))
        answer, level = self.cascade(question, pools, last)
        for each in (*LEVELS, "top_k", "default"):  # every level counted on every question: a share of 0 is 0
            count(f"answered.{each}", int(each == level))
        return dspy.Prediction(answer=answer, answered_level=level, rounds=rounds,
                               core_triples=[t.render() for t in pools.triples.values()],
                               core_sentences=list(pools.sentences.values()),
                               passage_ids=list(pools.documents), retrieved_ids=unique(
                                   pid for r in rounds for pid in r["retrieved_ids"]))

    def trajectory_complete(self, prediction: dspy.Prediction) -> bool:
        """Whether a teacher's run is one of the "complete reasoning trajectories" the paper distils (§4.3; ``multihop
        trajectories --program CIRAG --complete-only``). The paper names no test: ours is every distiller reply parsed
        and the loop stopped by the distiller itself within L rounds. It tests no answer either, so ``--min-score 0``
        is its filter; a floor on the final answer's F1 is ours (``--min-score 0.01``: F1 > 0; the command's default,
        1.0, keeps exact answers only)."""
        rounds = prediction.get("rounds") or []
        return bool(rounds) and not prediction.counts.get("integrate.fallback") and is_stop(rounds[-1]["question"])

    def cascade(self, question: str, pools: Pools, last: list[Passage]) -> tuple[str, str]:
        """ACMG: the first level, finest first, whose answer is not a refusal; ``("", "default")`` when all refuse."""
        evidence = {"triple": [t.render() for t in pools.triples.values()], "sentence": list(pools.sentences.values()),
                    "passage": list(pools.documents.values())}
        for level in self.granularities:
            if evidence[level]:
                answer = self.level_answer(level, question, evidence[level])
                if answer:
                    return answer, level
        if self.topk_fallback and not pools.documents and last:
            count("topk_fallback")
            answer = self.level_answer("passage", question, [p.render() for p in last])
            if answer:
                return answer, "top_k"
        return "", "default"

    def level_answer(self, level: str, question: str, evidence: list[str]) -> str:
        """One level's answer, or "" for a refusal or an unparsable reply."""
        result = self.run_stage(getattr(self, f"answer_{level}"), {"thought": "", "answer": UNANSWERABLE},
                                evidence=evidence, query=question)
        answer = safe_answer(result.answer).rstrip(".")
        return "" if UNANSWERABLE.lower() in answer.lower() or is_abstention(answer) else answer


@functools.lru_cache(maxsize=SENTENCE_CACHE)
def passage_sentences(encoder: str, text: str) -> tuple[list[str], np.ndarray]:
    """A passage's sentences and their embeddings by ``encoder``, kept for the next round or question that reads the
    passage (the triples change with each extraction, the sentences never): the encoder's work a question does is
    its triples'."""
    from multihop.retrievers.encoder import shared_encoder

    sentences = split_sentences(text) or [text]
    return sentences, shared_encoder(encoder).encode(sentences)
