"""The index a program retrieves from when none is given, through one door for ``eval``, ``compare`` and
``reproduce``: :func:`program_index` builds it once per corpus, first stage, encoder and pooling (the program's own:
CoopRAG's [CLS], the others' mean) and every command finds the same folder again; :func:`program_retriever` loads it,
once for the programs of a run that share it."""

from __future__ import annotations

from pathlib import Path

import dspy

from multihop.data.loaders import load_corpus
from multihop.programs import PROGRAMS
from multihop.retrievers import build_cached, load_retriever


def index_markers(*programs: type) -> tuple[str, ...]:
    """The query markers an index built here keeps whole: those of every declared method, then those of ``programs``
    (a user's class among them) — one set whichever program asks, so that the programs of a corpus share its index."""
    classes = (*(method.program for method in PROGRAMS.declared()), *programs)
    return tuple(dict.fromkeys(token for cls in classes for token in cls.special_tokens))


def cached_index(source: str | Path, first_stage: str, encoder: str, pooling: str = "mean",
                 markers: tuple[str, ...] | None = None, progress: bool = True) -> Path:
    """The folder of the index built for programs (cached under ``MULTIHOP_HOME/indexes``, built on first use): the
    corpus of ``source`` (a corpus file, or a question file's IRCoT corpus) indexed by ``first_stage``; a dense one by
    ``encoder``, pooled by ``pooling``, with the last layer's token states and the query markers ``markers`` (None:
    :func:`index_markers`) kept whole; a ``plaid`` one (:mod:`multihop.retrievers.plaid`) by ``encoder`` (a ColBERT
    checkpoint's folder or Hub id, or any encoder) with the same markers, its last layer's token states in the
    ``plaid`` form. A dense build encodes the corpus once for every pooling (the other one's folder is built beside
    it); any build shows a bar of the passages encoded and the time left on stderr when ``progress``; the same request
    from any command finds the same folder."""
    markers = index_markers() if markers is None else markers
    return Path(build_cached(load_corpus(source), first_stage, encoder=encoder, pooling=pooling, token_layers=(),
                             special_tokens=markers, progress=progress))


def program_index(name: str, source: str | Path, encoder: str, first_stage: str | None = None,
                  pooling: str | None = None, progress: bool = True) -> Path:
    """The folder of :func:`cached_index` for program ``name``: its method's declared first stage unless
    ``first_stage`` is given, the pooling its class declares (its ``index_pooling``; mean for a first stage that is not
    dense) unless ``pooling`` is given (a paper's row run on another program's index), and its markers among every
    declared method's."""
    cls = PROGRAMS[name]
    stage = first_stage or PROGRAMS.declaration(name).first_stage
    pooling = pooling or (cls.index_pooling if stage == "dense" else "mean")
    return cached_index(source, stage, encoder, pooling, index_markers(cls), progress)


def program_retriever(name: str, source: str | Path, encoder: str, first_stage: str | None = None,
                      pooling: str | None = None, progress: bool = True,
                      loaded: dict[Path, dspy.Module] | None = None) -> tuple[dspy.Module, Path]:
    """The retriever over :func:`program_index` (same arguments) and its folder. ``loaded`` (folder → retriever) is
    the caller's record of the indexes a run has loaded: the programs whose index is the same folder share one
    retriever, and one more program compared later finds the same index and extends the same runs."""
    folder = program_index(name, source, encoder, first_stage, pooling, progress)
    if loaded is None:
        return load_retriever(folder), folder
    if folder not in loaded:
        loaded[folder] = load_retriever(folder)
    return loaded[folder], folder
