"""FLARE-direct (Jiang et al., EMNLP 2023, "Active Retrieval Augmented Generation"): write the answer one sentence at a
time, and retrieve only when the LM is unsure of the sentence it is about to write.

The paper's (§3, and the authors' 2WikiMultihopQA run, ``configs/2wikihop_flare_config.json`` and ``openai.sh`` of
``jzbjyb/FLARE``): retrieve ``k`` documents with the question first; then each step ``generate`` writes a look-ahead
sentence from the question and the answer so far (the repo's: also from the last retrieval's documents, ``reinit_ctx``
false; ours follows the repo); if any of its tokens has a probability at or below θ (``threshold``; the repo's
``look_ahead_filter_prob`` 0.8 and its ``<=``), retrieve ``k`` documents with the sentence, its tokens of probability at
or below β masked out (``mask_threshold``; ``look_ahead_mask_prob`` 0.4; the implicit query, §3.2), and ``generate``
writes the sentence again from the new documents, which replace the old ones (``ctx_increase`` "replace": each step
reads the last retrieval's documents); a confident look-ahead is kept as it is. The answer ends with "So the answer is
<answer>." (the 2WikiMultihopQA exemplars), and the answer is what it states. ``k = 2`` documents (``topk``),
``max_generation_tokens = 256`` tokens of answer (``max_generation_len``), greedy decoding.

Ours: the look-ahead is one sentence by its output field (the repo generates 64 tokens and cuts them at the first
sentence); its confidence is judged on the tokens of that field only, JSON structure and field names left out
(:func:`.tokens.field_pieces`; a reply whose field cannot be located is judged unsure and queries with the whole
sentence, counted ``unaligned``); a masked query with nothing left (every token at or below β) retrieves nothing, as the
repo sends no empty query, and the look-ahead is kept; the regenerated sentence is not judged again; the token cap ends
the text at the sentence that reaches it (the paper's cuts the generation there); the loop also stops at an empty
sentence and at ``max_sentences`` (the paper caps only tokens); a sentence that says "answer is" ends it, and when the
text states no answer (a cap, an empty sentence), the ``answer`` reader (ours) answers from the last documents and the
sentences written (``reader=False``: the answer is empty, never invented). ``k``, θ and β keep the paper's values by
default; the shared budget sets ``k`` and ``max_sentences`` in ``compare``. Not built: the paper's 8 exemplars as demos,
its previous-window and explicit (question-generation) query ablations, FLARE-instruct.

Switches: ``threshold`` (θ; 0: no retrieval after the first, by the paper's formula — the repo's θ = 0 turns its filter
off instead —; 1: a retrieval for every sentence; the paper's sweep between), ``mask_threshold`` (β; 0: the whole
sentence is the query, the paper's unmasked ablation), ``max_sentences``, ``max_generation_tokens``, ``reader``, and
``rerank``/``n`` (:class:`~..baselines.RerankableBaseline`: the top-``n`` → reranker → top-``k`` search DualRAG runs
every baseline with; default off).

The generator must report token log-probabilities: an in-process engine (``local:...``), a vLLM or SGLang server, or an
API that returns them. A reply without them raises
:class:`~multihop.lm.engines.local_engine.LogprobsUnavailable`, naming what to run instead. A server may compute them
after its own grammar mask (vLLM's structured outputs, by our reading of its sampler), over the tokens the schema
allows, where the in-process engines report them before it: the same θ then retrieves less often there;
``--structured off`` judges the model's own probabilities.

Counted per question: ``sentences`` (kept), ``retrievals`` (searches, the question's included), ``low_confidence``
(look-aheads with a token below θ), ``stated`` (the answer is the one the text states), ``capped`` (the loop ended at a
cap without stating it), ``empty_query`` and ``unaligned`` (above). Fallbacks (``run_stage``): an unparsable sentence
ends the text where it is (``generate.fallback``); an unparsable reader answer is empty (``answer.fallback``). The
prediction's ``passage_ids`` are the passages the generator read, in order."""

from __future__ import annotations

from dataclasses import dataclass

import dspy
from dspy.utils.exceptions import LMUnsupportedFeatureError

from multihop.lm.engines.local_engine import LogprobsUnavailable
from multihop.retrievers.query import Hits
from multihop.runtime.tracing import count
from multihop.signatures.flare import AnswerFromDraft, NextSentence

from ...text import safe_answer, stated_answer, unique
from ..rerankable import RerankableBaseline
from .tokens import Piece, field_pieces, low_confidence, masked_query, reply_tokens


@dataclass
class Sentence:
    """A sentence ``generate`` wrote: its text and its field's tokens (None when they could not be located)."""

    text: str
    pieces: list[Piece] | None = None

    @property
    def tokens(self) -> int:
        """Its tokens (its words when they could not be located)."""
        return len(self.pieces) if self.pieces is not None else len(self.text.split())


class FLARE(RerankableBaseline):
    """FLARE-direct: each next sentence is first written as a look-ahead; one with a token less probable than
    ``threshold`` retrieves with its confident tokens and is written again from the new documents. The module
    docstring says what is the paper's and what is ours.

    Args:
        retriever: the retriever; default ``dspy.settings.rm``.
        k: documents each retrieval gives the generator (the paper's 2).
        threshold: θ, a look-ahead with a token of lower probability triggers a retrieval (the paper's 0.8).
        mask_threshold: β, tokens of lower probability are masked out of the query (the paper's 0.4; 0: the whole
            sentence).
        max_sentences: sentences written at most.
        max_generation_tokens: the text ends at the sentence that brings its tokens to this many (the paper's 256).
        reader: answer with the reader when the text states no answer (False: the answer is empty).
        rerank: a reranker of :data:`multihop.retrievers.RERANKERS` over the first stage's top ``n`` (None: off).
        n: first-stage candidates the reranker sees.

    Example:
        >>> prediction = FLARE(retriever=retriever)(question="When did the director of film Hypocrite die?")
        >>> prediction.answer, prediction.sentences, prediction.queries
    """

    count_display = {"sentences": "mean", "retrievals": "mean", "low_confidence": "mean", "stated": "rate",
                     "capped": "rate", "unaligned": "mean"}

    def __init__(self, retriever: dspy.Module | None = None, k: int = 2, threshold: float = 0.8,
                 mask_threshold: float = 0.4, max_sentences: int = 8, max_generation_tokens: int = 256,
                 reader: bool = True, rerank: str | None = None, n: int = 50):
        if min(k, max_sentences, max_generation_tokens) < 1:
            raise ValueError("k, max_sentences and max_generation_tokens must be at least 1")
        if threshold < 0 or mask_threshold < 0:
            raise ValueError("threshold and mask_threshold are probabilities: at least 0")
        super().__init__(retriever, k, n, rerank)
        self.threshold, self.mask_threshold = threshold, mask_threshold
        self.max_sentences, self.max_generation_tokens, self.reader = max_sentences, max_generation_tokens, reader
        self.add_stages(generate=NextSentence, answer=AnswerFromDraft if reader else None)
        self.generate.update_config(logprobs=True)  # every call of the generator reports its tokens' log-probabilities

    def forward(self, question: str) -> dspy.Prediction:
        hits, queries = self.search(question, k=self.k), [question]
        read = list(hits.ids)
        sentences: list[str] = []
        tokens, stated, low = 0, None, 0
        while len(sentences) < self.max_sentences and tokens < self.max_generation_tokens:
            look_ahead = self.next_sentence(hits, question, sentences)
            sentence = look_ahead
            if look_ahead.text and self.unsure(look_ahead):
                low += 1
                query = self.query(look_ahead)
                if query:
                    hits = self.search(query, k=self.k)
                    queries.append(query)
                    read += hits.ids
                    sentence = self.next_sentence(hits, question, sentences)
                else:
                    count("empty_query")
            if not sentence.text:
                break
            sentences.append(sentence.text)
            tokens += sentence.tokens
            stated = stated_answer(sentence.text)
            if stated is not None:
                break
        count("sentences", len(sentences))
        count("retrievals", len(queries))
        count("low_confidence", low)
        count("stated", int(bool(stated)))
        count("capped", int(stated is None and (len(sentences) >= self.max_sentences
                                                or tokens >= self.max_generation_tokens)))
        answer = stated or (self.read_answer(hits, question, sentences) if self.reader else "")
        return dspy.Prediction(answer=safe_answer(answer), sentences=sentences, queries=queries,
                               passages=hits.passages, passage_ids=unique(read))

    def next_sentence(self, hits: Hits, question: str, sentences: list[str]) -> Sentence:
        """The generator's next sentence from the documents ``hits``, with its tokens' log-probabilities."""
        try:
            result = self.run_stage(self.generate, {"sentence": ""}, passages=hits.passages, question=question,
                                    answer_so_far=" ".join(sentences))
        except LogprobsUnavailable:
            raise
        except LMUnsupportedFeatureError as exc:  # an API that refuses logprobs (DSPy raises, never drops them)
            raise self.no_logprobs() from exc
        text = " ".join(str(result.sentence or "").split())
        if result.get("failed") or not text:
            return Sentence("")
        logprobs = result.get("logprobs")
        if not reply_tokens(logprobs):
            raise self.no_logprobs()
        pieces = field_pieces(logprobs, "sentence")
        count("unaligned", int(not pieces))
        return Sentence(text, pieces or None)

    def no_logprobs(self) -> LogprobsUnavailable:
        lm = self.generate.lm or dspy.settings.lm
        return LogprobsUnavailable(
            f"FLARE judges each sentence by its tokens' probabilities, and the LM {getattr(lm, 'model', lm)!r} "
            "returns none: run its generator on a local model in-process (--lm local:<model>), on a vLLM or SGLang "
            "server, or on an API model that returns logprobs, or leave FLARE out (--programs)")

    def unsure(self, sentence: Sentence) -> bool:
        """The retrieval rule: a token at or below θ (a sentence whose tokens could not be located: unsure)."""
        return sentence.pieces is None or low_confidence(sentence.pieces, self.threshold)

    def query(self, sentence: Sentence) -> str:
        """The sentence with its tokens at or below β masked out (the whole sentence without its tokens located)."""
        return sentence.text if sentence.pieces is None else masked_query(sentence.pieces, self.mask_threshold)

    def read_answer(self, hits: Hits, question: str, sentences: list[str]) -> str:
        return self.run_stage(self.answer, {"answer": ""}, passages=hits.passages, question=question,
                              reasoning=" ".join(sentences)).answer
