"""Adaptive-RAG's own stage (Jeong et al., NAACL 2024, "Adaptive-RAG: Learning to Adapt Retrieval-Augmented Large
Language Models through Question Complexity").

Its strategies read with the project's shared readers (:mod:`multihop.signatures.shared`) and IRCoT's signature. The
authors' released GPT-3.5 configurations (``base_configs/nor_qa_gpt_*.jsonnet``, ``oner_qa_gpt_*``, ``ircot_qa_gpt_*``:
``rc_qa_type = "cot"``) read every strategy with a chain of thought, no-retrieval A included, where their Flan-T5
configurations read directly; the shared readers have a reasoning reader over passages
(:class:`~multihop.signatures.shared.AnswerWithReasoning`) but none without passages, which is this one: the
authors' CoT prompt without context, its "So the answer is" closing made an output field (ours, in our words).
"""

import dspy


class ClosedBookAnswerWithReasoning(dspy.Signature):
    """Answer the question from your own knowledge. First reason step by step in a few short sentences, then give the
    shortest answer that is correct: an entity, a date, a number, or yes/no."""

    question: str = dspy.InputField()
    reasoning: str = dspy.OutputField(desc="a few short sentences of reasoning")
    answer: str = dspy.OutputField(desc="a short answer phrase")
