"""CoopRAG's stages (Ko et al., 2025, §3.2, §3.5 and App. H.4's KeyExtract); each docstring is the paper's prompt (App.
H.1–H.4) rewritten as DSPy instructions. The output formats the prompts spell out by hand ("Hop Count: …", ``<<ANS>>``
delimiters, H.4's ``([i], "Key Sentence"). So the answer is: …`` with ``False`` for an undetermined answer) are typed
output fields here, so the adapter formats and parses them. H.4's prompt says both "top-10" and "all 5" documents; the
key extraction sees the ``k`` documents the program retrieves.

A reasoning chain is a list of ``[head, relation, tail]`` triples; ``<UNCERTAIN>`` marks an entity the LM is not
sure of and ``<FILL>`` is the tail of the last triple, the answer to find (Eq. 1). :data:`SPECIAL_TOKENS` are the
markers CoopRAG's encoder keeps whole (``Encoder(name, special_tokens=SPECIAL_TOKENS)``, ``--markers CoopRAG``), so
an unrolled query U never splits them into word pieces and fine-tuning (§3.6) trains their embeddings.
"""

import dspy

from .shared import MOST_ITEMS

UNCERTAIN, FILL = "<UNCERTAIN>", "<FILL>"
SPECIAL_TOKENS = ("[Question]", FILL, UNCERTAIN, "[Passage]")

_UNROLLING = """You are an assistant specialized in multi-hop question answering and logical decomposition. Analyze the
question, break it down into reasoning steps and write the reasoning chain as structured triples.
1. Determine the number of hops (reasoning steps) needed to answer the question. Use everything you know; no
   external search is available.
2. Explain briefly how the question breaks down into sequential reasoning steps, without revealing factual answers.
3. Decompose the question into independent sub-questions that follow the reasoning path; each must be answerable
   with a single piece of information.
4. Write the reasoning chain as triples [head, relation, tail], drawing specific facts, relations and entities from
   your knowledge. The tail of the final triple is always "<FILL>": it stands for the answer to the question.
Sub-questions may reuse expressions from the question but never pronouns or placeholders ("it", "this person"):
use specific terms and fully spelled-out entity names, so that each sub-question is self-contained and answerable
without the others. If the question compares two things, add a sub-question that asks for that comparison with both
full names."""

_MASK = """
If you are uncertain about an entity or lack confident knowledge of it, write "<UNCERTAIN>" in its place."""


class QuestionUnrolling(dspy.Signature):
    __doc__ = _UNROLLING + _MASK

    question: str = dspy.InputField()
    hop_count: int = dspy.OutputField(desc="number of reasoning steps")
    reasoning_structure: str = dspy.OutputField(desc="brief explanation of the reasoning path")
    sub_questions: list[str] = dspy.OutputField(desc="self-contained sub-questions, in reasoning order",
                                                min_length=1, max_length=MOST_ITEMS)
    reasoning_chain: list[list[str]] = dspy.OutputField(
        desc='triples [head, relation, tail]; the last tail is "<FILL>"', min_length=1, max_length=MOST_ITEMS
    )


QuestionUnrollingWithoutMask = QuestionUnrolling.with_instructions(_UNROLLING)
"""§4.6's "w/o <UNCERTAIN>" variant: the same unrolling, with no instruction to mask uncertain entities."""


class ReasoningChainCompletion(dspy.Signature):
    """You are a triple verification agent that completes reasoning chains for multi-hop question answering. Examine
    the documents, the question, the sub-questions and the reasoning chain, whose placeholders are "<FILL>" or
    "<UNCERTAIN>".
    1. Replace every placeholder ("<FILL>", "<UNCERTAIN>" or any other) with the exact phrase or word found in the
       documents. Do not paraphrase or use synonyms: only verbatim text from the documents. If the chain is incomplete
       or needs more triples for accurate reasoning, add new triples, again using only exact phrases or words from
       the documents.
    2. The completed chain contains only verbatim terms from the documents: no introductions, explanations or
       commentary.
    3. Return the chain as a list of [head, relation, tail] triples."""

    documents: list[str] = dspy.InputField()
    question: str = dspy.InputField()
    sub_questions: list[str] = dspy.InputField()
    reasoning_chain: list[list[str]] = dspy.InputField(desc="triples with <UNCERTAIN> and <FILL> placeholders")
    completed_chain: list[list[str]] = dspy.OutputField(desc="triples [head, relation, tail], placeholders replaced",
                                                        min_length=1, max_length=MOST_ITEMS)


_REASONING = """You are a multi-hop question-answering inference agent that gives concise, factual answers based
strictly on the documents and the completed reasoning chain.
1. From the documents, the question, the sub-questions and the reasoning chain, infer the most concise and essential
   answer to the question.
2. The answer uses only phrases or words that appear in the completed reasoning chain or in the documents: no
   synonyms, paraphrases or outside knowledge.
3. Check the answer against the documents before giving it.
4. Never answer in a full sentence: return only the most concise and essential term, without appended descriptions,
   subtitles or variants. If the question is binary, answer exactly "yes" or "no"."""


class Reasoning(dspy.Signature):
    __doc__ = _REASONING

    documents: list[str] = dspy.InputField()
    question: str = dspy.InputField()
    sub_questions: list[str] = dspy.InputField()
    reasoning_chain: list[list[str]] = dspy.InputField(desc="the completed triples [head, relation, tail]")
    answer: str = dspy.OutputField(desc="the shortest answer term, or yes/no")


class CompletionAndReasoning(dspy.Signature):
    __doc__ = (
        """You are a multi-hop question-answering agent (CoopRAG unified: App. D.2 makes chain completion and
reasoning one call). First complete the reasoning chain: replace every "<FILL>" or "<UNCERTAIN>" placeholder with
the exact phrase or word found in the documents, adding triples where the chain needs them, using only verbatim
document text. Then answer the question from the documents and the completed chain.\n"""
        + _REASONING
    )

    documents: list[str] = dspy.InputField()
    question: str = dspy.InputField()
    sub_questions: list[str] = dspy.InputField()
    reasoning_chain: list[list[str]] = dspy.InputField(desc="triples with <UNCERTAIN> and <FILL> placeholders")
    completed_chain: list[list[str]] = dspy.OutputField(desc="triples [head, relation, tail], placeholders replaced",
                                                        min_length=1, max_length=MOST_ITEMS)
    answer: str = dspy.OutputField(desc="the shortest answer term, or yes/no")


class KeyExtraction(dspy.Signature):
    """You are an expert reasoning agent for multi-hop question answering, iteratively selecting and analysing the
    most relevant document at each step, in order to deduce the final answer. At each iteration you receive the
    question and the retrieved documents, each numbered "Document [i]".
    1. Analyse all the documents and select the one that contains the most relevant information.
    2. From the selected document, choose a single key sentence that best contributes to deducing the answer; it must
       be exactly the sentence you consider most informative, copied from the document.
    3. Give the final answer if it is fully determined by the documents; if it cannot be deduced yet, answer False."""

    question: str = dspy.InputField()
    documents: list[str] = dspy.InputField(desc='numbered "Document [i]: title: text"')
    document: int = dspy.OutputField(desc="the number i of the selected document")
    key_sentence: str = dspy.OutputField(desc="the most informative sentence of the selected document, verbatim")
    answer: str = dspy.OutputField(desc='the final answer when fully determined, else "False"')
