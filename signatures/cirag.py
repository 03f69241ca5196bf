"""CIRAG's stages (Wei et al., 2025, §3.3–3.4, App. A): entity and triple extraction of the construction phase, the
knowledge distiller of the integration phase, and the cascaded answers of ACMG.

Instructions are App. A's prompts (Figs. 9–12), with the output format they spell out by hand ("Respond with a JSON
list…", "Knowledge Triples: {"triples": …}", "Thought: … Answer: …") as typed output fields; the prompts' examples are
demos. Fig. 11 is already written as a DSPy signature (its ``[[## field ##]]`` sections are the ChatAdapter's): its
fields keep the paper's names but "Original Query", which is ``query`` here. Ours: the triple extraction also reads
the entity list (the instruction says "from the given passages and named entity lists", the figure's inputs omit it);
the sentence- and passage-level ACMG prompts, which the paper says "differ from the triplet level only in the examples
used" and does not print, are the triple-level instruction with "triples" read as "sentences" or "passages"
(:data:`CASCADE_LEVELS`, ``with_instructions`` variants).
"""

import dspy

UNANSWERABLE = "Unanswerable"  # ACMG's refusal (Fig. 12)
NO_QUESTION = "<no question>"  # the distiller's stop (Fig. 11)


class ExtractEntities(dspy.Signature):
    """Your task is to extract named entities from the given paragraph. Respond with a JSON list of entities."""

    passage: str = dspy.InputField()
    named_entities: list[str] = dspy.OutputField(min_length=1)


class ExtractTriples(dspy.Signature):
    """Your task is to construct an RDF (Resource Description Framework) graph from the given passages and named
    entity lists. Respond with a JSON list of triples, with each triple representing a relationship in the RDF graph.
    Pay attention to the following requirements: - Each triple should contain at least one, but preferably two, of
    the named entities in the list for each passage. - Clearly resolve pronouns to their specific names to maintain
    clarity."""

    title: str = dspy.InputField()
    text: str = dspy.InputField()
    named_entities: list[str] = dspy.InputField()
    triples: list[list[str]] = dspy.OutputField(desc="[subject, relation, object] triples", min_length=1)


_INTEGRATE = (
    "Your task is to loop through collecting facts to solve the query until enough facts are collected. You must plan "
    "to continue in a series of steps, looping as follows: `[[## fact_before_filter ##]]{fact_before_filter}"
    "[[## thought ##]]{thought}[[## fact_after_filter ##]]{fact_after_filter} [[## question ##]]{question}` sequence. "
    "In each step, in the `[[## fact_before_filter ##]]` section, this is the collection of facts that need to be "
    "filtered to solve the previous problem. In the `[[## thought ##]]` section, only use the information from the "
    "facts before filtering, briefly analyze the contribution of the facts to the problem, and list useful facts. "
    "Based on the analysis, determine whether the original problem can be solved. If it cannot be solved, analyze "
    "what additional information is needed and raise new questions. In the `[[## fact_after_filter ##]]` section, if "
    'there are no relevant facts, return an empty list: `{ "fact": [] }`. In the `[[## question ##]]` section, you '
    "need to use the filtered facts to propose the next problem that still needs to be solved. If the facts collected "
    "in the previous rounds are sufficient to answer the original query, output `<no question>` as the end to "
    "terminate the loop.")


class Integrate(dspy.Signature):
    __doc__ = _INTEGRATE  # Fig. 11 verbatim (its backticked loop on one line, as the paper prints it)

    query: str = dspy.InputField(desc="Original Query")
    fact_before_filter: list[str] = dspy.InputField(desc="candidate triples (subject, relation, object)")
    historical_context: list[str] = dspy.InputField(desc="the earlier rounds, one entry each")
    thought: str = dspy.OutputField()
    fact_after_filter: list[list[str]] = dspy.OutputField(desc="the useful facts as [subject, relation, object]")
    question: str = dspy.OutputField(desc='the next question, or "<no question>"')


_CASCADE = """As an advanced reading comprehension assistant, your task is to carefully analyze {unit} and extract
useful information from them to answer corresponding questions. Your response start after "Thought: ", where you will
methodically break down the reasoning process, illustrating how you arrive at conclusions. If the provided information
cannot answer the question, output Unanswerable. Conclude with "Answer: " to present a concise, definitive response,
devoid of additional elaborations."""


class CascadeAnswer(dspy.Signature):
    __doc__ = _CASCADE.format(unit="triples")

    evidence: list[str] = dspy.InputField(desc="the evidence at this level of detail")
    query: str = dspy.InputField()
    thought: str = dspy.OutputField()
    answer: str = dspy.OutputField(desc='a concise answer, or "Unanswerable"')


CASCADE_LEVELS: dict[str, type[dspy.Signature]] = {
    "triple": CascadeAnswer,
    "sentence": CascadeAnswer.with_instructions(_CASCADE.format(unit="sentences")),
    "passage": CascadeAnswer.with_instructions(_CASCADE.format(unit="passages")),
}
"""ACMG's three levels (Eqs. 5–6), finest first: the same prompt over triples, sentences or passages."""
