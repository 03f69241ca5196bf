"""DualRAG's stages (Cheng et al., 2025, §3.1): the Reasoner and Entity Identifier of Reasoning-augmented Querying
(RaQ), the Knowledge Summarizer of progressive Knowledge Aggregation (pKA), and the answer from the knowledge outline.

The paper's prompts for the first three (App. A, Figs. 5–7) and the bodies of Eqs. 1–10 were lost from the seed's
text; these instructions are our reading of the prose around them:

- Reasoner (Eq. 3): one reasoning step over the outline K and the history H, and whether a knowledge gap interrupts
  it. Table 9 shows the step as one or two sentences ending in "Reason interrupt for retrieval" or "Reasoning
  completed"; here that end is the typed ``need_retrieval`` field. The rule to reason only from retrieved knowledge
  and never to speculate is ours, against the hallucinations App. G reports (an inference the documents do not
  state).
- Entity Identifier (Eq. 5): the key entities of the current knowledge demand, each with a few queries for different
  aspects of it (Table 9 shows one or two per entity; the cap of three is ours), linked to the name an earlier iteration
  used for the same thing (§3.1.1's entity linking). The output is a list of entities, each with its queries, as
  Table 9 prints it ("(1) El Extraño Viaje: [queries]"): a list has a length a constrained decoder can bound, where a
  mapping of names to queries let a small model write entities until its token budget ran out.
- Knowledge Summarizer (Eq. 9): a summary of one entity's new documents driven by the knowledge demand the last
  reasoning step names (§3: "RaQ provides explicit knowledge demands that guide pKA"), close to the documents'
  wording (Table 9's fragments trim their documents to the demand), or nothing. Keeping the facts that link to other
  entities is ours: §3.2 repairs the teacher's summaries against the gold documents so that "latent information is
  preserved", which we turn into an instruction.
- Reasoning sentence ("w/o R", Table 3): the Reasoner without its retrieval flag, one sentence of a chain of thought
  as IRCoT writes it, ending the chain with "So the answer is: …"; the program retrieves after every sentence that
  does not end it.
  The paper names only the behaviour it mirrors; the instruction is ours.
- Answer (Eq. 4): the paper gives no prompt for it (its token tables count only the three modules; the final
  Reasoner step may carry the answer); a separate short-answer call from the final outline and history is our design.

Every stage runs through ``dspy.Predict``: the thought is already a field, and the per-module output budgets of
Tables 7–8 (about 200 tokens a question each) leave no room for a chain of thought on top.
"""

import dspy
from pydantic import BaseModel, Field

from .shared import MOST_ITEMS


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


class ReasoningSentence(dspy.Signature):
    """You are answering a multi-hop question step by step. Read the knowledge outline and your reasoning so far, then
    write the next sentence of the reasoning, using only knowledge the outline states. When the outline determines
    the answer, write the last sentence as "So the answer is: <answer>."."""

    question: str = dspy.InputField()
    knowledge_outline: str = dspy.InputField(desc="retrieved knowledge; empty before the first retrieval")
    reasoning_history: list[str] = dspy.InputField(desc="the earlier reasoning sentences, in order")
    thought: str = dspy.OutputField(desc="the next reasoning sentence")


class EntityQueries(BaseModel):
    """One key entity and the search queries for what is missing about it."""

    entity: str
    queries: list[str] = Field(json_schema_extra={"minItems": 1, "maxItems": 3})  # the schema only: "at most three"


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
    entities: list[EntityQueries] = dspy.OutputField(desc="each entity with its search queries", min_length=1,
                                                     max_length=MOST_ITEMS)


class KnowledgeSummarizer(dspy.Signature):
    """You are a dedicated assistant who keeps only the knowledge a multi-hop question needs. From the documents
    retrieved for one entity, write a short knowledge fragment about that entity that gives the knowledge the last
    reasoning step says is missing. Stay close to the documents' own wording; add nothing they do not state. Keep the
    facts that connect to other entities of the question (names, dates, places, relations), since later reasoning steps
    may need them. If the documents hold nothing useful for the question, write an empty fragment."""

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
