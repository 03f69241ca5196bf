"""Self-Ask's stages (Press et al., Findings of EMNLP 2023, "Measuring and Narrowing the Compositionality Gap in
Language Models").

The paper's prompt is a fixed scaffold shown by demonstrations (its Fig. 3): "Question: …", "Are follow up questions
needed here: Yes.", then "Follow up: …" / "Intermediate answer: …" pairs, and "So the final answer is: …". With a
search engine ("Self-Ask + Search Engine", §3.2) the intermediate answer is the engine's answer to the follow-up
question instead of the LM's. Ours: the scaffold's decision as one stage (``FollowUp``: the next follow-up question,
or none and the final answer), with the follow-ups asked so far and their intermediate answers as an input field; the
search engine's answer box is replaced by our retriever and a reader (``IntermediateAnswer``) answering the follow-up
from the retrieved passages (the engine returned an answer snippet; a passage index returns passages); when the
scaffold ends without a final answer (the cap, a repeated or empty follow-up), ``FinalAnswer`` asks for it, as the
authors' code appends "So the final answer is:" and lets the model finish.

The LM's own intermediate answer — Self-Ask alone's, and with retrieval the answer to a follow-up whose retrieval
returned nothing — is, in the authors' code (``promptf``), the model continuing its whole prompt after "Intermediate
answer:": the demonstrations, the question, every follow-up asked and answered so far and the follow-up just asked.
``ChainedIntermediateAnswer`` reads the same (the question, the follow-ups so far with their answers, the follow-up;
the demonstrations are the stage's own, as for every stage here); ``ClosedBookIntermediateAnswer`` (ours) reads the
follow-up alone.
"""

import dspy


class FollowUp(dspy.Signature):
    """Answer the question by asking follow up questions. Given the question and the follow up questions asked so
    far with their intermediate answers, decide whether another follow up question is needed here. If yes, write
    the next follow up question: a simple question that one fact answers. If not, write the final answer: the
    shortest answer that is correct (an entity, a date, a number, or yes/no)."""

    question: str = dspy.InputField()
    follow_ups: list[str] = dspy.InputField(desc='"Follow up: … Intermediate answer: …", in order (empty at first)')
    follow_up_needed: bool = dspy.OutputField(desc="whether another follow up question is needed")
    follow_up: str = dspy.OutputField(desc="the next follow up question, or empty when none is needed")
    final_answer: str = dspy.OutputField(desc="the final answer when no follow up is needed, else empty")


class FinalAnswer(dspy.Signature):
    """Given the question and the follow up questions asked with their intermediate answers, write the final answer:
    the shortest answer that is correct (an entity, a date, a number, or yes/no)."""

    question: str = dspy.InputField()
    follow_ups: list[str] = dspy.InputField(desc='"Follow up: … Intermediate answer: …", in order')
    final_answer: str = dspy.OutputField(desc="the final answer")


class IntermediateAnswer(dspy.Signature):
    """Answer the follow up question using the retrieved passages. Give the shortest answer that is correct: an
    entity, a date, a number, or yes/no."""

    passages: list[str] = dspy.InputField(desc="retrieved passages, most relevant first")
    follow_up: str = dspy.InputField()
    intermediate_answer: str = dspy.OutputField(desc="a short answer phrase")


class ChainedIntermediateAnswer(dspy.Signature):
    """Answer the question by asking follow up questions. Given the question and the follow up questions asked so
    far with their intermediate answers, write the intermediate answer to the follow up question just asked, from
    your own knowledge. Give the shortest answer that is correct: an entity, a date, a number, or yes/no."""

    question: str = dspy.InputField()
    follow_ups: list[str] = dspy.InputField(desc='"Follow up: … Intermediate answer: …", in order (empty at first)')
    follow_up: str = dspy.InputField(desc="the follow up question just asked")
    intermediate_answer: str = dspy.OutputField(desc="a short answer phrase")


class ClosedBookIntermediateAnswer(dspy.Signature):
    """Answer the follow up question from your own knowledge. Give the shortest answer that is correct: an entity, a
    date, a number, or yes/no."""

    follow_up: str = dspy.InputField()
    intermediate_answer: str = dspy.OutputField(desc="a short answer phrase")
