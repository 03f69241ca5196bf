"""The triple cache CIRAG's rows read (:class:`~..papers.Artifact`): every passage of a dataset's corpus (its dev
file's paragraphs, the corpus the rows retrieve from) with its entities and triples extracted once by the LM
(``multihop cirag extract``, Figs. 9-10), which ``multihop reproduce --build`` makes with the run's LM."""

from __future__ import annotations

from pathlib import Path

from ..papers import Artifact


def extract_triples(folder: Path, dataset: str, progress: bool = True, **_run) -> Path:
    """Extract the triples of ``dataset``'s dev corpus into the cache ``folder`` with the LM DSPy is configured with
    (resumable: a rerun extracts what is missing or failed)."""
    import dspy

    from multihop.data.loaders import load_corpus
    from multihop.data.question_sets import question_file

    from .cache import build_cache
    from .program import CIRAG

    build_cache(load_corpus(question_file(dataset, "dev")), folder, CIRAG().extract,
                extractor=str(getattr(dspy.settings.lm, "model", None)), progress=progress)
    return Path(folder)


TRIPLE_CACHE = Artifact("triple-cache", "triple_cache", "multihop cirag extract DATA-dev-file --out DIR",
                        per_dataset=True, build=extract_triples)
