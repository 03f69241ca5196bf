"""IRCoT (Trivedi et al., ACL 2023): interleave retrieval with a chain of thought, each new sentence of the chain the
query of the next retrieval, then read the collected paragraphs ("IRCoT QA").

The paper's: retrieve ``k`` paragraphs with the question; then each step ``reason`` writes the next sentence of the
chain from the question, every paragraph collected so far and the chain so far (the paper keeps the first generated
sentence of a longer generation — here the output is one sentence by its field); a sentence that says "answer is"
ends the loop, else it retrieves ``k`` more paragraphs with that sentence, added to the collection (repeats dropped;
no retrieval after the last allowed step, as the authors' controller checks the cap first); at most ``max_steps = 8``
reasoning steps (the paper's text; the authors' released configs leave their code's default, 10) and ``max_paragraphs
= 15`` paragraphs in all, the question's first retrieval included (the first ones collected stay: the authors'
``global_max_num_paras`` caps every addition to the collection, the first one too); the answer from a
separate reader over the collected paragraphs ("IRCoT QA"): Direct (``answer``, :class:`AnswerFromPassages`; the
paper's pick for Flan-T5) or with ``cot_reader`` a chain of thought over them (``cot_answer``,
:class:`AnswerWithReasoning`; the paper's pick for GPT-3). ``k`` is tuned over {2, 4, 6, 8} per dataset on dev in
the paper; ours is 4 by default (the shared budget sets it in ``compare``). The authors' code's paragraph limits
(:mod:`.paragraphs`): a retrieved paragraph of more than ``long_paragraph_words = 600`` words is dropped before it
joins the collection (counted ``long_paragraphs``), and the reasoning step and the reader see each paragraph cut to
its first ``paragraph_words = 350`` words; None turns either off (ours: whole paragraphs).

Ours: ``reader=False`` answers with what the chain's last sentence states (the answer is empty when it states none,
never invented; counted ``step_cap`` when the cap ended it); the queries are the sentences as written (the authors'
code also drops "So/Thus…" sentences and wh-words from them: not done); the prompts are instructions where the paper
has demonstrations only (:mod:`multihop.signatures.ircot`); the ``rerank``/``n`` switches
(:class:`~..baselines.RerankableBaseline`) give it the top-``n`` → reranker → top-``k`` search DualRAG runs every
baseline with (default off, the paper's plain BM25 top ``k``).

Counted per question: ``steps`` (reasoning calls), ``step_cap`` (the loop ended at ``max_steps`` without the answer
phrase), ``paragraphs`` (collected, what the reader read), ``long_paragraphs`` (retrieved, dropped as longer than
``long_paragraph_words``). Fallbacks (``run_stage``): an unparsable reasoning step ends the chain where it is
(``reason.fallback``); an unparsable reader answer is empty (``answer.fallback``, ``cot_answer.fallback``).
"""

from __future__ import annotations

import dspy

from multihop.retrievers.query import merge_hits
from multihop.runtime.tracing import count
from multihop.signatures import AnswerFromPassages, AnswerWithReasoning
from multihop.signatures.ircot import ReasonStep

from ...text import safe_answer, stated_answer
from ..rerankable import RerankableBaseline
from .paragraphs import LONG_WORDS, SHOWN_WORDS, shown, without_long


class IRCoT(RerankableBaseline):
    """IRCoT: a chain of thought whose every sentence retrieves the paragraphs for the next one, then a reader over
    the collected paragraphs. The module docstring says what is the paper's and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: paragraphs retrieved a step (the question's and each sentence's).
        max_steps: reasoning steps at most.
        max_paragraphs: paragraphs collected at most (the reader's and each step's context).
        reader: answer with a separate reader over the collected paragraphs (False: the answer the chain states).
        cot_reader: the reader reasons before it answers (the paper's CoT reader; False: its Direct reader).
        rerank: a reranker of :data:`multihop.retrievers.RERANKERS` over the first stage's top ``n`` (None: off).
        n: first-stage candidates the reranker sees.
        paragraph_words: the words of each paragraph the reasoning step and the reader see (the authors' 350; None:
            whole paragraphs).
        long_paragraph_words: a retrieved paragraph of more words is dropped (the authors' 600; None: none is).

    Example:
        >>> prediction = IRCoT(retriever=retriever, k=4)(question="In what country was Lost Gravity manufactured?")
        >>> prediction.reasoning, prediction.queries, prediction.answer
    """

    count_display = {"steps": "mean", "step_cap": "rate", "paragraphs": "mean", "long_paragraphs": "mean"}

    def __init__(self, retriever: dspy.Module | None = None, k: int = 4, max_steps: int = 8,
                 max_paragraphs: int = 15, reader: bool = True, cot_reader: bool = False, rerank: str | None = None,
                 n: int = 50, paragraph_words: int | None = SHOWN_WORDS, long_paragraph_words: int | None = LONG_WORDS):
        limits = [words for words in (paragraph_words, long_paragraph_words) if words is not None]
        if min(k, max_steps, max_paragraphs, *limits) < 1:
            raise ValueError("k, max_steps, max_paragraphs and the paragraph word limits must be at least 1")
        super().__init__(retriever, k, n, rerank)
        self.max_steps, self.max_paragraphs = max_steps, max_paragraphs
        self.paragraph_words, self.long_paragraph_words = paragraph_words, long_paragraph_words
        self.reader, self.cot_reader = reader, cot_reader
        self.add_stages(reason=ReasonStep, answer=AnswerFromPassages if reader and not cot_reader else None,
                        cot_answer=AnswerWithReasoning if reader and cot_reader else None)

    def forward(self, question: str) -> dspy.Prediction:
        queries, dropped = [question], []
        collected = merge_hits([self.retrieve(question, dropped)], self.max_paragraphs)
        reasoning: list[str] = []
        stated, steps = None, 0
        while steps < self.max_steps:
            steps += 1
            step = self.run_stage(self.reason, {"next_sentence": ""}, passages=shown(collected, self.paragraph_words),
                                  question=question, reasoning=reasoning)
            sentence = " ".join(str(step.next_sentence or "").split())
            if not sentence:
                break
            reasoning.append(sentence)
            stated = stated_answer(sentence)
            if stated is not None or steps == self.max_steps:
                break
            queries.append(sentence)
            collected = merge_hits([collected, self.retrieve(sentence, dropped)], self.max_paragraphs)
        count("steps", steps)
        count("step_cap", int(steps == self.max_steps and stated is None and len(reasoning) == steps))
        count("paragraphs", len(collected.ids))
        count("long_paragraphs", sum(dropped))
        return dspy.Prediction(answer=self.read(question, collected, stated), reasoning=reasoning, queries=queries,
                               passages=collected.passages, passage_ids=collected.ids, scores=collected.scores)

    def retrieve(self, query: str, dropped: list[int]):
        """The top ``k`` paragraphs for ``query`` without those longer than ``long_paragraph_words`` (how many were
        dropped is appended to ``dropped``)."""
        hits, long = without_long(self.search(query, k=self.k), self.long_paragraph_words)
        dropped.append(long)
        return hits

    def read(self, question: str, collected, stated: str | None) -> str:
        """The answer: the reader's over the collected paragraphs, or without a reader what the chain stated."""
        if not self.reader:
            return safe_answer(stated)
        stage = self.cot_answer if self.cot_reader else self.answer
        fallback = {"reasoning": "", "answer": ""} if self.cot_reader else {"answer": ""}
        return safe_answer(self.run_stage(stage, fallback, passages=shown(collected, self.paragraph_words),
                                          question=question).answer)
