"""IRCoT's stages (Trivedi et al., ACL 2023, "Interleaving Retrieval with Chain-of-Thought Reasoning for
Knowledge-Intensive Multi-Step Questions").

The paper prompts with demonstrations only: each demo is its paragraphs ("Wikipedia Title: <title>" and the text),
"Q: <question>" and "A: <chain of thought>", the chain ending in "So the answer is: <answer>."; with Flan-T5 it
prefixes "Answer the following question by reasoning step-by-step." (its §4, App. G). Ours: that sentence plus the
rules its demonstrations show (one new sentence a call, the fixed closing phrase) written out as the instruction,
since a signature without demos must say them; the chain so far is an input field instead of the text after "A:".
The reader ("IRCoT QA", §3.2) is the shared NativeRAG reader (:class:`~multihop.signatures.shared.AnswerFromPassages`),
the paper's Direct reader.
"""

import dspy

ANSWER_PHRASE = "So the answer is:"


class ReasonStep(dspy.Signature):
    """Answer the following question by reasoning step-by-step, using the paragraphs. Write only the next sentence of
    the reasoning: one short factual sentence that follows from the paragraphs and the reasoning so far. When the
    reasoning is enough to answer, write the final sentence as "So the answer is: <short answer>."."""

    passages: list[str] = dspy.InputField(desc="retrieved paragraphs")
    question: str = dspy.InputField()
    reasoning: list[str] = dspy.InputField(desc="the sentences of the reasoning so far, in order (empty at first)")
    next_sentence: str = dspy.OutputField(desc="one sentence")
