"""DualRAG (Cheng et al., 2025): Reasoning-augmented Querying (RaQ) and progressive Knowledge Aggregation (pKA) in one
loop (§3.1, Fig. 2).

Each iteration (Eqs. 1–2): the ``reason`` stage (Reasoner, Eq. 3) writes the next reasoning step over the knowledge
outline K and the history H, and says whether knowledge is missing. While it is: ``identify`` (Entity Identifier,
Eq. 5) names the entities whose knowledge is missing, each with its queries, linked to earlier entities' names → every
query retrieves the first stage's top ``n`` (Eq. 6) → each entity's documents are merged without repeats and reranked
against the entity, keeping the top ``k`` (Eqs. 7–8) → ``summarize`` (Knowledge Summarizer, Eq. 9) writes one fragment
per entity from the documents that entity has not been summarized from before → the fragments join the outline under
their entity (Eq. 10); an empty fragment is dropped, so an entity with nothing never enters it. When the Reasoner says
reasoning is complete, or after ``max_iterations`` Reasoner calls (a round asked for by the last call still retrieves
and summarizes first), ``answer`` gives the answer from K and H (Eq. 4).

The paper's: the two processes and their three LLM modules (Reasoner, Entity Identifier, Knowledge Summarizer),
the retrieval trigger, the entity-centred queries and linking, grouping the documents by entity and reranking them,
summaries driven by the knowledge demand, the outline by entity, at most five iterations (§4.3), the top-50 → top-10
retrieval (§4.3) and the ablations' names. Ours, where the text lost the equations and prompts (see
:mod:`multihop.signatures.dualrag` for the prompts): the answer is a call of its own; n = 50 and k = 10 apply to each
entity's documents (Eqs. 7–8: every query's top 50, merged, reranked to the entity's top 10); the reranker reads the
entity's name as its query; a document an entity's summary has seen is never summarized for it again (what
"progressive" needs, so a fragment is not repeated each round); at most ``max_entities`` = 4 entities a round and
``max_queries`` = 3 queries an entity (Table 9 shows two entities with two queries each), both bounds of ours on a
small model's lists. The paper's reranker is the cross-encoder bge-reranker-v2-m3 (§4.3), which does not ship
offline: ``rerank="cross-encoder:BAAI/bge-reranker-v2-m3"`` runs it (a Hugging Face Hub id, fetched into its cache
while online, or a folder of it; :class:`multihop.retrievers.CrossEncoderReranker`). ``rerank`` names any reranker
of the project's registry (:data:`multihop.retrievers.RERANKERS`); ours by default is MaxSim over the first stage's
encoder, a stand-in for the paper's, which the reproduced tables name as such until the model is given
(``reproduce --artifact reranker=MODEL``).

Switches, named after the paper's ablations; how each is carried out beyond its name is our reading:
``reasoner=False`` is Table 3's "w/o R", IRCoT's trigger: the stage writes one sentence of a chain of thought and
retrieval follows every sentence that does not say "So the answer is" (IRCoT also retrieves with the question before
the first sentence; here, as in DualRAG, the first sentence is written over the empty outline and names what it
lacks); ``entity_identifier=False`` is "w/o EI": the latest reasoning step is the query (its documents reranked
against it) and the documents are grouped by title, each title an entity with its own summary (up to k summarizer
calls a round); ``knowledge_outline=False`` is "w/o KO": no summarizer, the new raw documents join the outline, shown
as one flat list ("unstructured retrieval results"); ``outline_structure=False`` is Table 14's "w/o KO*": summaries
kept but shown as one flat list; ``rerank=None`` (or False) is Table 15's "w/o rerank": each query's top ``k`` straight
from the first stage, merged and cut to ``k`` by the first stage's scores; ``max_iterations`` is Tables 12–13's cap
(0: the answer from an empty outline, no other stage). DualRAG-FT's per-role students (Table 4) are
``set_stage_lm`` on ``reason``, ``identify`` and ``summarize``.

Counted per question: ``retrieval_iterations`` (Table 11), ``entities`` (names, or titles without the Entity
Identifier), ``queries`` (searches sent; Fig. 4's redundant queries), ``summaries``, ``empty_fragments``,
``entities_linked`` (names the linking mapped to an entity of an earlier round), ``entities_cut``; LLM calls and the
output tokens of every stage come with every trace (``completion_tokens.<stage>``, Tables 7–8). The prediction's
``passage_ids`` (what recall is measured over) are the documents summarized into a fragment the outline kept, in
order; ``retrieved_ids`` every document kept for an entity. Fallbacks, each counted (``<stage>.fallback`` by
``run_stage``): an unparsable Reasoner (after one sampled retry) stops the loop and answers (``reason.fallback``); an
Entity Identifier reply that is unparsable after one sampled retry (``identify.fallback``) or names no entity makes
the round a "w/o EI" one, the latest step (else the question) as the query (``entity_fallback``, both cases); an
unparsable summary keeps the entity's best new document as its fragment (``summarize.fallback``); an unparsable
answer is empty, never invented (``answer.fallback``).
An exception a stage raises (a dead endpoint, a context overflow) is not a fallback: it ends the question, which
evaluation records as an error and goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dspy

from multihop.retrievers import checked_reranker
from multihop.retrievers.query import Hits, titles_of
from multihop.runtime.tracing import count
from multihop.signatures.dualrag import (
    EntityIdentifier,
    KnowledgeSummarizer,
    OutlineAnswer,
    Reasoner,
    ReasoningSentence,
)

from ..base import MultihopProgram
from ..text import safe_answer, unique
from .outline import Outline, by_title, concluded, link_entities, merge_by_score


@dataclass
class EntityRecord:
    """One entity of one retrieval round: its queries, the documents kept for it, those new to it, its fragment."""

    iteration: int
    entity: str
    queries: list[str]
    passage_ids: list[str]
    new_ids: list[str]
    knowledge: list[str] = field(default_factory=list)

    def record(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Knowledge:
    """What one question has gathered: the outline, the documents each entity was summarized from, the entities
    searched for, and the documents behind the outline's fragments (in order)."""

    outline: Outline = field(default_factory=Outline)
    seen: dict[str, set[str]] = field(default_factory=dict)
    searched: list[str] = field(default_factory=list)
    outline_ids: list[str] = field(default_factory=list)


class DualRAG(MultihopProgram):
    """DualRAG: a Reasoner and an Entity Identifier query for what the reasoning lacks, a Knowledge Summarizer grows a
    knowledge outline by entity, and the answer comes from the outline (Cheng et al., 2025, §3). The module docstring
    says what is the paper's and what is ours.

    Args:
        retriever: the first stage (a reranked retriever gives its first stage); default ``dspy.settings.rm``.
        n: first-stage documents per query (§4.3: 50).
        k: documents kept per entity after reranking (§4.3: 10).
        max_iterations: Reasoner calls at most (§4.3: 5; 0: the answer from an empty outline).
        rerank: the reranker of each entity's documents, a name of :data:`multihop.retrievers.RERANKERS`
            (``cross-encoder:MODEL`` for the paper's bge-reranker-v2-m3; default ``maxsim``, a stand-in for it), or
            None (Table 15's "w/o rerank").
        reasoner: the Reasoner's retrieval flag (False: Table 3's "w/o R", IRCoT's trigger).
        entity_identifier: the Entity Identifier (False: "w/o EI", the thought is the query).
        knowledge_outline: the summarizer and the outline (False: "w/o KO", raw documents).
        outline_structure: the outline shown by entity (False: Table 14's "w/o KO*", a flat list).
        max_entities: entities a round at most (ours).
        max_queries: queries an entity at most (ours).

    Example:
        >>> program = DualRAG(retriever=retriever)
        >>> prediction = program(question="Who founded the company that makes the Xbox?")
        >>> prediction.answer, prediction.outline, prediction.retrieval_iterations
    """

    count_display = {"retrieval_iterations": "mean", "entities": "mean"}

    def __init__(
        self,
        retriever: dspy.Module | None = None,
        n: int = 50,
        k: int = 10,
        max_iterations: int = 5,
        rerank: str | None = "maxsim",
        reasoner: bool = True,
        entity_identifier: bool = True,
        knowledge_outline: bool = True,
        outline_structure: bool = True,
        max_entities: int = 4,
        max_queries: int = 3,
    ):
        rerank = checked_reranker(rerank)
        if max_iterations < 0:
            raise ValueError("max_iterations must be 0 (answer from an empty outline) or more")
        if rerank is not None and n < k:
            raise ValueError(f"the first stage must return at least k documents per query (n={n} < k={k})")
        if min(max_entities, max_queries, k) < 1:
            raise ValueError("k, max_entities and max_queries must be at least 1")
        super().__init__(retriever=retriever)
        self.n, self.k, self.max_iterations, self.rerank = n, k, max_iterations, rerank
        self.reasoner, self.entity_identifier = reasoner, entity_identifier
        self.knowledge_outline, self.outline_structure = knowledge_outline, outline_structure
        self.max_entities, self.max_queries = max_entities, max_queries
        loops = max_iterations > 0
        self.add_stages(reason=(Reasoner if reasoner else ReasoningSentence) if loops else None,
                        identify=EntityIdentifier if loops and entity_identifier else None,
                        summarize=KnowledgeSummarizer if loops and knowledge_outline else None,
                        answer=OutlineAnswer)

    def forward(self, question: str) -> dspy.Prediction:
        gathered, history, thoughts, entities = Knowledge(), [], [], []
        outline, iterations = gathered.outline, 0
        for _ in range(self.max_iterations):
            thought, needs = self.step(question, outline, history)
            thoughts.append({"thought": thought, "need_retrieval": needs})
            if thought:
                history.append(thought)
            if not needs:
                break
            iterations += 1
            entities += self.retrieval_round(question, gathered, history, iterations, demand=thought or question)
        count("retrieval_iterations", iterations)
        count("entities", len(unique(e.entity for e in entities)))
        result = self.run_stage(self.answer, {"answer": ""}, question=question,
                                knowledge_outline=self.shown(outline), reasoning_history=history)
        return dspy.Prediction(
            answer=safe_answer(result.answer),
            outline={entity: list(fragments) for entity, fragments in outline.fragments.items()},
            thoughts=thoughts,
            reasoning_history=history,
            entities=[e.record() for e in entities],
            retrieval_iterations=iterations,
            passage_ids=gathered.outline_ids,
            retrieved_ids=unique(pid for e in entities for pid in e.passage_ids),
        )

    def shown(self, outline: Outline) -> str:
        return outline.render(structured=self.knowledge_outline and self.outline_structure)

    def step(self, question: str, outline: Outline, history: list[str]) -> tuple[str, bool]:
        """One Reasoner call (Eq. 3): the thought and whether retrieval is needed. "w/o R": one IRCoT sentence,
        retrieval unless it concludes. An unparsable reply stops the loop."""
        fallback = {"thought": "", "need_retrieval": False} if self.reasoner else {"thought": ""}
        result = self.run_stage(self.reason, fallback, retries=1, question=question,
                                knowledge_outline=self.shown(outline), reasoning_history=list(history))
        thought = (result.thought or "").strip()
        if result.get("failed"):
            return thought, False
        needs = result.need_retrieval is True if self.reasoner else not concluded(thought)
        return thought, needs

    def retrieval_round(self, question: str, gathered: Knowledge, history: list[str], iteration: int, demand: str
                        ) -> list[EntityRecord]:
        """RaQ's retrieval and pKA's aggregation for one knowledge gap (``demand``: the step that named it):
        entities → documents → fragments."""
        outline = gathered.outline
        groups = self.entity_groups(question, gathered, history, demand)
        records, news = [], []
        for entity, (queries, ids, passages) in groups.items():
            done = gathered.seen.setdefault(entity, set())
            new = [(pid, passage) for pid, passage in zip(ids, passages, strict=True) if pid not in done]
            done.update(pid for pid, _ in new)
            records.append(EntityRecord(iteration, entity, queries, list(ids), [pid for pid, _ in new]))
            news.append(new)
        summarised = [(record, new) for record, new in zip(records, news, strict=True) if new]
        # each entity's documents are summarised on their own: at once on a served LM, added in the entities' order
        summaries = self.fan_out(lambda item: self.knowledge(question, history, item[0].entity, item[0].queries,
                                                             item[1]), summarised)
        for (record, new), knowledge in zip(summarised, summaries, strict=True):
            record.knowledge = knowledge
            added = [outline.add(record.entity, fragment) for fragment in knowledge]
            count("empty_fragments", added.count(False))
            if any(added):
                gathered.outline_ids.extend(pid for pid, _ in new if pid not in gathered.outline_ids)
        return records

    def entity_groups(self, question: str, gathered: Knowledge, history: list[str], demand: str
                      ) -> dict[str, tuple[list[str], list[str], list[str]]]:
        """entity → (its queries, the ids and texts of its top ``k`` documents). With the Entity Identifier, one
        group per identified entity; without it (or when its output is unusable) the latest step is the query and
        the documents group by title."""
        entities = self.identified(question, gathered, history) if self.entity_identifier else None
        if entities:
            searched = self.fan_out(lambda item: self.document_texts(*item), entities.items())  # one per entity
            return {entity: (queries, *found) for (entity, queries), found in zip(entities.items(), searched,
                                                                                 strict=True)}
        hits = self.documents(demand, [demand])
        titles = [title or passage[:60] for title, passage in zip(titles_of(hits), hits.passages, strict=True)]
        return {title: ([demand], group_ids, group_passages)
                for title, (group_ids, group_passages) in by_title(hits.ids, hits.passages, titles).items()}

    def identified(self, question: str, gathered: Knowledge, history: list[str]) -> dict[str, list[str]]:
        """Eq. 5 and the entity linking; empty when the output is unusable (counted ``entity_fallback``)."""
        known = unique(list(gathered.outline.fragments) + gathered.searched)
        result = self.run_stage(self.identify, {"entities": []}, retries=1, question=question,
                                knowledge_outline=self.shown(gathered.outline), reasoning_history=list(history),
                                known_entities=known)
        entities, linked, cut = link_entities(result.get("entities") or [], known, self.max_entities,
                                              self.max_queries)
        count("entity_fallback", int(not entities))
        count("entities_linked", linked)
        count("entities_cut", int(cut))
        gathered.searched.extend(e for e in entities if e not in gathered.searched)
        return entities

    def documents(self, anchor: str, queries: list[str]) -> Hits:
        """Eqs. 6–8: every query's first-stage top ``n`` (``k`` without reranking), merged without repeats and
        reranked against ``anchor`` (the entity) to the top ``k``."""
        hits = [self.first_stage_search(query, k=self.n if self.rerank else self.k) for query in queries]
        count("queries", len(queries))
        return self.rerank_hits(anchor, merge_by_score(hits), self.k)

    def document_texts(self, anchor: str, queries: list[str]) -> tuple[list[str], list[str]]:
        """The ids and rendered texts of :meth:`documents`."""
        hits = self.documents(anchor, queries)
        return list(hits.ids), list(hits.passages)

    def knowledge(self, question: str, history: list[str], entity: str, queries: list[str],
                  new: list[tuple[str, str]]) -> list[str]:
        """Eq. 9: the entity's fragment from its new documents; "w/o KO": the documents themselves."""
        passages = [passage for _, passage in new]
        if not self.knowledge_outline:
            return passages
        result = self.run_stage(self.summarize, {"knowledge": passages[0]}, question=question,
                                reasoning_history=list(history), entity=entity, queries=queries, documents=passages)
        count("summaries")
        return [result.knowledge or ""]
