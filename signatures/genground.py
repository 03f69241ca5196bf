"""GenGround's stages (Shi et al., ACL 2024, "Generate-then-Ground in Retrieval-Augmented Generation for Multi-hop
Question Answering").

The paper's instructions are a figure (Fig. 3) that the text does not reproduce; its §3 and the authors' released
prompts give what they ask, which these instructions say in our words:

- answer deduction I_A (§3.1, Eq. 1): break the question into simple single-hop sub-questions, one at a time, each
  naming its entity rather than a pronoun and built on the answers so far, answered directly from the LLM's own
  knowledge ("always give the answer you trust most"), until the final answer (the authors' "FINISH[...]"). Ours:
  the deduction as two stages, ``Deduce`` (the next sub-question, or the final answer) and ``ImmediateAnswer`` (its
  answer), as the authors' code asks for the answer in a second call when the first stops after the sub-question;
  the sub-questions answered so far, with their revised answers and the evidence cited, are an input field;
- instructional knowledge grounding I_G (§3.2, Eq. 3): cite the most relevant content of the documents for the
  sub-question and its candidate answer, and revise the answer with it (short and precise, fewer than twenty words,
  as the authors' revision prompt asks), or give the "Empty" signal when no document is relevant (§3.3): ``Ground``,
  each batch of the ``batch_revision="first_cited"`` switch, reading the sub-question, the candidate answer and the
  batch; ``GroundWithQuestion`` (ours, the ``grounding_inputs="with_question"`` switch) the complex question too;
- ``Revise``: the authors' code's revision (``src/genground.py``, ``_revise``), the one ``ground`` call of the default
  batch grounding: the candidate answer edited using only the documents left after the batches, the passages used
  cited, fewer than twenty words and nothing irrelevant to the sub-question; it has no "Empty" signal (the authors'
  revision always edits);
- ``CiteBatch``: the authors' code's batch grounding (``_batch_grounding``), which filters the documents before the
  one revision: the sub-question and one batch of documents alone, no candidate answer shown, and the passage that
  answers it cited, or "Empty" (the authors' "Insufficient information"). The authors' prompt has the answer
  written before the citation, but their code keeps only the document cited, so the stage outputs the citation
  alone;
- ``ReadAnswer``: the "w/o grounding" ablation's reader (§6.2: "directly generating an answer using retrieved
  documents").

I_A's in-context examples (in Fig. 3; the authors' code has a set per dataset) are left out: the stages start
zero-shot, as every stage here does, and an optimizer adds demos.
"""

import dspy

EMPTY = "Empty"  # §3.3's signal: no document of the batch can be cited


class Deduce(dspy.Signature):
    """Let's think step by step to answer the question: break the complex question into simple single-hop
    sub-questions and answer them one at a time until you get the final answer. Given the question and the
    sub-questions answered so far, either write the next sub-question, as simple and specific as possible, naming
    its entity instead of using a pronoun and using the answers found so far, or, when the answers so far give the
    final answer, say you are finished and give the final answer: an entity such as a date, a place or a person."""

    question: str = dspy.InputField()
    steps: list[str] = dspy.InputField(desc="the sub-questions answered so far, in order (empty at first)")
    finished: bool = dspy.OutputField(desc="whether the answers so far give the final answer")
    sub_question: str = dspy.OutputField(desc="the next single-hop sub-question, or empty when finished")
    final_answer: str = dspy.OutputField(desc="the final answer when finished, else empty")


class ImmediateAnswer(dspy.Signature):
    """Answer the sub-question of the complex question directly from your own knowledge, in a short sentence that
    names the key information. Always give the answer you trust most, even when you are not sure of it; do not say
    you do not know."""

    question: str = dspy.InputField(desc="the complex question")
    steps: list[str] = dspy.InputField(desc="the sub-questions answered so far, in order")
    sub_question: str = dspy.InputField()
    answer: str = dspy.OutputField()


class Ground(dspy.Signature):
    """You will be given a sub-question with a candidate answer, and some documents. Ground the candidate answer in the
    documents: cite the content of the documents most relevant to the sub-question, then revise the candidate answer
    using only that content, correcting whatever it gets wrong. The revised answer must be short and precise (fewer
    than twenty words). If no document contains information that answers the sub-question, the evidence is "Empty"
    and the revised answer is the candidate answer."""

    sub_question: str = dspy.InputField()
    answer: str = dspy.InputField(desc="the candidate answer")
    documents: list[str] = dspy.InputField()
    evidence: str = dspy.OutputField(desc='the content cited from the documents, or "Empty"')
    revised_answer: str = dspy.OutputField()


class Revise(dspy.Signature):
    """You will be given a sub-question with a candidate answer, and some documents. Edit the candidate answer using
    only the content of the documents, and cite the passages of the documents your edit uses. The edited answer must
    be short and precise (fewer than twenty words) and add nothing that is irrelevant to the sub-question."""

    sub_question: str = dspy.InputField()
    answer: str = dspy.InputField(desc="the candidate answer")
    documents: list[str] = dspy.InputField()
    evidence: str = dspy.OutputField(desc="the passages cited from the documents")
    revised_answer: str = dspy.OutputField()


class GroundWithQuestion(dspy.Signature):
    """You will be given a complex question, a simpler sub-question of it with a candidate answer, and some documents.
    Ground the candidate answer in the documents: cite the content of the documents most relevant to the
    sub-question, then revise the candidate answer using only that content, correcting whatever it gets wrong. The
    revised answer must be short and precise (fewer than twenty words). If no document contains information that
    answers the sub-question, the evidence is "Empty" and the revised answer is the candidate answer."""

    question: str = dspy.InputField(desc="the complex question")
    sub_question: str = dspy.InputField()
    answer: str = dspy.InputField(desc="the candidate answer")
    documents: list[str] = dspy.InputField()
    evidence: str = dspy.OutputField(desc='the content cited from the documents, or "Empty"')
    revised_answer: str = dspy.OutputField()


class CiteBatch(dspy.Signature):
    """Find the answer to the sub-question in the documents given, using only them, and cite the passage of the
    documents that the answer rests on. If the documents do not contain the information the sub-question needs, the
    evidence is "Empty"."""

    sub_question: str = dspy.InputField()
    documents: list[str] = dspy.InputField()
    evidence: str = dspy.OutputField(desc='the passage cited from the documents, or "Empty"')


class ReadAnswer(dspy.Signature):
    """Answer the sub-question using the retrieved documents, in a short sentence that names the key information."""

    sub_question: str = dspy.InputField()
    documents: list[str] = dspy.InputField(desc="retrieved documents, most relevant first")
    answer: str = dspy.OutputField()
