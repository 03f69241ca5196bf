"""FLARE's stages (Jiang et al., EMNLP 2023, "Active Retrieval Augmented Generation", FLARE-direct).

The paper prompts with demonstrations only: on 2WikiMultihopQA eight exemplars, each its search results, "Question:
<question>" and "Answer:" followed by a chain of thought that ends in "So the answer is <answer>." (the authors' repo,
``src/datasets.py``, ``WikiMultiHopQA``); the LM continues the answer one sentence at a time. Ours: the rules those
exemplars show (continue the answer by one short sentence, close with the fixed phrase) written out as the
instruction, since a signature without demos must say them; the answer so far is an input field instead of the text
after "Answer:". The paper has no reader: its answer is the one the chain states. Ours, for a chain that ends without
stating one (the sentence cap, an empty sentence), reads the answer from the last search results and the chain
(:class:`AnswerFromDraft`, the shared reader's wording).
"""

import dspy

ANSWER_PHRASE = "So the answer is"


class NextSentence(dspy.Signature):
    """Answer the question by reasoning step by step, using the search results. Write only the next sentence of the
    answer, continuing the answer so far: one short factual sentence. When the answer so far is enough to answer,
    write the final sentence as "So the answer is <short answer>."."""

    passages: list[str] = dspy.InputField(desc="search results, most relevant first")
    question: str = dspy.InputField()
    answer_so_far: str = dspy.InputField(desc="the sentences of the answer written so far (empty at first)")
    sentence: str = dspy.OutputField(desc="one sentence")


class AnswerFromDraft(dspy.Signature):
    """Answer the question using the search results and the reasoning written so far. Give the shortest answer that
    is correct: an entity, a date, a number, or yes/no. Do not explain."""

    passages: list[str] = dspy.InputField(desc="search results, most relevant first")
    question: str = dspy.InputField()
    reasoning: str = dspy.InputField(desc="the reasoning written so far")
    answer: str = dspy.OutputField(desc="a short answer phrase")
