"""The dense retriever as a DSPy module (docs/design.md, "The contract every program keeps"; CoopRAG §3.3).

``DenseRetriever`` holds a corpus, an :class:`~.encoder.Encoder`, a :class:`~.index.FaissIndex` and, optionally, a
:class:`~.token_cache.TokenCache` for reranking. It has no predictors, so optimizers leave it alone, and
``forward(query, k)`` returns ``Hits(passages, ids, scores)`` — ``passages`` rendered as ``title: text``; a list of
queries returns one per query. :meth:`DenseRetriever.search_vectors` searches with query vectors already encoded,
so a reranker on the same encoder can take the search vector and its token states from one forward pass.

The manifest records the encoder's special tokens and pooling: a saved index loads its query encoder with the ones it
was built with, and refuses an encoder handed in with other ones (an index from before pooling was recorded pooled by
mean). For a Hugging Face Hub encoder it records the commit too (``encoder_revision``), and loads that commit; for a
ColBERT checkpoint (:mod:`.colbert_encoder`) its dimension, markers and lengths (``encoder_colbert``), which its
checksum covers.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from multihop.data.corpus import Corpus
from multihop.data.folders import locked, verify_inventory, write_inventory
from multihop.data.loaders import load_corpus
from multihop.data.paths import atomic_dir, home

from .colbert_encoder import ColBERTEncoder
from .encoder import POOLINGS, Encoder, fine_tuned
from .index import CorpusEncoding, FaissIndex, IndexMismatchError, checked_factory, encode_corpus, read_manifest
from .module import RetrieverModule
from .query import Hits, hits_prediction
from .token_cache import TokenCache
from .token_codecs import DEFAULT_TOKEN_STATES, canonical_form

logger = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
TOKENS_DIR = "tokens"


@dataclass(frozen=True)
class IndexSpec:
    """One dense index of a corpus: the first stage's ``pooling``, the token states kept for reranking
    (``token_layers`` None: none; ``()``: the last layer; premature layers an Eq. 3 score reads besides) in the form
    ``token_states`` with the ``[CLS]`` states of ``cls_layers`` (None: every layer), the query markers
    ``special_tokens`` and the FAISS ``kind``. A ``plaid`` form is kept with its bits and dimensions
    (:func:`~.token_codecs.canonical_form`), so ``plaid`` and ``plaid:2:128`` name one index."""

    pooling: str = "mean"
    token_layers: tuple[int, ...] | None = None
    special_tokens: tuple[str, ...] = ()
    kind: str = "auto"
    token_states: str = DEFAULT_TOKEN_STATES
    cls_layers: tuple[int, ...] | None = None

    def __post_init__(self):
        object.__setattr__(self, "token_states", canonical_form(self.token_states))

    def stored_layers(self) -> tuple[int, ...] | None:
        """The premature layers whose token states are stored (None: no token states)."""
        return None if self.token_layers is None or self.token_states == "none" else tuple(self.token_layers)

    def token_key(self) -> tuple:
        """What this index's token cache holds (indexes of one encoding with the same key share one cache)."""
        return self.stored_layers(), self.token_states, self.cls_layers

    def write_tokens(self, encoded: CorpusEncoding, directory: Path) -> TokenCache | None:
        """The token cache this index keeps, written to ``directory`` from ``encoded`` (None: it keeps none)."""
        layers = self.stored_layers()
        if layers is None:
            return None
        return TokenCache.write(directory, encoded.shards, encoded.num_layers, layers, form=self.token_states,
                                cls_layers=self.cls_layers)

    @property
    def token_dtype(self) -> str:
        """The float type the encoding keeps token states as for this index."""
        return "float32" if self.token_states == "full" else "float16"

    def folder_name(self, encoder: str, corpus: Corpus) -> str:
        """The name of this index's folder for ``corpus`` by ``encoder``."""
        kind = self.kind if "/" not in self.kind else hashlib.sha256(self.kind.encode()).hexdigest()[:8]
        return f"{Path(encoder).name}-{kind}-{corpus.checksum()[:16]}{self.encoding_suffix()}"

    def encoding_name(self, encoder: str, corpus: Corpus) -> str:
        """The name of the encoding shards of ``corpus`` by ``encoder`` for this index: what the encoding depends on
        (encoder, pooling, token states and their form, markers, corpus), not the FAISS kind, so a build that failed
        at indexing and its rerun under another kind share the same shards."""
        return f"{Path(encoder).name}-{corpus.checksum()[:16]}-encoding{self.encoding_suffix()}"

    def encoding_suffix(self) -> str:
        suffix = "" if self.pooling == "mean" else f"-{self.pooling}"
        if self.stored_layers() is not None:
            suffix += "-tokens" + "".join(f"-{layer}" for layer in self.token_layers)
            suffix += "" if self.token_states == DEFAULT_TOKEN_STATES else "-" + self.token_states.replace(":", "-")
            suffix += "" if self.cls_layers is None else "-cls" + "".join(f"-{layer}" for layer in self.cls_layers)
        return suffix + _markers_suffix(self.special_tokens)


def _link_or_copy(source: str, target: str) -> None:
    """Hard-link ``source`` as ``target``, or copy it where the two are on different filesystems."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _markers_suffix(special_tokens: tuple[str, ...]) -> str:
    return "-special-" + hashlib.sha256("\n".join(special_tokens).encode()).hexdigest()[:8] if special_tokens else ""


def _markers_in(corpus: Corpus, markers: tuple[str, ...]) -> tuple[str, ...]:
    """The markers some passage of ``corpus`` contains (those change how it encodes)."""
    return tuple(marker for marker in markers if any(marker in text for text in corpus.texts()))


class DenseRetriever(RetrieverModule):
    kind = "dense"

    def __init__(self, corpus: Corpus, encoder: Encoder, index: FaissIndex, k: int = 5,
                 tokens: TokenCache | None = None):
        super().__init__()
        self.corpus, self.encoder, self.index, self.k, self.tokens = corpus, encoder, index, k, tokens
        self.build_dir: Path | None = None  # the default shards folder of the build that made it

    @classmethod
    def build(
        cls,
        corpus: Corpus,
        encoder: str | Encoder = "mpnet",
        k: int = 5,
        work_dir: str | Path | None = None,
        kind: str = "auto",
        token_layers: tuple[int, ...] | None = None,
        token_states: str = DEFAULT_TOKEN_STATES,
        cls_layers: tuple[int, ...] | None = None,
        ray: str | None = None,
        workers: int = 2,
    ) -> DenseRetriever:
        """Encode ``corpus`` (in resumable shards under ``work_dir``, default ``MULTIHOP_HOME/shards/...``) and index
        it. With ``token_layers`` (``()``: last layer only) the token states for RaLa are kept too, from the same
        forward pass, in the form ``token_states`` (:data:`~.token_codecs.TOKEN_STATES`; ``none`` keeps none), with
        the ``[CLS]`` states of ``cls_layers`` (None: every layer). ``ray`` (``auto`` or a cluster's address) encodes
        on ``workers`` Ray actors (:mod:`.ray_encoding`) into the same shards."""
        if len(corpus) == 0:
            raise ValueError("cannot build an index over an empty corpus")
        encoder = encoder if isinstance(encoder, Encoder) else Encoder(encoder)
        checked_factory(kind, len(corpus), encoder.dimension)  # a kind that cannot be built, before any encoding
        spec = IndexSpec(encoder.pooling, token_layers, encoder.special_tokens, kind, token_states, cls_layers)
        work = Path(work_dir) if work_dir else home() / "shards" / spec.encoding_name(encoder.name, corpus)
        if ray:
            from .ray_encoding import ray_encode_corpus

            encoded = ray_encode_corpus(corpus, encoder, work, token_layers=spec.stored_layers(),
                                        token_dtype=spec.token_dtype, workers=workers, address=ray)
        else:
            encoded = encode_corpus(corpus, encoder, work, token_layers=spec.stored_layers(),
                                    token_dtype=spec.token_dtype)
        built = cls.from_encoding(corpus, encoder, encoded, spec, work / TOKENS_DIR, k=k)
        built.build_dir = None if work_dir else work
        return built

    @classmethod
    def from_encoding(cls, corpus: Corpus, encoder: Encoder, encoded: CorpusEncoding, spec: IndexSpec,
                      tokens_dir: Path, k: int = 5, tokens: TokenCache | None = None) -> DenseRetriever:
        """The index ``spec`` of a corpus already encoded (its shards), queried with ``encoder``; the token cache, if
        the spec keeps one, is ``tokens`` (written from the same encoding for an index with the same
        :meth:`IndexSpec.token_key`) or written to ``tokens_dir``, and linked into the folder the retriever is saved
        to."""
        manifest = {"retriever": cls.kind, "encoder": encoder.name, "encoder_sha256": encoder.checksum(),
                    **({"encoder_revision": encoder.revision} if encoder.revision else {}),
                    **({"encoder_colbert": encoder.colbert_config()} if isinstance(encoder, ColBERTEncoder) else {}),
                    "encoder_fine_tuned": fine_tuned(encoder.path),
                    "special_tokens": list(encoder.special_tokens), "pooling": encoder.pooling,
                    "corpus_sha256": corpus.checksum(), "truncated": encoded.truncated,
                    "token_states": spec.token_states if spec.stored_layers() is not None else "none"}
        tokens = tokens if tokens is not None else spec.write_tokens(encoded, tokens_dir)
        index = FaissIndex.build(encoded.vectors(encoder.pooling), manifest, kind=spec.kind)
        return cls(corpus, encoder, index, k=k, tokens=tokens)

    @classmethod
    def build_cached(cls, corpus: Corpus, encoder: str = "mpnet", token_layers: tuple[int, ...] | None = None,
                     kind: str = "auto", special_tokens: tuple[str, ...] = (), pooling: str = "mean",
                     token_states: str = DEFAULT_TOKEN_STATES, progress: bool = True) -> Path:
        """The folder of ``corpus``'s index pooled by ``pooling`` under ``MULTIHOP_HOME/indexes``, built (resumably)
        on first use by :meth:`build_cached_many` together with the same index under every other pooling
        (:data:`~.encoder.POOLINGS`; they share the encoding pass and the token cache), so that asking for another
        pooling later encodes nothing."""
        specs = [IndexSpec(each, token_layers, tuple(special_tokens), kind, token_states)
                 for each in (pooling, *(other for other in POOLINGS if other != pooling))]
        return cls.build_cached_many(corpus, encoder, specs, progress=progress)[0]

    @classmethod
    def build_cached_many(cls, corpus: Corpus, encoder: str, specs: list[IndexSpec],
                          progress: bool = True) -> list[Path]:
        """The folders of ``corpus``'s indexes ``specs`` under ``MULTIHOP_HOME/indexes``, those missing built from one
        encoding pass: the passages are encoded once (mean and ``[CLS]`` pooling and the token states any of them
        keeps, :func:`~.index.encode_corpus`, its bar shown with ``progress``) into shards of their own
        (``MULTIHOP_HOME/shards``), which an interrupted build resumes from and a finished one removes, so the index
        folders hold the only copy (one copy of a token cache that several of them keep, hard-linked where the
        filesystem allows). Query markers (special tokens) change no passage that does not contain them; a corpus
        that does is encoded again for each set of markers it contains."""
        specs = [replace(spec, special_tokens=tuple(spec.special_tokens)) for spec in specs]
        targets = [home() / "indexes" / spec.folder_name(encoder, corpus) for spec in specs]
        with ExitStack() as stack:
            for target in sorted(set(targets)):  # runs needing the same index: one builds, the others wait
                stack.enter_context(locked(target, file=True, wait=True))
            missing = {target: spec for spec, target in zip(specs, targets, strict=True)
                       if not (target / "manifest.json").exists()}
            groups: dict[tuple[str, ...], dict[Path, IndexSpec]] = {}
            for target, spec in missing.items():
                groups.setdefault(_markers_in(corpus, spec.special_tokens), {})[target] = spec
            for markers, members in groups.items():
                cls._build_group(corpus, Encoder(encoder, special_tokens=markers), members, progress)
        return targets

    @classmethod
    def _build_group(cls, corpus: Corpus, encoding: Encoder, members: dict[Path, IndexSpec], progress: bool) -> None:
        """Build the indexes ``members`` (folder → spec) from one encoding of ``corpus`` by ``encoding``, writing each
        token cache they keep once."""
        for spec in members.values():  # a kind that cannot be built, before any encoding
            checked_factory(spec.kind, len(corpus), encoding.dimension)
        layers = [spec.stored_layers() for spec in members.values() if spec.stored_layers() is not None]
        token_layers = tuple(sorted({layer for kept in layers for layer in kept})) if layers else None
        full = any(spec.token_dtype == "float32" for spec in members.values())
        work = (home() / "shards" /
                f"{Path(encoding.name).name}-{corpus.checksum()[:16]}-encoding{_markers_suffix(encoding.special_tokens)}")
        with locked(work, file=True, wait=True):  # another build of this corpus's indexes waits, then reuses none
            encoded = encode_corpus(corpus, encoding, work, token_layers=token_layers,
                                    token_dtype="float32" if full else "float16", progress=progress)
            written: dict[tuple, TokenCache | None] = {}
            for number, (target, spec) in enumerate(members.items()):
                if spec.token_key() not in written:
                    written[spec.token_key()] = spec.write_tokens(encoded, work / f"{TOKENS_DIR}-{number}")
                query_encoder = Encoder(encoding.name, special_tokens=spec.special_tokens, pooling=spec.pooling,
                                        revision=encoding.revision)
                built = cls.from_encoding(corpus, query_encoder, encoded, spec, work / f"{TOKENS_DIR}-{number}",
                                          tokens=written[spec.token_key()])
                built.save(target)
            shutil.rmtree(work, ignore_errors=True)

    def save(self, directory: str | Path) -> None:
        """Save the index, its manifest, the corpus it covers and the token cache into ``directory`` (atomically). The
        token cache's files are hard-linked, not copied, when the filesystem allows: the saved folder and the build's
        scratch folder then share one copy on disk, which the build's clean-up leaves to the saved folder alone
        (:meth:`remove_build_files`), and a save that fails loses nothing."""
        with atomic_dir(Path(directory)) as tmp:
            self.index.save(tmp)
            self.corpus.save(tmp / CORPUS_FILE)
            if self.tokens is not None:
                shutil.copytree(self.tokens.directory, tmp / TOKENS_DIR, copy_function=_link_or_copy)
            write_inventory(tmp)

    def remove_build_files(self) -> None:
        """Remove the encoding shards (and the token cache written among them) of the build that made this retriever
        in the default shards folder, once it is saved; a ``work_dir`` given to :meth:`build` is the caller's."""
        if self.build_dir is not None:
            shutil.rmtree(self.build_dir, ignore_errors=True)
            self.build_dir = None

    @classmethod
    def load(cls, directory: str | Path, encoder: str | Encoder | None = None, corpus: Corpus | None = None,
             k: int = 5, mmap: bool = False) -> DenseRetriever:
        """Load a saved retriever. A given ``encoder`` or ``corpus`` must match the manifest, else it is refused; an
        encoder given by name gets the special tokens the index was built with. ``mmap`` maps the FAISS index instead
        of reading it (an index larger than the memory)."""
        directory = Path(directory)
        verify_inventory(directory)
        corpus = corpus or load_corpus(directory / CORPUS_FILE)
        manifest = read_manifest(directory)
        if "special_tokens" not in manifest:
            logger.warning("%s was built before indexes recorded their encoder's special tokens (every encoder then "
                           "added the unrolling markers); it loads with none: rebuild it with `--markers "
                           "PROGRAM` if the queries carry markers", directory)
        special_tokens, pooling = manifest.get("special_tokens", []), manifest.get("pooling", "mean")
        if not isinstance(encoder, Encoder):
            encoder = Encoder(encoder or manifest["encoder"], special_tokens=special_tokens, pooling=pooling,
                              revision=None if encoder else manifest.get("encoder_revision"))
        if list(encoder.special_tokens) != special_tokens:
            raise IndexMismatchError(f"{directory}: the index was built with special tokens {special_tokens}, the "
                                     f"encoder has {list(encoder.special_tokens)}")
        if encoder.pooling != pooling:
            raise IndexMismatchError(f"{directory}: the index was built with {pooling} pooling, the encoder pools by "
                                     f"{encoder.pooling}")
        index = FaissIndex.load(
            directory,
            expect={"encoder_sha256": encoder.checksum(), "corpus_sha256": corpus.checksum(), "count": len(corpus)},
            mmap=mmap,
        )
        tokens = TokenCache(directory / TOKENS_DIR) if (directory / TOKENS_DIR).exists() else None
        if tokens is not None and len(tokens) != len(corpus):
            raise ValueError(f"{directory}: the token cache covers {len(tokens)} passages, the corpus {len(corpus)}")
        return cls(corpus, encoder, index, k=k, tokens=tokens)

    @classmethod
    def describe(cls, directory: Path) -> dict:
        """The folder's encoder, its pooling, markers and token states besides what every kind describes (an index
        from before fine-tuning was recorded: fine-tuned when its encoder's folder carries the training stamp)."""
        manifest = read_manifest(directory)
        return {**super().describe(directory), "encoder": manifest["encoder"],
                "encoder_sha256": manifest["encoder_sha256"],
                "encoder_fine_tuned": manifest.get("encoder_fine_tuned", fine_tuned(Path(manifest["encoder"]))),
                "pooling": manifest.get("pooling", "mean"), "special_tokens": manifest.get("special_tokens", []),
                "token_states": manifest.get("token_states",
                                             DEFAULT_TOKEN_STATES if (directory / TOKENS_DIR).exists() else "none")}

    def search(self, queries: list[str], k: int) -> list[Hits]:
        return self.search_vectors(self.encoder.encode(queries), k)

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[Hits]:
        """One prediction per query vector (already encoded with this retriever's encoder)."""
        scores, rows = self.index.search(vectors, k)
        return [hits_prediction(self.corpus, row, score) for row, score in zip(rows, scores, strict=True)]
