"""A full-corpus late-interaction first stage: PLAID's search over a token cache in the ``plaid`` form (Santhanam
et al., 2022b, "PLAID", §4).

``PlaidRetriever`` scores every passage of the corpus by MaxSim over its stored token states, without an exhaustive
scan. The cache (:mod:`.plaid_codec`) stores each token as a centroid id and a residual in a projected space; at build
time the retriever inverts the centroid ids into centroid → passage lists (:class:`InvertedLists`, saved with the
index). A query's token states (the encoder's query encoding, projected by the codec) are then scored in PLAID's four
stages:

1. candidate generation: each query token's top ``nprobe`` centroids by inner product; the passages of their lists;
2. centroid interaction with pruning: a candidate's approximate score is MaxSim over its tokens' centroids, the
   tokens whose centroid scores below ``centroid_threshold`` (PLAID's ``t_cs``) against every query token left out;
   the best ``ndocs`` are kept;
3. centroid interaction without pruning over those, the best ``ndocs / 4`` kept (ours: at least ``k``; the
   authors' release keeps ``ndocs // 4`` and returns fewer than ``k`` passages when that is less);
4. their token states decompressed (centroid + residual) and scored by exact MaxSim; the top ``k`` returned.

The settings default by ``k`` as the authors' release sets them (``colbert-ai``'s ``Searcher``): ``k ≤ 10``: ``nprobe``
1, ``t_cs`` 0.5, ``ndocs`` 256; ``k ≤ 100``: 2, 0.45, 1,024; larger ``k``: 4, 0.4, ``max(4k, 4096)``. At generous
settings (``nprobe`` every centroid, ``t_cs`` −∞, ``ndocs`` ≥ 4 × passages) the ranking is exhaustive MaxSim over the
decoded states (tested); at the defaults it is PLAID's approximation. Ours: the scores are the mean over query tokens
of the best cosine (as :class:`~.late_interaction.MaxSim` scores, ColBERT sums them: the same order), a tie at
any stage goes to the passage of the lower row (the authors' top-k leaves ties unordered), and the search runs on
numpy over the memory-mapped cache, one query at a time, on the CPU. Stages 1-4 match the authors'
``CandidateGeneration``, ``IndexScorer.score_pids`` and its CPU ``filter_pids`` (pruning by each centroid's best
score against the query tokens, every query token, ``[MASK]`` ones included, probing its centroids).

Any encoder serves: a ColBERT checkpoint (:class:`~.colbert_encoder.ColBERTEncoder`, its 128-d states kept as they are)
or a sentence encoder's last layer (MPNet's 768-d token states projected by the codec's PCA), where the first stage is
MaxSim over the whole corpus rather than over a dense top ``n``. The manifest records the encoder as a dense index's
does (name, weights checksum, Hub commit, markers; a ColBERT checkpoint's dimension, markers and lengths too) and
refuses a query encoder that differs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from multihop.data.corpus import Corpus
from multihop.data.folders import locked, verify_inventory, write_inventory
from multihop.data.loaders import load_corpus
from multihop.data.paths import atomic_dir, atomic_write_text, home

from .colbert_encoder import ColBERTEncoder
from .dense import CORPUS_FILE, TOKENS_DIR, _link_or_copy, _markers_suffix
from .encoder import Encoder, fine_tuned
from .index import MANIFEST, IndexMismatchError, encode_corpus, read_manifest
from .module import RetrieverModule
from .plaid_codec import parse_plaid
from .query import Hits, hits_prediction
from .token_cache import TokenCache

logger = logging.getLogger(__name__)

LISTS_DIR = "ivf"
DEFAULT_FORM = "plaid"
CHUNK_TOKENS = 1 << 22  # token codes inverted at a time when the lists are built


@dataclass(frozen=True)
class PlaidSettings:
    """PLAID's search settings; a None is set by ``k`` (:meth:`for_k`).

    Args:
        nprobe: centroids probed a query token (stage 1).
        centroid_threshold: PLAID's ``t_cs``: a token whose centroid scores below it against every query token is
            pruned from stage 2.
        ndocs: candidates kept after stage 2 (``ndocs / 4`` after stage 3).
    """

    nprobe: int | None = None
    centroid_threshold: float | None = None
    ndocs: int | None = None

    def for_k(self, k: int) -> PlaidSettings:
        """These settings with the Nones filled by ``k`` as the authors' release fills them."""
        if k <= 10:
            default = PlaidSettings(1, 0.5, 256)
        elif k <= 100:
            default = PlaidSettings(2, 0.45, 1024)
        else:
            default = PlaidSettings(4, 0.4, max(4 * k, 4096))
        return PlaidSettings(*(given if given is not None else fallback for given, fallback in
                               zip(self.as_tuple(), default.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple:
        return self.nprobe, self.centroid_threshold, self.ndocs

    def record(self) -> dict:
        return {"nprobe": self.nprobe, "centroid_threshold": self.centroid_threshold, "ndocs": self.ndocs}


class InvertedLists:
    """Centroid → passage lists: the rows of the passages that hold a token of each centroid, ascending.

    Args:
        pids: the lists one after another (int32).
        starts: where each centroid's list starts in ``pids``, ``[K + 1]``.
    """

    def __init__(self, pids: np.ndarray, starts: np.ndarray):
        self.pids, self.starts = pids, starts

    def __len__(self) -> int:
        return len(self.starts) - 1

    @classmethod
    def build(cls, codes: np.ndarray, offsets: np.ndarray, centroids: int) -> InvertedLists:
        """The lists of the token centroid ids ``codes`` (``[tokens]``) of passages starting at ``offsets``
        (``[N + 1]``), inverted a passage-aligned chunk of about :data:`CHUNK_TOKENS` tokens at a time."""
        count = len(offsets) - 1
        pairs = []
        start = 0
        while start < count:
            stop = int(np.searchsorted(offsets, offsets[start] + CHUNK_TOKENS, side="right")) - 1
            stop = min(count, max(stop, start + 1))
            lengths = np.diff(offsets[start : stop + 1])
            rows = np.repeat(np.arange(start, stop, dtype=np.int64), lengths)
            chunk = np.asarray(codes[offsets[start] : offsets[stop]]).astype(np.int64)
            pairs.append(np.unique(chunk * count + rows))  # each (centroid, passage) once, a chunk's passages its own
            start = stop
        keys = np.concatenate(pairs) if pairs else np.zeros(0, dtype=np.int64)
        order = np.argsort(keys // max(1, count), kind="stable")  # by centroid, passages ascending within each
        keys = keys[order]
        cells = keys // max(1, count)
        starts = np.concatenate([[0], np.cumsum(np.bincount(cells, minlength=centroids))]).astype(np.int64)
        return cls((keys % max(1, count)).astype(np.int32), starts)

    def lookup(self, cells: np.ndarray) -> np.ndarray:
        """The passages of the lists ``cells``, each once, ascending."""
        parts = [self.pids[self.starts[cell] : self.starts[cell + 1]] for cell in np.unique(cells)]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int32)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / "pids.npy", self.pids)
        np.save(directory / "starts.npy", self.starts)

    @classmethod
    def load(cls, directory: Path) -> InvertedLists:
        return cls(np.load(directory / "pids.npy", mmap_mode="r"), np.load(directory / "starts.npy"))


def token_rows(offsets: np.ndarray, pids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cache rows of the tokens of passages ``pids`` (one passage after another) and each passage's token
    count."""
    starts = np.asarray(offsets[pids], dtype=np.int64)
    lengths = np.asarray(offsets[pids + 1], dtype=np.int64) - starts
    if not len(pids):
        return np.zeros(0, dtype=np.int64), lengths
    firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(starts - firsts, lengths) + np.arange(int(lengths.sum())), lengths


def maxsim_by_passage(similarities: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """MaxSim of passages whose tokens' similarities to the query tokens are the consecutive row blocks of
    ``similarities`` (``[tokens, query tokens]``, ``lengths`` rows a passage): the mean over query tokens of each
    block's column maxima; a passage without tokens (or all of whose rows are −∞) scores −∞."""
    scores = np.full(len(lengths), -np.inf, dtype=np.float32)
    present = lengths > 0
    if present.any():
        firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[present]
        best = np.maximum.reduceat(similarities, firsts, axis=0)
        scores[present] = best.mean(axis=1)
    return scores


def plaid_search(query: np.ndarray, centroids: np.ndarray, codes: np.ndarray, offsets: np.ndarray,
                 lists: InvertedLists, decode, k: int, settings: PlaidSettings) -> tuple[np.ndarray, np.ndarray]:
    """PLAID's four stages (the module docstring) for one query's projected token states ``query`` ``[q, dim]``:
    the rows of the top ``k`` passages and their MaxSim scores, best first. ``codes`` are the tokens' centroid ids,
    ``offsets`` the passages' first tokens, ``decode(rows)`` the decompressed projected states of cache rows."""
    nprobe, threshold, ndocs = settings.for_k(k).as_tuple()
    scores = centroids @ query.T  # [K, q]
    probe = min(nprobe, len(centroids))
    cells = np.argpartition(-scores, probe - 1, axis=0)[:probe] if probe < len(centroids) else np.arange(len(scores))
    pids = lists.lookup(np.ravel(cells)).astype(np.int64)
    if not len(pids):
        return pids, np.zeros(0, dtype=np.float32)
    rows, lengths = token_rows(offsets, pids)
    token_cells = np.asarray(codes[rows]).astype(np.int64)
    kept = scores.max(axis=1) >= threshold  # stage 2: the centroids that score t_cs against some query token
    pruned = np.where(kept[token_cells][:, None], scores[token_cells], -np.inf)
    pids, lengths, token_cells = _best(pids, lengths, token_cells, maxsim_by_passage(pruned, lengths), ndocs)
    pids, lengths, _ = _best(pids, lengths, token_cells, maxsim_by_passage(scores[token_cells], lengths),
                             max(k, ndocs // 4))  # stage 3: every centroid
    rows, lengths = token_rows(offsets, pids)
    exact = maxsim_by_passage(decode(rows) @ query.T, lengths)  # stage 4
    order = np.argsort(-exact, kind="stable")[:k]
    return pids[order], exact[order]


def _best(pids: np.ndarray, lengths: np.ndarray, token_cells: np.ndarray, scores: np.ndarray,
          keep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``keep`` best-scoring passages (ties by row), in row order, with their lengths and their tokens' cells."""
    if len(pids) <= keep:
        return pids, lengths, token_cells
    chosen = np.sort(np.argsort(-scores, kind="stable")[:keep])
    firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    cells = np.concatenate([token_cells[firsts[i] : firsts[i] + lengths[i]] for i in chosen])
    return pids[chosen], lengths[chosen], cells


def stored_parts(tokens: TokenCache) -> dict[str, np.ndarray]:
    """The memory-mapped arrays of a token cache's last-layer states, by part (``centroid``, ``residual`` in a
    ``plaid`` form), read from the cache's own table of them."""
    return tokens._tokens["last"]


def plaid_form(token_states: str | None) -> str:
    """The ``plaid`` form a PLAID index keeps its tokens in: ``token_states`` when it is one, ``plaid`` (2 bits) when
    None; any other form is a one-line ``ValueError``."""
    if token_states is None:
        return DEFAULT_FORM
    if parse_plaid(token_states) is None:
        raise ValueError(f"a plaid first stage keeps its token states in the plaid form, not {token_states!r}: use "
                         "--token-states plaid, plaid:4 or plaid:BITS:DIM")
    return token_states


class PlaidRetriever(RetrieverModule):
    """PLAID's search over a corpus's token cache (the module docstring).

    Args:
        corpus: the passages.
        encoder: the query encoder (the one the cache was written by).
        tokens: the token cache, in a ``plaid`` form.
        lists: the centroid → passage lists of the cache's centroid ids.
        k: passages returned by default.
        settings: PLAID's search settings (None's set by ``k``).
    """

    kind = "plaid"

    def __init__(self, corpus: Corpus, encoder: Encoder, tokens: TokenCache, lists: InvertedLists, k: int = 5,
                 settings: PlaidSettings | None = None):
        super().__init__()
        codec = tokens.codecs["last"]
        if parse_plaid(tokens.form) is None:
            raise ValueError(f"{tokens.directory}: a plaid first stage reads a plaid token cache, not {tokens.form!r}")
        if len(lists) != len(codec.centroids):
            raise ValueError(f"the inverted lists cover {len(lists)} centroids, the codec has {len(codec.centroids)}")
        self.corpus, self.encoder, self.tokens, self.lists, self.k = corpus, encoder, tokens, lists, k
        self.settings = settings or PlaidSettings()
        self.truncated = 0
        self.build_dir: Path | None = None  # the default shards folder of the build that made it

    @property
    def codec(self):
        return self.tokens.codecs["last"]


    @classmethod
    def build(cls, corpus: Corpus, encoder: str | Encoder = "mpnet", k: int = 5, token_states: str | None = None,
              settings: PlaidSettings | None = None, work_dir: str | Path | None = None, progress: bool = True,
              ray: str | None = None, workers: int = 2) -> PlaidRetriever:
        """Encode ``corpus``'s passages (resumable shards under ``work_dir``, default ``MULTIHOP_HOME/shards/...``;
        on Ray actors with ``ray``), write their last-layer token states in ``token_states`` (a ``plaid`` form) and
        invert the centroid ids into the lists."""
        if len(corpus) == 0:
            raise ValueError("cannot build an index over an empty corpus")
        form = plaid_form(token_states)
        encoder = encoder if isinstance(encoder, Encoder) else Encoder(encoder)
        work = Path(work_dir) if work_dir else home() / "shards" / (
            f"{Path(encoder.name).name}-{corpus.checksum()[:16]}-plaid-encoding{_markers_suffix(encoder.special_tokens)}")
        if ray:
            from .ray_encoding import ray_encode_corpus

            encoded = ray_encode_corpus(corpus, encoder, work, token_layers=(), token_dtype="float16",
                                        workers=workers, address=ray)
        else:
            encoded = encode_corpus(corpus, encoder, work, token_layers=(), token_dtype="float16", progress=progress)
        tokens = TokenCache.write(work / TOKENS_DIR, encoded.shards, encoded.num_layers, (), form=form)
        codec = tokens.codecs["last"]
        lists = InvertedLists.build(stored_parts(tokens)["centroid"], tokens.offsets, len(codec.centroids))
        built = cls(corpus, encoder, tokens, lists, k=k, settings=settings)
        built.truncated = encoded.truncated
        built.build_dir = None if work_dir else work
        return built

    @classmethod
    def build_cached(cls, corpus: Corpus, encoder: str, special_tokens: tuple[str, ...] = (),
                     token_states: str | None = None, progress: bool = True) -> Path:
        """The folder of ``corpus``'s PLAID index by ``encoder`` (with the query markers ``special_tokens``) under
        ``MULTIHOP_HOME/indexes``, built on first use; the same request finds it again."""
        form = plaid_form(token_states)
        source = Path(encoder).expanduser()
        where = str(source.resolve()) if source.exists() else str(encoder)
        target = home() / "indexes" / (f"{source.name}-{hashlib.sha256(where.encode()).hexdigest()[:8]}-"
                                       f"{form.replace(':', '-')}-{corpus.checksum()[:16]}"
                                       f"{_markers_suffix(tuple(special_tokens))}")
        with locked(target, file=True, wait=True):
            if not (target / MANIFEST).exists():
                built = cls.build(corpus, Encoder(encoder, special_tokens=tuple(special_tokens)), token_states=form,
                                  progress=progress)
                built.save(target)
                built.remove_build_files()
        return target

    def manifest(self) -> dict:
        encoder = self.encoder
        return {"retriever": self.kind, "encoder": encoder.name, "encoder_sha256": encoder.checksum(),
                **({"encoder_revision": encoder.revision} if encoder.revision else {}),
                **({"encoder_colbert": encoder.colbert_config()} if isinstance(encoder, ColBERTEncoder) else {}),
                "encoder_fine_tuned": fine_tuned(encoder.path), "special_tokens": list(encoder.special_tokens),
                "corpus_sha256": self.corpus.checksum(), "count": len(self.corpus), "truncated": self.truncated,
                "token_states": self.tokens.form, "centroids": len(self.lists), "k": self.k,
                "search": self.settings.record()}

    def save(self, directory: str | Path) -> None:
        """Save the manifest, the corpus, the token cache (hard-linked where the filesystem allows) and the inverted
        lists into ``directory``, atomically."""
        with atomic_dir(Path(directory)) as tmp:
            self.corpus.save(tmp / CORPUS_FILE)
            shutil.copytree(self.tokens.directory, tmp / TOKENS_DIR, copy_function=_link_or_copy)
            self.lists.save(tmp / LISTS_DIR)
            atomic_write_text(tmp / MANIFEST, json.dumps(self.manifest(), indent=2))
            write_inventory(tmp)

    def remove_build_files(self) -> None:
        """Remove the encoding shards (and the token cache written among them) of the build, once it is saved."""
        if self.build_dir is not None:
            shutil.rmtree(self.build_dir, ignore_errors=True)
            self.build_dir = None

    @classmethod
    def load(cls, directory: str | Path, encoder: str | Encoder | None = None, corpus: Corpus | None = None,
             k: int | None = None, settings: PlaidSettings | None = None) -> PlaidRetriever:
        """Load a saved PLAID index; a given ``encoder`` or ``corpus`` must be the one it was built with, else it is
        refused (an encoder given by name gets the markers the index was built with). ``settings`` replace the saved
        search settings."""
        directory = Path(directory)
        verify_inventory(directory)
        corpus = corpus or load_corpus(directory / CORPUS_FILE)
        manifest = read_manifest(directory, {"retriever": cls.kind, "corpus_sha256": corpus.checksum(),
                                             "count": len(corpus)})
        special_tokens = manifest.get("special_tokens", [])
        if not isinstance(encoder, Encoder):
            encoder = Encoder(encoder or manifest["encoder"], special_tokens=special_tokens,
                              revision=None if encoder else manifest.get("encoder_revision"))
        if list(encoder.special_tokens) != special_tokens:
            raise IndexMismatchError(f"{directory}: the index was built with special tokens {special_tokens}, the "
                                     f"encoder has {list(encoder.special_tokens)}")
        if encoder.checksum() != manifest["encoder_sha256"]:
            raise IndexMismatchError(f"{directory}: the index was built by the encoder {manifest['encoder']} (sha256 "
                                     f"{manifest['encoder_sha256'][:12]}…), not {encoder.name} (sha256 "
                                     f"{encoder.checksum()[:12]}…); rebuild it")
        theirs = encoder.colbert_config() if isinstance(encoder, ColBERTEncoder) else None
        if theirs != manifest.get("encoder_colbert"):
            raise IndexMismatchError(f"{directory}: the index was built with the ColBERT settings "
                                     f"{manifest.get('encoder_colbert')}, the encoder has {theirs}; rebuild it")
        tokens = TokenCache(directory / TOKENS_DIR)
        if len(tokens) != len(corpus):
            raise ValueError(f"{directory}: the token cache covers {len(tokens)} passages, the corpus {len(corpus)}")
        saved = PlaidSettings(**manifest.get("search", {}))
        built = cls(corpus, encoder, tokens, InvertedLists.load(directory / LISTS_DIR), k=k or manifest.get("k", 5),
                    settings=settings or saved)
        built.truncated = manifest.get("truncated", 0)
        return built

    @classmethod
    def describe(cls, directory: Path) -> dict:
        manifest = read_manifest(directory)
        return {**super().describe(directory), "encoder": manifest["encoder"],
                "encoder_sha256": manifest["encoder_sha256"], "encoder_fine_tuned": manifest.get("encoder_fine_tuned"),
                "pooling": None, "special_tokens": manifest.get("special_tokens", []),
                "token_states": manifest["token_states"]}

    def set_search(self, **settings) -> None:
        """Change the search settings (``nprobe``, ``centroid_threshold``, ``ndocs``; None: set by ``k``) for the
        queries to come."""
        self.settings = replace(self.settings, **settings)

    def search(self, queries: list[str], k: int) -> list[Hits]:
        return self.search_tokens(self.encoder.states(queries).tokens, k)

    def search_tokens(self, query_tokens: list[np.ndarray], k: int) -> list[Hits]:
        """One prediction per query's last-layer token states (encoded by this retriever's encoder)."""
        codec, parts = self.codec, stored_parts(self.tokens)

        def decode(rows: np.ndarray) -> np.ndarray:
            return codec.decode_projected({name: np.asarray(array[rows]) for name, array in parts.items()})

        found = []
        for tokens in query_tokens:
            rows, scores = plaid_search(codec.project(tokens), codec.centroids, parts["centroid"], self.tokens.offsets,
                                        self.lists, decode, min(k, len(self.corpus)), self.settings)
            found.append(hits_prediction(self.corpus, rows, scores))
        return found


def exhaustive_maxsim(query: np.ndarray, tokens: TokenCache, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` passages of a projected query by exact MaxSim over every passage's decoded projected states (what
    PLAID approximates; the reference its tests and measurements compare with), best first."""
    codec, parts = tokens.codecs["last"], stored_parts(tokens)
    vectors = codec.decode_projected({name: np.asarray(array) for name, array in parts.items()})
    scores = maxsim_by_passage(vectors @ query.T, np.diff(tokens.offsets))
    order = np.argsort(-scores, kind="stable")[: min(k, len(scores))]
    return order, scores[order]

