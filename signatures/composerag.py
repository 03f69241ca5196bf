"""ComposeRAG's modules (Wu et al., 2025, §4.1, App. A.1); each docstring is the paper's App. D prompt written as DSPy
instructions. The prompts already name their input and output fields ("Input fields are: … Output fields are: …"):
those are the fields here, typed, so the adapter formats and parses them (the "Output: true/false" verdicts are
``bool`` fields and a decomposition is a ``list[str]``). The worked examples of the decomposition prompts are
``dspy.Example`` demos (``DECOMPOSITION_EXAMPLES``, ``REDECOMPOSITION_EXAMPLES``), so an optimizer can replace them.
"""

import dspy

from .shared import MOST_ITEMS

ABSTENTION = "I don't know."


class QuestionDecomposition(dspy.Signature):
    """You are an expert skilled at analyzing complex questions and decomposing them into distinct and simpler
    sub-questions. Analyze the input question and determine whether it requires decomposition. Give the reasoning that
    explains why decomposition was needed and the logic behind breaking the question into sub-questions.
    If the question is already simple and does not require decomposition, output an empty list. Otherwise, decompose
    the question into multiple distinct, interconnected, self-contained sub-questions.
    If a sub-question depends on the answer to a previous sub-question, refer to that sub-question as "#number"; do
    not write "based on".
    Simple questions do not require identifying multiple intermediate steps or facts before answering: they can be
    answered by retrieving a single piece of information or by directly comparing two known entities.
    Questions that require multiple steps of reasoning or fact-finding, where each step depends on the answer to a
    previous one, get interconnected sub-questions such that, once all are answered in sequence, the original
    question can be answered.
    For comparison questions, the final sub-question presents the information from the previous sub-questions as
    declarative sentences and restates the original question, so that the comparison can be made from them."""

    question: str = dspy.InputField()
    reasoning: str = dspy.OutputField(desc="how the question decomposes, and why")
    sub_questions: list[str] = dspy.OutputField(desc='sub-questions in order, "#n" refers to answer n; [] if simple')


class QuestionConstruction(dspy.Signature):
    """You are given the original question and a list of answered sub-questions with their answers and reasonings,
    labelled "Question #n", "Reasoning #n" and "Answer #n". A new question may reference earlier answers with these
    labels ("#n"). Rewrite the new question by replacing every reference with the corresponding answer:
    a. Identify all placeholders in the new question ("#1", "#2", …).
    b. Find the corresponding answer among the previous question-answer pairs.
    c. From that answer, extract the key information that logically replaces the placeholder (a word or a phrase),
       ignoring background and explanations.
    d. Rewrite the new question with each placeholder replaced by that key information.
    e. If the corresponding answer gave no useful information, rewrite the sub-question from the original question
       so that it is understandable and answerable.
    f. Adjust the wording if needed so the rewritten question is grammatical and coherent.
    g. If there are no placeholders or nothing relevant to substitute, return the new question unchanged."""

    original_question: str = dspy.InputField(desc="the question the sub-questions derive from")
    question_answer_pairs: str = dspy.InputField(desc="the previous questions, reasonings and answers")
    new_question: str = dspy.InputField(desc="the question to rewrite")
    rewritten_question: str = dspy.OutputField()


class RetrievalDecision(dspy.Signature):
    """You are given a question. Decide whether it already contains enough information to be answered without
    retrieving more.
    a. Check the question and analyze it thoroughly.
    b. If everything required to answer it is stated in, or can be inferred from, the text of the question itself,
       output false (no retrieval needed).
    c. Otherwise, if key information is missing, output true (retrieval needed).
    d. Do not rely on your own knowledge to answer the question: decide only from the question text.
    For example, "What is the birth date of Lily?" needs retrieval (true); "Alice was born on April 6, 2001 and Jack
    on May 15, 2002. Which person was born earlier?" does not (false): it only needs a comparison."""

    question: str = dspy.InputField()
    analysis: str = dspy.OutputField(desc="whether the question needs retrieval, and why")
    needs_retrieval: bool = dspy.OutputField()


class QueryRewriting(dspy.Signature):
    """You are an expert in refining and optimizing retrieval queries. Rewrite the question into a concise and
    effective retrieval query that captures its key intent and is optimized for precision. If a last rewritten query
    is given, use it as a reference for continuity and improvement; if it is "none", the original question was used
    as-is for retrieval: rewrite the query from scratch. For example: "What is the capital of France?" with last query
    "Capital city of France" → "France capital city"; "What is the tallest mountain in the world?" with last query
    "none" → "Tallest mountain in the world"."""

    question: str = dspy.InputField()
    last_rewritten_query: str = dspy.InputField()
    new_query: str = dspy.OutputField()


class PassageReranking(dspy.Signature):
    """You are an intelligent assistant that ranks passages by their relevance to the query. Each passage is
    indicated by a numerical identifier []. Rank the passages by how well their content can be used to directly
    answer the query. Output only the top-10 most relevant passages, in descending order of relevance; if fewer than
    10 passages are given, rank all of them. Give the reasoning for the ranking. The ranking has the format
    [x] > [y] > [z] > … and contains exactly 10 identifiers if 10 or more are available, all of them otherwise.
    Use only ">": no "=" or "<", always a descending ranking. For example, identifiers [1], [2], [3], [4], [5] →
    [2] > [3] > [5] > [1] > [4]."""

    query: str = dspy.InputField()
    identifiers: str = dspy.InputField(desc="the numerical identifiers of the passages")
    context: list[str] = dspy.InputField(desc="the passages to rank, each starting with its identifier")
    reasoning: str = dspy.OutputField(desc="how the passages were selected and ranked")
    ranking: str = dspy.OutputField(desc="[x] > [y] > [z] > …")


class AnswerGeneration(dspy.Signature):
    """Answer the question using only the information in the context. Reason through the context to get the answer
    and present the relevant information in your reasoning. If, after careful reasoning, the context does not provide
    enough information to answer the question, answer: "I don't know."
    The question may be one simplified step (one hop) of a more complex question. To remove ambiguity, the background
    may give the original full question and the answers to previous sub-questions. Use the background only to
    understand the intent of the question: do not extract facts from it or cite it. The background may be "none".
    Include a citation for every factual statement in the answer: the context number(s) in square brackets right
    after the information, as [number], or [number1][number2] when several contexts support it (e.g. "She wrote book
    A [2] and book B [4]."). Omit citations only when you answer "I don't know."
    The answer must be accurate, direct, complete and concise, without background or explanation beyond what
    answers the question."""

    question: str = dspy.InputField()
    context: list[str] = dspy.InputField(desc="numbered passages that may contain relevant information")
    background: str = dspy.InputField(desc="the original question and earlier hops with answers, or none")
    reasoning: str = dspy.OutputField(desc="reasoning to the answer")
    answer: str = dspy.OutputField(desc="the answer with [n] citations, or I don't know.")


class AnswerVerification(dspy.Signature):
    """You are a verifier. Determine whether the answer correctly solves the question and is well supported by the
    cited context(s), in two steps.
    Step 1, answer quality: the answer must correctly, directly and fully answer the question; it must not be vague,
    evasive or incomplete. If it fails to give a valid, specific response (for example "not enough information" or
    "I don't know"), output false.
    Step 2, citation support (only if step 1 passes): every claim in the answer must be explicitly supported by the
    cited context(s); the answer must not include information that is missing from or unsupported by them.
    Always give a brief explanation as the reason. Output true if the answer is correct and fully supported, false if
    it is incorrect or not supported."""

    question: str = dspy.InputField()
    answer: str = dspy.InputField()
    source: list[str] = dspy.InputField(desc="the cited contexts")
    reason: str = dspy.OutputField()
    valid: bool = dspy.OutputField()


class FinalAnswering(dspy.Signature):
    """A multi-hop question cannot be answered from a single piece of information or in one step: it requires
    combining information from several sources or completing several logical steps. It has been decomposed into
    smaller sub-questions, which have been answered with reasonings. Combine these pieces of information to answer
    the original question thoroughly and accurately, and articulate your reasoning.
    a. Read the sub-questions with their reasonings and answers carefully.
    b. Integrate the answers to the sub-questions into a single, coherent answer to the original question.
    c. Make the final answer simple, clear, concise and correct."""

    question: str = dspy.InputField(desc="the original multi-hop question")
    decomposed_information: str = dspy.InputField(desc="the answered sub-questions")
    reasoning: str = dspy.OutputField()
    answer: str = dspy.OutputField()


class FinalAnswerVerification(dspy.Signature):
    """You are a verifier that determines whether an answer is correct and well supported by the passages.
    a. The answer must be factually correct according to the passages.
    b. The answer must fully and directly address the question, without omitting critical details.
    c. The answer must be explicitly substantiated by the passages: every claim in it is directly supported by them,
       without external knowledge.
    d. If the passages do not contain enough information to support the answer, or the answer includes information
       not found in them, the answer is incorrect.
    e. The question always has an answer. If no valid answer can be determined from the passages, either the question
       has problems or the supporting passages are missing: the answer is then incorrect by default; output false,
       no exceptions.
    Give a brief justification as the reason. Output true only if the answer is factually accurate, relevant,
    complete and fully supported by the passages; otherwise output false."""

    question: str = dspy.InputField()
    answer: str = dspy.InputField()
    passages: list[str] = dspy.InputField(desc="the supporting passages for the answer")
    reason: str = dspy.OutputField(desc="why the answer is correct or incorrect")
    valid: bool = dspy.OutputField()


class ImproveAnalysis(dspy.Signature):
    """You are an expert in multi-hop question answering and decomposition. Analyze the question's decomposition and
    give high-level guidance on how to correct and improve it, if necessary. Use the rewritten sub-questions,
    reasonings and answers only to detect decomposition flaws, not to inform your revised logic.
    Assume the current decomposition may be incorrect. Give structured, bullet-pointed instructions on how to improve
    it by:
    a. proposing a logical, step-by-step breakdown of the question;
    b. making the sub-questions extract the critical information in the right order;
    c. avoiding dependency errors and the propagation of uncertain information.
    If the decomposition is already sound and each sub-question is clearly answerable, answer: "The previous
    decomposition is appropriate. Please follow the same structure."
    Do not write new sub-questions: give only high-level instructions on how the question should be decomposed."""

    question: str = dspy.InputField()
    sub_questions_solving_record: str = dspy.InputField(desc="the decomposition and how each sub-question was solved")
    analysis: str = dspy.OutputField(desc="instructions for the new decomposition logic")


class ImproveDecomposition(dspy.Signature):
    """You are an expert in multi-hop reasoning and question decomposition. Analyze the original question and the
    previous decomposition(s), which were found to be incorrect, and write a new, logically sound decomposition that
    leads to the correct final answer.
    a. The previous decomposition(s) are incorrect and led to wrong final answers.
    b. Do not rely on their structure: construct a fresh, logically valid decomposition directly from the question.
    c. If several incorrect decompositions are given, identify the reasoning flaws in each first.
    d. Use the improvement instructions for help.
    e. Explain the logic behind the new decomposition in the reasoning; it should differ from the previous ones.
    f. The new sub-questions follow a proper reasoning order and can be answered step by step to reach the answer.
    g. If a sub-question depends on a previous answer, reference it explicitly as "#number", never "based on"."""

    question: str = dspy.InputField()
    previous_decompositions: str = dspy.InputField(desc="the incorrect decompositions and the instructions to improve")
    reasoning: str = dspy.OutputField(desc="the logic behind the new decomposition")
    new_decomposition: list[str] = dspy.OutputField(desc='the new sub-questions in order, "#n" refers to answer n',
                                                    min_length=1, max_length=MOST_ITEMS)


def _decomposition(question: str, reasoning: str, sub_questions: list[str]) -> dspy.Example:
    return dspy.Example(question=question, reasoning=reasoning, sub_questions=sub_questions).with_inputs("question")


DECOMPOSITION_EXAMPLES = [
    _decomposition("What is the capital of France?",
                   "The question asks for a direct fact that does not require multiple steps or dependencies.", []),
    _decomposition("Who is the CEO of the company owns the brand that produces iPhones?",
                   "The company associated with the brand producing iPhones must be identified first; then its CEO "
                   "can be identified. This logical dependency makes decomposition necessary.",
                   ["What is the company owns the brand that produces iPhones?", "Who is the CEO of #1?"]),
    _decomposition("Which river is longer, Nile or Tigris?",
                   "The lengths of the two rivers must first be identified individually before they can be compared.",
                   ["What is the length of Nile?", "What is the length of Tigris?",
                    "The length of Nile is #1. The length of Tigris is #2. Which river is longer, Nile or Tigris?"]),
    _decomposition("What is the capital city of the country where the painter of Starry Night was born?",
                   "A chain of relationships: first the painter of Starry Night, then the country where this painter "
                   "was born, finally the capital city of that country. Each step depends on the previous one.",
                   ["Who is the painter of Starry Night?", "What is the country where #1 was born?",
                    "What is the capital city of #2?"]),
    _decomposition("What is the distance between the city where the Colosseum is located and the capital city of the "
                   "country where the Eiffel Tower is located?",
                   "Two distinct entities must be located: the country of the Eiffel Tower and its capital city, then "
                   "the city of the Colosseum; finally the distance between them can be determined.",
                   ["What is the country where the Eiffel Tower is located?", "What is the capital city of #1?",
                    "What is the city where the Colosseum is located?", "What is the distance between #3 and #2?"]),
]
"""The worked examples of App. D's decomposition prompt (five of its seven: the population comparison and the two
mountains repeat the river comparison's and the distance question's patterns)."""

REDECOMPOSITION_EXAMPLES = [
    dspy.Example(
        question="Which city is home to the headquarters of the company founded by the inventor of the telephone?",
        previous_decompositions="Incorrect decomposition 1:\n1. Who invented the telephone?\n2. Which company was "
        "founded by #1?\n3. Which city is home to the headquarters of #2?\nNew decomposition instructions 1:\nThe "
        "second step is too vague. Instead of asking about where the company is located, specify that we need the "
        "headquarters location.",
        reasoning="The previous decomposition jumps from the company to the city, skipping a step: the exact "
        "headquarters location of the company must be established first, which avoids errors when a company has "
        "several locations.",
        new_decomposition=["Who invented the telephone?", "Which company was founded by #1?",
                           "Where are the headquarters of #2?", "Which city is home to #3?"],
    ).with_inputs("question", "previous_decompositions"),
]
"""The worked example of App. D's improve-decomposition prompt."""
