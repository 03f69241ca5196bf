"""MetaRAG's stages (Zhou et al., WWW 2024, "Metacognitive Retrieval-Augmented Large Language Models"): the cognition's
question answering and the metacognition's monitor, evaluator-critic and planner.

The paper prints one-line prompts (§3.1, §4.2, §4.3); each instruction here is that line, with the rule its text
around it states written out:

- ``Answer`` is Prompt_QA ("act as a question-answering system, answer the {question} based on the {retrieved
  documents}") with the step-by-step reasoning and the few-word answer of the authors' released QA prompt, and the
  planning's suggestions as an input (the authors' code adds them to the prompt the same way, §4.3's "altering the
  question-answering prompt").
- ``JudgeInternal`` is Prompt_Eval (§4.2, internal knowledge).
- ``CriticizeAnswer`` is Prompt_Critic (§4.2, declarative knowledge: "{Error name - Error description}") joined
  with §4.3's suggestion prompt ("generate a statement that offers suggestions to prevent the occurrence of the
  {error type}"), as the authors' code asks for the judgement and the feedback in one call; like the authors'
  critic (``critic.check`` in ``critic.py``), it reads the question and the answer only.
- ``NewQuery`` is Prompt_QG (§4.3: "To answer this question, I further need to search {q'}", with the two properties
  the paper asks of the query).

Ours, where a model of the paper cannot run here (said in :mod:`multihop.programs.baselines.metarag.program`):

- ``ExpertAnswer`` stands in for the monitor's expert, a T5-large fine-tuned for HotpotQA reading the same documents
  (§4.1, App. A.1): an extractive answer from the documents.
- ``JudgeExternal`` and ``CheckReasoning`` stand in for the TRUE NLI model (T5-XXL) that judges whether the
  documents suffice for the question (§4.2) and whether the reasoning supports the answer (§4.3); the authors' code
  itself asks the LLM the first ("can the provided reference answer the question") and makes the second one NLI call
  with the reasoning as premise and the answer as hypothesis (``judge_support`` in ``metarag.py``).

``parsing="authors"`` (:mod:`multihop.programs.baselines.metarag.parsing`) asks three of the stages as the authors'
code does, for free text it then reads: ``JudgeInternalReply`` and ``JudgeExternalReply`` (its ``INTERNAL_PROMPT`` and
``EXTERNAL_PROMPT``: answer yes or no) and ``NewQueryReply`` (its ``REWRITE_PROMPT``: reason step by step about what
the answerer lacked and end with "The rewrite query is ..."), in our words.

The error types' descriptions are §4.2's, shortened; the paper's examples for them are not published (the authors'
code has four of its own, under other error names), so none are given. The planning's suggestions
(:data:`RELY_ON_OWN_KNOWLEDGE`, :data:`RELY_ON_REFERENCES`, :data:`NEW_REFERENCES`, :data:`CHECK_FINAL_ANSWER`,
:data:`MULTI_STEP_REASONING`) are the authors' code's plan suggestions (``metarag.py``'s ``predict``) in our words;
"Please think step by step." is the paper's and the code's default, given whenever the critic finds no error.
"""

from typing import Literal

import dspy

ERROR_TYPES = {  # §4.2's declarative knowledge: error name → its description
    "incomplete reasoning": "the answer does not use every relevant fragment of the references or does not follow a "
                            "complete chain of thought to the answer",
    "answer redundance": "the answer is verbose or repeats itself instead of giving just what the question asks",
    "ambiguity understanding": "the answer misreads the question and answers from a related but wrong reference",
}
NO_ERROR = "none"
ErrorType = Literal["incomplete reasoning", "answer redundance", "ambiguity understanding", "none"]

THINK_STEP_BY_STEP = "Please think step by step."  # §4.3's default suggestion, when no common error is found
NEW_REFERENCES = ("New references were retrieved for the knowledge the documents lacked: break the question into "
                  "sub-questions and answer each from the references.")
RELY_ON_OWN_KNOWLEDGE = "If the references hold nothing suitable for the question, answer from your own knowledge."
RELY_ON_REFERENCES = "Answer only from the references; do not use your own knowledge."
CHECK_FINAL_ANSWER = "Check your final answer carefully: answer the question exactly, with nothing irrelevant."
MULTI_STEP_REASONING = "Your last reasoning did not support its answer: answer by reasoning in several steps."


class Answer(dspy.Signature):
    """Please act as a question-answering system: answer the question based on the retrieved documents. Think step by
    step, looking in the documents for each piece of information the question needs, and write your reasoning; then
    give the final answer in one or a few words. Follow the suggestions, if any: they come from a review of your
    earlier answer."""

    documents: list[str] = dspy.InputField(desc="retrieved documents")
    question: str = dspy.InputField()
    suggestions: list[str] = dspy.InputField(desc="how to answer this time (empty at first)")
    reasoning: str = dspy.OutputField(desc="your reasoning steps")
    answer: str = dspy.OutputField(desc="the final answer in one or a few words")


class ExpertAnswer(dspy.Signature):
    """You are an expert question-answering model. Answer the question from the documents with the shortest span of
    their text that answers it: an entity, a date, a number, or yes/no."""

    documents: list[str] = dspy.InputField()
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short span of the documents")


class JudgeInternal(dspy.Signature):
    """Please act as an evaluator-critic system: determine if you can provide a reliable answer to the question based
    on your own knowledge, without any document."""

    question: str = dspy.InputField()
    reliable: bool = dspy.OutputField(desc="whether your own knowledge answers the question reliably")


class JudgeExternal(dspy.Signature):
    """Please act as an evaluator-critic system: determine if the documents provide enough information to answer the
    question, that is, whether every fact the answer needs is stated in them."""

    documents: list[str] = dspy.InputField()
    question: str = dspy.InputField()
    sufficient: bool = dspy.OutputField(desc="whether the documents suffice to answer the question")


class CriticizeAnswer(dspy.Signature):
    """Please act as an evaluator-critic system: assess whether the answer to the question contains any of the
    error types described. If it does, name the error and write a statement that offers suggestions to prevent the
    occurrence of that error in future reasoning; if it contains none of them, the error is "none" and the
    suggestion is empty."""

    error_types: list[str] = dspy.InputField(desc='each error type as "name: description"')
    question: str = dspy.InputField()
    answer: str = dspy.InputField(desc="the response's answer")
    error: ErrorType = dspy.OutputField(desc='the error type the response contains, or "none"')
    suggestion: str = dspy.OutputField(desc="how to avoid that error next time, or empty")


class NewQuery(dspy.Signature):
    """Please act as an evaluator-critic system. The answer below was reasoned from the documents, which lack
    knowledge the question needs. Deduce what external knowledge is still missing and ask for it: complete "To
    answer this question, I further need to search ..." with one search query that differs from the question,
    targets the missing information and breaks the question down into a more specific sub-question."""

    question: str = dspy.InputField()
    documents: list[str] = dspy.InputField()
    answer: str = dspy.InputField(desc="the answer reasoned from the documents")
    query: str = dspy.OutputField(desc="what I further need to search")


class JudgeInternalReply(dspy.Signature):
    """Determine whether you can provide a reliable answer to the question based on your own knowledge. Output yes or
    no."""

    question: str = dspy.InputField()
    reply: str = dspy.OutputField(desc="yes or no")


class JudgeExternalReply(dspy.Signature):
    """Help me determine whether the provided documents can answer the question. You just need to answer yes or
    no."""

    documents: list[str] = dspy.InputField()
    question: str = dspy.InputField()
    reply: str = dspy.OutputField(desc="yes or no")


class NewQueryReply(dspy.Signature):
    """A person answered the question based on the documents. However, the documents lack information, so more
    documents need to be retrieved now. Carefully consider the answer and the question step by step, and provide a
    query for searching based on the information the person needs to answer the question. Your output must end with
    "The rewrite query is ..."."""

    question: str = dspy.InputField()
    documents: list[str] = dspy.InputField()
    answer: str = dspy.InputField(desc="the given answer")
    reply: str = dspy.OutputField(desc='your step-by-step thinking, ending with "The rewrite query is ..."')


class CheckReasoning(dspy.Signature):
    """Please act as a natural language inference model: determine whether the premise entails the hypothesis, that
    is, whether the reasoning supports the answer it reached."""

    premise: str = dspy.InputField(desc="the reasoning")
    hypothesis: str = dspy.InputField(desc="the answer")
    entailed: bool = dspy.OutputField(desc="whether the premise entails the hypothesis")
