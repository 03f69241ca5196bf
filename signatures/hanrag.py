"""HANRAG's stages (Sun et al., 2025, §4.1, App. G): the Revelator's router, decomposer, refiner, relevance
discriminator and ending discriminator, and the generator's answers.

Each instruction is the App. G prompt of its stage (Prompts 10–14), with the parts DSPy does itself taken out and
these edits of ours: the output format a prompt spells out by hand ("Your output must be in json format…", "You can
only output true or false", "You only need to give the type of question") is a typed output field, so the rules that
only state it are dropped or folded into one sentence, and the JSON key "decomposition" is the field
``sub_questions``; the prompts' examples are the stages' demos (:data:`multihop.programs.hanrag.demos.PAPER_DEMOS`; a
program built with ``paper_demos=False`` starts without them, an optimizer replaces them); the code fences around the
Thought and the documents (the seed's text turned them into “‘ glyphs) are left out, as the adapter delimits every
field, and the documents reach the generator as the adapter renders a list, not as "Doc1: …" lines; the router's
definitions are numbered 1–4 (the text numbers two of them "3."); the router answers with the paper's labels
("complex question"), of which the program reads the route.

App. G gives no prompt for three calls; ours, written in the same style:

- ``JudgeEnding`` (Eq. 12, §4.2): whether the seed questions answered so far settle the original question; its input
  is the refiner's "Thought" (the numbered seed queries and answers), its output the ending flag.
- ``Aggregate`` (Eq. 5, §3): the final answer of a compound question from its sub-questions and their answers; one
  answer per part joined by " && " (App. F's "1651 && Rachael"), or, when the question compares the parts, the
  answer the comparison gives.
- ``DirectAnswer`` (the straightforward route, §4.1): Prompt 14 without documents.
"""

from typing import Literal

import dspy

from .shared import MOST_ITEMS

RouteLabel = Literal["straightforward question", "single-step question", "compound question", "complex question"]
NOTHING = "nothing"  # the refiner's and ending discriminator's Thought before any step (Prompt 12, Rule 4)


class Route(dspy.Signature):
    """You are an expert who is proficient in English and can see through the essence of any English sentence.
    Your current task is to fully understand and analyze the question I gave you, and tell me whether it is a super
    simple common sense question, a simple single-step search question, a compound question, or a complex logical
    reasoning question. I will now give you the definitions of these types of questions:
    1. Straightforward question, which means that this question does not require external knowledge to be queried,
    and the information you know is enough to answer the question;
    2. Single-step question, which means that the information you know cannot answer this question, and you need to
    use some external knowledge, such as searching the Internet, asking experts, etc. to answer it, but you only need
    to use external knowledge once;
    3. Compound question, which means that this question is composed of multiple sub-questions, but these
    sub-questions are not related, or the correlation is relatively small, and no complex logical reasoning is
    required, but the information you know cannot answer the question, and it needs to be broken down into several
    sub-questions and then answered with the help of an external knowledge base;
    4. Complex question, which means that this question is composed of multiple sub-questions through complex logical
    nesting. There is a very strong logical relationship between these sub-questions. After decomposition, you still
    need to get the answer to a sub-question before you can continue to answer other sub-questions. That is, the
    answer to sub-question 1 is the prerequisite for sub-question 2.
    Rule 1: You need to fully understand and analyze the given query and give your answer;
    Rule 2: You only need to give the type of question, and other content is prohibited."""

    question: str = dspy.InputField()
    route: RouteLabel = dspy.OutputField(desc="the type of the question")


class Decompose(dspy.Signature):
    """You are an expert in English and can see through the essence of any English sentence.
    Your current task is to fully understand and analyze the problem I gave you, and decompose the problem to obtain
    several sub-problems that constitute the problem. "thought" is your analysis and thinking process, and
    "sub_questions" is the list of sub-problems after decomposition. The question I give you may be the simplest one,
    that is, it only consists of one question and cannot be decomposed into other sub-problems. In this case, you
    only need to return the original question."""

    question: str = dspy.InputField()
    thought: str = dspy.OutputField(desc="your analysis of the question")
    sub_questions: list[str] = dspy.OutputField(desc="the sub-questions that constitute the question", min_length=1,
                                                max_length=MOST_ITEMS)


class Refine(dspy.Signature):
    """You are a linguist, proficient in various literary works, and can easily see through the essence of any English
    sentence. I want to answer a question, which may be a simple question or a very complex question that requires
    multiple steps of reasoning to answer. For simple questions, I only need to search once in the search engine to
    get the answer; for complex questions, I need to solve them step by step. First, I need to refine the first seed
    question that needs to be answered in the complex question, and then I can further answer the next step of the
    complex question after answering it. What you need to do is to help me find the seed question in the question I
    gave.
    I will give you two aspects of content. The first is the complex problem mentioned above. The second is some
    solution steps I got after thinking and disassembling, including multiple seed questions refined from several
    steps of reasoning, and the answers to these seed questions. Given these two aspects of content, please help me
    refine the first seed question that needs to be answered in the complex problem. You need to abide by the
    following rules:
    Rule 1: If the problem given to you is a complex problem, then what you need to do is to refer to the thinking
    process I have completed and help me refine the seed question that needs to be answered next to this complex
    problem, that is, the first sub-question that must be answered first to answer this problem;
    Rule 2: If the problem given to you is a simple single-step problem, then you only need to output the original
    problem intact;
    Rule 3: You must not output any other irrelevant content, which is very important;
    Rule 4: "question" is the complex problem, "thought" the completed thinking process; if its content is "nothing",
    there is no completed thinking process."""

    question: str = dspy.InputField()
    thought: str = dspy.InputField(desc='the seed queries answered so far with their answers, or "nothing"')
    seed_question: str = dspy.OutputField(desc="the next seed question")


class JudgeRelevance(dspy.Signature):
    """You are a linguist proficient in various literary works.
    Your current task is to determine whether the document and the question I provide are related. I will give you a
    document and a question. This question is a real user’s inquiry, and the document is content I have retrieved.
    The document may or may not be related to the question, so you need to make a judgment.
    Rule 1: If the doc is related to question, relevant is true; if not, false.
    Rule 2: A very important principle for determining relevance is that if the content of the document can be used
    to answer the question, whether it directly answers the question or merely serves as a reference to answer the
    question, it should be considered relevant."""

    question: str = dspy.InputField()
    document: str = dspy.InputField()
    relevant: bool = dspy.OutputField()


class JudgeEnding(dspy.Signature):
    """You are a linguist proficient in various literary works.
    Your current task is to determine whether a complex question has been solved. I will give you the complex
    question and the thinking process completed so far: the seed questions refined from it, one step at a time, and
    the answer found for each. If the answer to the last seed question is the answer to the complex question, the
    question is solved and finished is true; if another seed question must still be answered before the complex
    question can be answered, finished is false."""

    question: str = dspy.InputField()
    thought: str = dspy.InputField(desc="the seed queries answered so far with their answers")
    finished: bool = dspy.OutputField()


class Answer(dspy.Signature):
    """You are an expert who is proficient in various fields.
    Your current task is to answer the questions I give you based on the documents I give you. The questions are real
    questions from users, and the documents are some information related to the questions that you have retrieved.
    You must deliver your predictions in the most concise language. For example, if the answer is a person, just
    output their name; if the answer is a specific time, simply output the time point; if the answer is "yes" or "no"
    just output "yes" or "no". You only need to output the answer, do not output your thought process or other
    irrelevant information."""

    question: str = dspy.InputField()
    documents: list[str] = dspy.InputField()
    answer: str = dspy.OutputField()


class Aggregate(dspy.Signature):
    """You are an expert who is proficient in various fields.
    Your current task is to answer a compound question from the answers of its sub-questions. I will give you the
    question, the sub-questions it was broken down into and the answer found for each. You must deliver your
    prediction in the most concise language: when the question asks about several things, give the answer to each
    part, in the order the question asks them, joined by " && "; when the question compares the parts, give only the
    answer the comparison leads to. You only need to output the answer, do not output your thought process or other
    irrelevant information."""

    question: str = dspy.InputField()
    sub_questions: list[str] = dspy.InputField()
    sub_answers: list[str] = dspy.InputField()
    answer: str = dspy.OutputField()


class DirectAnswer(dspy.Signature):
    """You are an expert who is proficient in various fields.
    Your current task is to answer the question I give you from what you know. You must deliver your prediction in
    the most concise language. For example, if the answer is a person, just output their name; if the answer is a
    specific time, simply output the time point; if the answer is "yes" or "no" just output "yes" or "no". You only
    need to output the answer, do not output your thought process or other irrelevant information."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()

