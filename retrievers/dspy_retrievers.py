"""DSPy's retrievers, and any function that returns passages, as multihop retrievers (docs/concepts/retrieval.md).

Programs search a retriever as ``retriever(query, k=k)`` and read the :class:`~.query.Hits` it returns: passages,
``ids`` and ``scores``. DSPy's retrievers answer otherwise: ``dspy.retrievers.Embeddings`` takes no ``k`` (it returns
its own ``k``) and gives a ``Prediction(passages, indices)``; ``dspy.ColBERTv2`` gives a list of
``dotdict(long_text, pid, score, ...)`` from its server; a retriever written for ``dspy.configure(rm=...)`` gives
items with ``long_text``. :func:`as_retriever` wraps any of them once, where a program takes its retriever
(:meth:`multihop.programs.MultihopProgram.searcher`), as a :class:`DSPyRetriever`, whose answers are ``Hits``; a
multihop retriever (a :class:`~.module.RetrieverModule`) is returned as it is. Since ``Hits`` iterate as
``dotdict(long_text, id, score)``, the wrapped retriever also serves ``dspy.Retrieve`` as DSPy's ``rm``.

Passage ids are the source's own (an item's ``id`` or ``pid``, a prediction's ``ids``). Where the source gives none,
a passage found in ``corpus`` (by its text, or its ``title: text`` rendering) takes the corpus's id, and any other
the content hash a multihop corpus gives it (:func:`multihop.data.corpus.passage_id`: of its title and text when
the source gives both, else of its text under an empty title), the same in every run. A prediction's ``indices``
(``Embeddings``) are positions in the source's own corpus, not ids. Scores are the source's, else rank-derived
(``1 / rank``), best first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import dspy

from multihop.data.corpus import Corpus, passage_id

from .module import RetrieverModule
from .query import Hits

TEXT_KEYS = ("long_text", "text", "passage", "content")  # where an item of a source's list keeps its text
ID_KEYS = ("id", "pid", "doc_id")
DEFAULT_K = 5


class DSPyRetriever(RetrieverModule):
    """A retriever over ``source``: a DSPy retriever or any callable ``source(query, k)`` (or ``source(query)``, which
    answers its own number of passages) returning a list of texts, a list of dicts or dotdicts (``long_text`` or
    ``text``, with ``id``/``pid``, ``score`` and ``title`` when it has them) or a ``Prediction`` with ``passages``
    (and ``ids``, ``scores``, ``titles``, ``texts`` when it has them). Each search keeps the first ``k`` passages;
    a source that takes no ``k`` returns at most its own.

    Args:
        source: what answers the queries.
        k: the default number of passages (the source's own ``k``, else 5).
        corpus: a corpus whose ids the passages of a source that gives none take (the gold ids of a question set),
            matched by text.

    Example:
        >>> retriever = DSPyRetriever(dspy.ColBERTv2(url="http://20.102.90.50:2017/wiki17_abstracts"))
        >>> retriever("Who wrote Hamlet?", k=3).ids
    """

    def __init__(self, source: Callable[..., Any], k: int | None = None, corpus: Corpus | None = None):
        super().__init__()
        if not callable(source):
            raise TypeError(f"a retriever is callable as retriever(query, k); a {type(source).__name__} is not")
        self.source = source
        self.k = k or getattr(source, "k", None) or DEFAULT_K
        self.takes_k = takes_k(source)
        # read-only: a mapping that is no dict is not walked by DSPy's named_parameters nor by the trace's module walk
        self.known_ids = MappingProxyType(corpus_ids(corpus) if corpus is not None else {})

    def search(self, queries: list[str], k: int) -> list[Hits]:
        return [self.hits(self.source(query, k=k) if self.takes_k else self.source(query), k) for query in queries]

    def hits(self, answer: Any, k: int) -> Hits:
        """The first ``k`` passages of a source's answer as ``Hits``."""
        items = answer_items(answer, type(self.source).__name__)[:k]
        fields: dict[str, list] = {
            "passages": [item["text"] for item in items],
            "ids": [item["id"] if item["id"] is not None else self.passage_id(item) for item in items],
            "scores": [item["score"] if item["score"] is not None else 1.0 / rank
                       for rank, item in enumerate(items, start=1)],
        }
        for name, key in (("titles", "title"), ("texts", "plain")):
            if items and all(item[key] is not None for item in items):
                fields[name] = [item[key] for item in items]
        return Hits(**fields)

    def passage_id(self, item: dict) -> str:
        """The id of a passage its source gives none: the corpus's, else its title's and text's content hash."""
        known = self.known_ids.get(item["text"]) or (self.known_ids.get(item["plain"]) if item["plain"] else None)
        if known:
            return known
        return passage_id(item["title"], item["plain"]) if item["title"] is not None else passage_id("", item["text"])


def as_retriever(source: Callable[..., Any] | None, corpus: Corpus | None = None) -> dspy.Module | None:
    """``source`` as a multihop retriever: a :class:`~.module.RetrieverModule` (a multihop retriever, or one already
    wrapped) as it is, None as None, anything else wrapped in a :class:`DSPyRetriever` (over ``corpus``'s ids)."""
    if source is None or isinstance(source, RetrieverModule):
        return source
    return DSPyRetriever(source, corpus=corpus)


def takes_k(source: Callable[..., Any]) -> bool:
    """Whether ``source`` is called with ``k``: its call (a module's ``forward``) has a ``k`` parameter or takes any
    keyword."""
    call = source.forward if isinstance(source, dspy.Module) else source
    try:
        parameters = inspect.signature(call).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: try the common call
        return True
    return any(p.name == "k" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def corpus_ids(corpus: Corpus) -> dict[str, str]:
    """Each passage's id by its text and by its ``title: text`` rendering."""
    known = {passage.text: passage.id for passage in corpus}
    known.update({passage.render(): passage.id for passage in corpus})
    return known


def answer_items(answer: Any, source: str) -> list[dict]:
    """A source's answer as items ``{text, id, score, title, plain}`` (None where it gives none), best first; an
    answer of another shape is a one-line ``TypeError``."""
    if isinstance(answer, str):
        return [item_of(answer)]
    passages = field(answer, "passages")
    if passages is not None:
        ids, scores = field(answer, "ids") or field(answer, "pids"), field(answer, "scores")
        titles, texts = field(answer, "titles"), field(answer, "texts")
        items = [item_of(passage) for passage in passages]
        for i, item in enumerate(items):
            for key, values in (("id", ids), ("score", scores), ("title", titles), ("plain", texts)):
                if values is not None and item[key] is None:
                    item[key] = values[i]
        return [{**item, "id": None if item["id"] is None else str(item["id"])} for item in items]
    if isinstance(answer, Iterable) and not isinstance(answer, Mapping | dspy.Prediction):
        return [item_of(item) for item in answer]
    raise TypeError(f"retriever {source} answered a {type(answer).__name__}: give a list of texts, a list of dicts "
                    "with long_text (or text), or a Prediction with passages")


def field(answer: Any, name: str) -> list | None:
    """A list field of a prediction or mapping (None when it has none)."""
    value = answer.get(name) if isinstance(answer, dspy.Example | Mapping) else None
    return None if value is None else list(value)


def item_of(item: Any) -> dict:
    """One passage of a source's answer: a text, or a dict, dotdict or object with its text under one of
    :data:`TEXT_KEYS`."""
    if isinstance(item, str):
        return {"text": item, "id": None, "score": None, "title": None, "plain": None}
    get = item.get if isinstance(item, Mapping) else lambda key: getattr(item, key, None)
    text = next((get(key) for key in TEXT_KEYS if isinstance(get(key), str)), None)
    if text is None:
        raise TypeError(f"a retrieved passage has no text (one of {', '.join(TEXT_KEYS)}): {str(item)[:200]}")
    title, plain = get("title"), get("text")
    titled = isinstance(title, str) and isinstance(plain, str)
    if titled and not isinstance(get("long_text"), str):
        text = f"{title}: {plain}" if title else plain  # rendered as multihop's own passages are
    pid = next((get(key) for key in ID_KEYS if get(key) is not None), None)
    score = get("score")
    return {"text": text, "id": None if pid is None else str(pid), "score": None if score is None else float(score),
            "title": title if titled else None, "plain": plain if titled else None}
