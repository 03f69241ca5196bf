"""IRCoT's gold stage targets: the chain from the annotated hops, the reader from the supporting paragraphs.

``reason``: a question whose hops are annotated (MuSiQue's decomposition, 2Wiki's evidences) gives one row a hop —
the paragraphs (the hops' supporting ones among the question's distractors, ``max_paragraphs`` in all, as the
collection grows to), the sentences of the earlier hops (each hop's evidence sentence, the paragraph's sentence that
states its answer, as the paper's demos chain evidence sentences) → the hop's evidence sentence — and a last row →
"So the answer is: <answer>.". ``answer`` (the Direct reader): the supporting paragraphs among ``max_paragraphs`` →
the gold answer; ``cot_answer``: that, its reasoning the hops' evidence sentences. Every paragraph is cut to the
program's ``paragraph_words``, as its prompts show them."""

from __future__ import annotations

from functools import partial

import dspy

from multihop.signatures.ircot import ANSWER_PHRASE

from ...gold_builders import GoldContext, Pairs, annotated_hops, gold_documents, reader_pairs, register_gold_builder
from .paragraphs import shown_passage
from .program import IRCoT


@register_gold_builder("IRCoT", "reason")
def reasoning_steps(program: IRCoT, example: dspy.Example, context: GoldContext) -> Pairs:
    hops = annotated_hops(example)
    if not hops or not example.get("answer"):
        return []
    documents = [shown_passage(p, program.paragraph_words)
                 for p in gold_documents(example, program.max_paragraphs, context)]
    sentences = [hop.knowledge for hop in hops] + [f"{ANSWER_PHRASE} {example.answer}."]
    return [({"passages": documents, "question": example.question, "reasoning": sentences[:i]},
             {"next_sentence": sentence}) for i, sentence in enumerate(sentences)]


@register_gold_builder("IRCoT", "answer")
def reader_target(program: IRCoT, example: dspy.Example, context: GoldContext) -> Pairs:
    return reader_pairs(example, program.max_paragraphs, context, partial(shown_passage, most=program.paragraph_words))


@register_gold_builder("IRCoT", "cot_answer")
def cot_reader_target(program: IRCoT, example: dspy.Example, context: GoldContext) -> Pairs:
    return [(inputs, {"reasoning": " ".join(hop.knowledge for hop in annotated_hops(example)), **outputs})
            for inputs, outputs in reader_pairs(example, program.max_paragraphs, context,
                                                partial(shown_passage, most=program.paragraph_words))]
