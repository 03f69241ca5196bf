"""DualRAG's stages (seed 001, §3.1): the Reasoner and Entity Identifier of Reasoning-augmented Querying (RaQ), the
Knowledge Summarizer of progressive Knowledge Aggregation (pKA), and the answer from the knowledge outline.

The paper's prompts (App. A, Figs. 5–7) and the bodies of Eqs. 1–10 were lost from the seed's text; these
instructions are our reading of the prose around them:

- Reasoner (Eq. 3): one reasoning step over the outline K and the history H, and whether a knowledge gap interrupts
  it. Table 9 shows the step as one or two sentences ending in "Reason interrupt for retrieval" or "Reasoning
  completed"; here that end is the typed ``need_retrieval`` field. The rule to reason only from retrieved knowledge
  and never to speculate is §3.1's "knowledge closure" read as an instruction.
- Entity Identifier (Eq. 5): the key entities of the current knowledge demand, each with a few queries for different
  aspects of it (Table 9 shows one or two per entity), linked to the name an earlier iteration used for the same thing
  (§3.1.1's entity linking).
- Knowledge Summarizer (Eq. 9): a knowledge-demand-driven summary of one entity's new documents, kept in the
  documents' wording (Table 9's fragments quote their documents), keeping the facts that link to the next hop (§3.2's
  "latent information"), or nothing.
- Answer (Eq. 4): the answer from the final outline and history, as short as the datasets' gold answers.

Every stage runs through ``dspy.Predict``: the thought is already a field, and Tables 7–8 count no chain of thought.
"""

import dspy


class Reasoner(dspy.Signature):
    """You are a diligent researcher answering a multi-hop question step by step. Read the knowledge outline (what
    has been retrieved so far, organised by entity) and your reasoning so far, then write the next reasoning step.
    Reason only from the knowledge in the outline: never guess or speculate about a fact the outline does not state.
    If a fact the question needs is missing from the outline, say in the step which fact is missing and set
    need_retrieval to true (reasoning is interrupted for retrieval). If the outline holds every fact needed, write the
    step that concludes the answer and set need_retrieval to false (reasoning completed)."""

    question: str = dspy.InputField()
    knowledge_outline: str = dspy.InputField(desc="retrieved knowledge, by entity; empty before the first retrieval")
    reasoning_history: list[str] = dspy.InputField(desc="the earlier reasoning steps, in order")
    thought: str = dspy.OutputField(desc="the next reasoning step, one or two sentences")
    need_retrieval: bool = dspy.OutputField(desc="true when a needed fact is missing from the outline")


class EntityIdentifier(dspy.Signature):
    """You identify what must be searched for to fill a knowledge gap in multi-hop reasoning. From the question, the
    knowledge outline, the reasoning so far (its last step names the missing knowledge) and the entities already
    searched for, list the key entities or concepts whose knowledge is missing now. For each entity write a few
    search queries (at most three), each asking for a different aspect of it that the reasoning needs. When an entity
    is the same thing as one already searched for, reuse that earlier name exactly. Do not list entities whose needed
    knowledge is already in the outline."""

    question: str = dspy.InputField()
    knowledge_outline: str = dspy.InputField(desc="retrieved knowledge, by entity")
    reasoning_history: list[str] = dspy.InputField(desc="the reasoning steps, the last one names the gap")
    known_entities: list[str] = dspy.InputField(desc="entities searched for in earlier iterations")
    entities: dict[str, list[str]] = dspy.OutputField(desc="entity name → its search queries")


class KnowledgeSummarizer(dspy.Signature):
    """You are a dedicated assistant who keeps only the knowledge a multi-hop question needs. From the documents
    retrieved for one entity, write a short knowledge fragment about that entity that serves the question and the
    reasoning so far. Use the documents' own wording; add nothing they do not state. Keep the facts that connect to
    other entities of the question (names, dates, places, relations), since later reasoning steps may need them. If
    the documents hold nothing useful for the question, write an empty fragment."""

    question: str = dspy.InputField()
    reasoning_history: list[str] = dspy.InputField(desc="the reasoning steps so far")
    entity: str = dspy.InputField()
    queries: list[str] = dspy.InputField(desc="what was searched for about the entity")
    documents: list[str] = dspy.InputField(desc="documents retrieved for the entity, not summarized before")
    knowledge: str = dspy.OutputField(desc="the knowledge fragment, or empty when the documents hold nothing useful")


class OutlineAnswer(dspy.Signature):
    """Answer the multi-hop question from the knowledge outline and the reasoning steps. Give only the shortest
    answer: an entity, a date, a number or a short phrase taken from the outline; for a yes/no question answer
    exactly "yes" or "no"."""

    question: str = dspy.InputField()
    knowledge_outline: str = dspy.InputField(desc="retrieved knowledge, by entity")
    reasoning_history: list[str] = dspy.InputField(desc="the reasoning steps")
    answer: str = dspy.OutputField(desc="the shortest answer")
