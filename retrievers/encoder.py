"""Sentence encoders over the offline models, with the layer-wise states RaLa needs (CoopRAG §3.3–3.4).

``Encoder("mpnet")`` resolves its name with :func:`resolve_encoder`: a registry name through
:mod:`multihop.lm.models` (checksum verified); any other value is a path to a sentence-transformers folder (for
example one written by ``multihop cooprag train``) or, when no such path exists, a Hugging Face Hub id
(``BAAI/bge-base-en-v1.5``, ``org/name@revision``) found in or downloaded to huggingface_hub's cache; the commit it
resolved to is the encoder's :attr:`~Encoder.revision`, recorded by :meth:`Encoder.config`. Embeddings are
L2-normalised so an inner-product index ranks by cosine similarity. Runs on CUDA when present.

Besides the pooled embedding used for first-stage search, :meth:`Encoder.states` returns in one forward pass the
L2-normalised token states of the last layer (Eq. 2), the ``[CLS]`` state of every layer (the gap-aware weight of
Eq. 4) and, on request, the token states of premature layers (Eq. 3). The first-stage embedding is set by ``pooling``:
``"mean"`` is the model's own pooling (mean pooling for MPNet and MiniLM, as they were trained), ``"cls"`` the
last-layer ``[CLS]`` state, CoopRAG's Eq. 2 ⟨q0, d0⟩. Pooling changes the pooled embedding only (the token and
``[CLS]`` states rerankers read are the same), so an index records it (:meth:`Encoder.config`) and refuses a query
encoder that pools otherwise.

``special_tokens`` are markers a method writes into its queries (CoopRAG's unrolling placeholders, for one), added
to the tokenizer so a query never splits them into word pieces. None are added by default. Their new embedding
rows start as the mean of the existing rows (deterministic, unlike transformers' sampled mean-resizing); a folder
written by ``multihop cooprag train`` records the ones it was trained with (``special_tokens`` in
``multihop-encoder.json``) and keeps them, trained, whatever is asked. The special tokens change what a text
encodes to, so an index records them with the encoder (:meth:`Encoder.config`) and refuses a query encoder with
other ones. Texts are cut at 512 tokens; :attr:`Encoder.truncated` counts the cut ones.

One encoder serves every thread of an evaluation (``--threads``): its model returns every layer's states on every
call (set once when it loads, never switched per call, which concurrent calls would switch off under each other), and
the tokenizer and model run one call at a time under the encoder's lock (a fast tokenizer refuses concurrent calls
that change its truncation, "Already borrowed"; on a CPU the model's own threads use the cores anyway). Concurrent calls
are gathered into batches as inference servers batch (dynamic batching, :class:`Coalescing`): a batch starts when it
holds ``max_batch`` texts (default :data:`DEFAULT_MAX_BATCH`) or ``max_wait_s`` after its first call arrived (default
:data:`DEFAULT_MAX_WAIT_S`), and calls that arrive while a batch runs make up the next one, so many questions in flight
encode their queries in batches, which on a CPU costs about half the CPU a query that each call encoded alone costs
(measured: MPNet, 32 MuSiQue questions, 2 cores, 232 → 101 ms CPU a query); with ``forward_tokens`` set, a forward
pass takes more short texts than ``batch_size`` (:meth:`Encoder.forward_size`). :meth:`Encoder.batching_stats` counts
the batches' sizes and waits. Which texts share a padded batch then depends on timing, which moves a score by float
rounding (below 1e-5, tested): a near-tie between two passages could order differently from run to run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from multihop.data.folders import verify_inventory
from multihop.lm import models

MAX_LENGTH = 512
POOLINGS = ("mean", "cls")
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
CPU_BATCH = 8  # texts a CPU forward pass (benchmarks/scale.py encoding, MPNet, 2 cores: 16 was 10 % faster, 32 slower)
FORWARD_TOKENS = 0  # padded tokens short texts may fill a pass beyond batch_size texts (0: none; Encoder.forward_size)
FINETUNED_STAMP = "multihop-encoder.json"  # what `multihop cooprag train` writes beside a fine-tuned encoder

logger = logging.getLogger(__name__)


DEFAULT_MAX_BATCH = 64  # texts gathered from concurrent calls into one encoder batch (TEI's max client batch is 32)
DEFAULT_MAX_WAIT_S = 0.002  # how long a batch waits for company after its first call arrives


class _Waiting:
    """One call's texts, when it arrived, and its result or error once a batch has run."""

    def __init__(self, texts: list[str]):
        self.texts, self.result, self.error, self.done = texts, None, None, False
        self.arrived = time.perf_counter()


@dataclass
class BatchStats:
    """What a :class:`Coalescing` has run (summed with ``+``; :meth:`as_dict` for JSON).

    Args:
        batches: the batches run (each one ``run`` over gathered calls, retries of a failed batch not counted).
        calls: the calls they answered.
        texts: the texts they encoded.
        sizes: how many batches had each number of texts.
        waited_s: the seconds the calls waited from their arrival to their batch's start, in all.
        longest_wait_s: the longest of those waits.
        run_s: the seconds the batches ran.
    """

    batches: int = 0
    calls: int = 0
    texts: int = 0
    sizes: Counter = field(default_factory=Counter)
    waited_s: float = 0.0
    longest_wait_s: float = 0.0
    run_s: float = 0.0

    def __add__(self, other: BatchStats) -> BatchStats:
        return BatchStats(self.batches + other.batches, self.calls + other.calls, self.texts + other.texts,
                          self.sizes + other.sizes, self.waited_s + other.waited_s,
                          max(self.longest_wait_s, other.longest_wait_s), self.run_s + other.run_s)

    def as_dict(self) -> dict:
        """The counts as JSON: the mean and largest batch (texts), the mean and longest wait (ms) besides them."""
        return {"batches": self.batches, "calls": self.calls, "texts": self.texts,
                "mean_batch": self.texts / self.batches if self.batches else 0.0,
                "largest_batch": max(self.sizes, default=0),
                "mean_wait_ms": 1000 * self.waited_s / self.calls if self.calls else 0.0,
                "longest_wait_ms": 1000 * self.longest_wait_s, "run_s": self.run_s,
                "sizes": {str(size): count for size, count in sorted(self.sizes.items())}}


class Coalescing:
    """``run(texts)`` for many threads, batched as inference servers batch (dynamic batching): calls that arrive
    close together are answered by one ``run`` over all their texts, each call handed its own rows in order
    (``split(result, start, stop)``).

    A batch starts when it holds ``max_batch`` texts or ``max_wait_s`` after its first call arrived, whichever comes
    first; calls that arrive while a batch runs wait for the next one, which starts as soon as the running one ends
    if its first call has waited ``max_wait_s`` already. Calls join batches in their order of arrival and are never
    split: a call of more than ``max_batch`` texts runs alone. ``max_batch=1`` runs every call alone (no batching);
    ``max_wait_s=0`` waits for no company, so a batch holds the calls that arrived while the one before it ran.
    A batch that fails is run again call by call, so an error reaches the calls whose texts raise it (every call of
    the batch when each raises, as a broken model does), never a call of another batch. Async callers reach it
    through threads (``TracedModule.acall`` runs a program on a worker thread). ``stats`` counts what it ran
    (:class:`BatchStats`).

    Args:
        run: texts → one result for all of them (a forward pass).
        split: (result, start, stop) → the rows ``start:stop`` of a result.
        max_batch: the most texts one batch gathers from concurrent calls (at least 1).
        max_wait_s: the longest a batch waits for more calls after its first arrived (seconds, 0 or more).
    """

    def __init__(self, run: Callable[[list[str]], object], split: Callable[[object, int, int], object],
                 max_batch: int = DEFAULT_MAX_BATCH, max_wait_s: float = DEFAULT_MAX_WAIT_S):
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch is a number of texts (1 or more), not {max_batch!r}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s is a number of seconds (0 or more), not {max_wait_s!r}")
        self.run, self.split, self.max_batch, self.max_wait_s = run, split, max_batch, max_wait_s
        self.waiting: deque[_Waiting] = deque()
        self.waiting_texts = 0
        lock = threading.Lock()  # the waiting calls, the turn and the counts
        self.arrivals = threading.Condition(lock)  # a call arrived: the thread gathering a batch looks
        self.turn_ends = threading.Condition(lock)  # a batch ended: its calls return, and another thread may run one
        self.running = False  # a thread is gathering or running a batch
        self.stats = BatchStats()

    def __call__(self, texts: list[str]):
        call = _Waiting(texts)
        with self.arrivals:
            self.waiting.append(call)
            self.waiting_texts += len(texts)
            self.arrivals.notify()  # only the gathering thread waits on arrivals
        while True:  # the thread whose turn comes runs the next batch, its own call in it or not
            with self.arrivals:
                while self.running and not call.done:
                    self.turn_ends.wait()
                if call.done:
                    break
                self.running = True
            try:
                with self.arrivals:
                    batch = self._gather()
                self._run(batch)
            finally:
                with self.arrivals:
                    self.running = False
                    self.turn_ends.notify_all()  # the answered calls return at once, and another thread takes the turn
        if call.error is not None:
            raise call.error
        return call.result

    def _gather(self) -> list[_Waiting]:
        """The next batch (called holding ``arrivals``): the waiting calls in their order of arrival, up to
        ``max_batch`` texts (at least one call), once that many texts wait or the first call has waited
        ``max_wait_s``."""
        deadline = self.waiting[0].arrived + self.max_wait_s
        while self.waiting_texts < self.max_batch and (left := deadline - time.perf_counter()) > 0:
            self.arrivals.wait(left)
        first = self.waiting.popleft()
        batch, size = [first], len(first.texts)
        while self.waiting and size + len(self.waiting[0].texts) <= self.max_batch:
            size += len(self.waiting[0].texts)
            batch.append(self.waiting.popleft())
        self.waiting_texts -= size
        return batch

    def _run(self, batch: list[_Waiting]) -> None:
        """Answer the batch; when it fails, each call alone, so one call's bad input fails that call only."""
        start = time.perf_counter()
        try:
            try:
                self._answer(batch)
            except Exception as exc:  # noqa: BLE001 - handed to the calls
                if len(batch) == 1:
                    batch[0].error = exc
                else:
                    for call in batch:
                        try:
                            self._answer([call])
                        except Exception as alone:  # noqa: BLE001 - handed to its call
                            call.error = alone
        except BaseException as exc:  # an interrupt: no waiting call is left without an answer
            for call in batch:
                if call.result is None and call.error is None:
                    call.error = exc
            raise
        finally:
            self._count(batch, start)
            for call in batch:
                call.done = True

    def take_stats(self, reset: bool = False) -> BatchStats:
        """A copy of :attr:`stats`; ``reset``: the counts start again."""
        with self.arrivals:
            taken = self.stats + BatchStats()
            if reset:
                self.stats = BatchStats()
        return taken

    def _count(self, batch: list[_Waiting], start: float) -> None:
        waits = [start - call.arrived for call in batch]
        with self.arrivals:
            stats = self.stats
            stats.batches, stats.calls = stats.batches + 1, stats.calls + len(batch)
            size = sum(len(call.texts) for call in batch)
            stats.texts += size
            stats.sizes[size] += 1
            stats.waited_s += sum(waits)
            stats.longest_wait_s = max(stats.longest_wait_s, *waits)
            stats.run_s += time.perf_counter() - start

    def _answer(self, batch: list[_Waiting]) -> None:
        result, start = self.run([text for call in batch for text in call.texts]), 0
        for call in batch:
            call.result, start = self.split(result, start, start + len(call.texts)), start + len(call.texts)


# the encoders of other model formats: a subclass defining ``recognises(name, revision) -> bool`` is listed when it is
# defined (the package imports each), and ``Encoder(name)`` is the first that recognises the model
ENCODER_KINDS: list[type] = []


@dataclass
class EncodedStates:
    """Layer-wise states of a batch of texts (numpy, float32, rows L2-normalised).

    ``tokens[i]``: last-layer token states of text ``i`` (``[T_i, d]``, ``[CLS]`` first); ``cls``: ``[B, L+1, d]``
    ``[CLS]`` state after the embeddings (0) and after every layer (1..L); ``layer_tokens[l][i]``: token states of
    premature layer ``l``, only for the layers asked for; ``pooled``: the encoder's pooling, ``mean``: the model's
    own (mean) pooling, whatever the encoder's.
    """

    pooled: np.ndarray
    tokens: list[np.ndarray]
    cls: np.ndarray
    layer_tokens: dict[int, list[np.ndarray]]
    mean: np.ndarray

    def rows(self, start: int, stop: int) -> EncodedStates:
        """The states of texts ``start`` to ``stop`` of the batch."""
        return EncodedStates(self.pooled[start:stop], self.tokens[start:stop], self.cls[start:stop],
                             {layer: states[start:stop] for layer, states in self.layer_tokens.items()},
                             self.mean[start:stop])

    def pooled_by(self, pooling: str) -> np.ndarray:
        """The embeddings pooled by ``pooling`` (:data:`POOLINGS`): ``mean`` the model's own, ``cls`` the last
        layer's ``[CLS]`` state."""
        return self.mean if pooling == "mean" else np.ascontiguousarray(self.cls[:, -1])


class Encoder:
    """``Encoder(name, special_tokens=())``: ``special_tokens`` are added to the ones a fine-tuned folder was trained
    with; ``sha256``, when given (a manifest's record), refuses weights with another checksum; ``pooling`` one of
    :data:`POOLINGS`; ``revision``, when given (a manifest's record) for a Hub model, loads that commit of it;
    ``max_batch`` and ``max_wait_s`` bound the batches concurrent calls are gathered into (:class:`Coalescing`,
    :meth:`configure_batching`)."""

    max_batch: int = DEFAULT_MAX_BATCH
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    forward_tokens: int = FORWARD_TOKENS

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "recognises" in cls.__dict__:
            ENCODER_KINDS.append(cls)

    def __new__(cls, name: str = "mpnet", *args, **kwargs):
        """The first of :data:`ENCODER_KINDS` that recognises the model ``name`` at ``revision`` (a ColBERT checkpoint:
        :class:`~.colbert_encoder.ColBERTEncoder`), else an :class:`Encoder`."""
        if cls is Encoder:
            revision = kwargs.get("revision", args[6] if len(args) > 6 else None)
            for kind in ENCODER_KINDS:
                if kind.recognises(name, revision):
                    return super().__new__(kind)
        return super().__new__(cls)

    def __init__(self, name: str = "mpnet", device: str | None = None, batch_size: int | None = None,
                 special_tokens: Sequence[str] = (), sha256: str | None = None, pooling: str = "mean",
                 precision: str = "auto", revision: str | None = None, max_batch: int = DEFAULT_MAX_BATCH,
                 max_wait_s: float = DEFAULT_MAX_WAIT_S, forward_tokens: int = FORWARD_TOKENS):
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        self.requested_precision = precision
        self.name, self.pooling = str(name), pooling
        pinned = revision and models.is_hub_id(self.name)
        self.path = resolve_encoder(f"{self.name.partition('@')[0]}@{revision}" if pinned else self.name)
        self.revision = models.snapshot_revision(self.path)  # the commit of a Hub model, else None
        verify_inventory(self.path)  # a fine-tuned folder: every file as it was saved
        self.special_tokens = tuple(dict.fromkeys((*trained_special_tokens(self.path), *special_tokens)))
        self._batch_size = batch_size
        self.truncated = 0
        self._device = device
        self._model = None
        self._lock = threading.RLock()
        self._checksum: str | None = None
        self.configure_batching(max_batch, max_wait_s, forward_tokens)
        if sha256 is not None and self.checksum() != sha256:
            raise models.ChecksumMismatchError(
                f"encoder {self.name} has weights with sha256 {self.checksum()}, not the {sha256} recorded with the "
                "index; rebuild the index"
            )

    def __getstate__(self) -> dict:
        """Pickled (DSPy's ``save_program=True``) without the loaded model, its lock and its batchers: the model is
        loaded again from ``path`` on first use after unpickling."""
        state = dict(self.__dict__)
        for name in ("_model", "_lock", "_encode", "_states"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("revision", None)  # pickled before encoders recorded a Hub model's commit
        self._model, self._lock = None, threading.RLock()
        self.configure_batching(self.max_batch, self.max_wait_s, self.forward_tokens)

    def configure_batching(self, max_batch: int = DEFAULT_MAX_BATCH, max_wait_s: float = DEFAULT_MAX_WAIT_S,
                           forward_tokens: int = FORWARD_TOKENS) -> None:
        """Gather concurrent :meth:`encode` and :meth:`states` calls into batches of at most ``max_batch`` texts,
        each waiting at most ``max_wait_s`` for company (:class:`Coalescing`); ``max_batch=1`` encodes every call
        alone. A forward pass takes ``batch_size`` texts, or more short ones up to ``forward_tokens`` padded tokens
        (:meth:`forward_size`; 0: ``batch_size`` texts whatever their length). The counts start again
        (:meth:`batching_stats`)."""
        if not isinstance(forward_tokens, int) or forward_tokens < 0:
            raise ValueError(f"forward_tokens is a number of tokens (0 or more), not {forward_tokens!r}")
        self.forward_tokens = forward_tokens
        self._encode = Coalescing(self._encode_batch, lambda vectors, start, stop: vectors[start:stop], max_batch,
                                  max_wait_s)
        self.max_batch, self.max_wait_s = self._encode.max_batch, self._encode.max_wait_s
        self._states: dict[tuple[int, ...], Coalescing] = {}

    def batching_stats(self, reset: bool = False) -> BatchStats:
        """What the batches of :meth:`encode` and :meth:`states` have run since the encoder loaded (or since the
        last ``reset``), summed."""
        with self._lock:
            batchers = [self._encode, *self._states.values()]
        return sum((batcher.take_stats(reset) for batcher in batchers), BatchStats())

    @property
    def model(self):
        """The sentence-transformers model, loaded on first use with the special tokens and a 512-token limit."""
        with self._lock:
            if self._model is None:
                import torch
                from sentence_transformers import SentenceTransformer

                device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
                model = SentenceTransformer(str(self.path), device=device, local_files_only=True)
                model.max_seq_length = min(MAX_LENGTH, model[0].auto_model.config.max_position_embeddings)
                model[0].auto_model.config.output_hidden_states = True  # every call: all layers' states
                _add_special_tokens(model[0], self.special_tokens)
                precision = self._resolved_precision(model.device.type)
                if precision != "fp32":
                    model.to(getattr(torch, TORCH_DTYPES[precision]))
                self._model = model
            return self._model

    def _resolved_precision(self, device_type: str) -> str:
        return ("fp16" if device_type == "cuda" else "fp32") if self.requested_precision == "auto" else \
            self.requested_precision

    @property
    def precision(self) -> str:
        """The float type the model computes in: ``auto`` is fp16 on a GPU and fp32 on a CPU (where half precision
        is slower and gains nothing)."""
        return self._resolved_precision(self.model.device.type)

    @property
    def batch_size(self) -> int:
        """Texts a forward pass: the one given, else :data:`CPU_BATCH` on a CPU and as many 512-token texts as a
        quarter of the GPU's free memory holds (:func:`batch_for_memory`) on a GPU."""
        with self._lock:  # threads asking first get one size
            if self._batch_size is None:
                import torch

                model = self.model
                if model.device.type != "cuda":
                    self._batch_size = CPU_BATCH
                else:
                    free, _ = torch.cuda.mem_get_info(model.device)
                    config = self.transformer_config
                    self._batch_size = batch_for_memory(free, config.hidden_size, config.num_hidden_layers,
                                                        2 if self.precision != "fp32" else 4)
            return self._batch_size

    def config(self) -> dict:
        """What an index records of its encoder and rebuilds it from: ``Encoder(**config)``; a Hub model's commit
        too (``revision``)."""
        return {"name": self.name, "special_tokens": list(self.special_tokens), "sha256": self.checksum(),
                "pooling": self.pooling, "precision": self.requested_precision,
                **({"revision": self.revision} if self.revision else {})}

    def same_as(self, other: Encoder) -> bool:
        """Whether ``other`` gives every text the same token and ``[CLS]`` states: the same model and the same special
        tokens (pooling aside, which only the pooled embedding depends on); a Hub model's, at the same commit."""
        return (self.name, self.revision, self.special_tokens) == (other.name, other.revision, other.special_tokens)

    @property
    def dimension(self) -> int:
        return int(self.model.get_embedding_dimension())

    @property
    def transformer_config(self):
        """The transformers configuration of the model's transformer (its hidden size and layers)."""
        return self.model[0].auto_model.config

    @property
    def num_layers(self) -> int:
        """Transformer layers ``L``; the states are indexed 0 (embeddings) to ``L`` (last layer)."""
        return int(self.transformer_config.num_hidden_layers)

    def checksum(self) -> str:
        """sha256 of the encoder's weights (``model.safetensors``; a Hub model's is read through the cache's link), an
        index records it and refuses a different encoder on load; a folder without that file: a hash of its path."""
        if self._checksum is None:
            spec = models.REGISTRY.get(self.name)
            weights = self.path / "model.safetensors"
            if spec is not None and spec.kind == "encoder":
                self._checksum = spec.sha256
            elif weights.exists():
                self._checksum = models.sha256_file(weights)
            else:
                self._checksum = hashlib.sha256(str(self.path).encode()).hexdigest()
        return self._checksum

    def encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """Normalised float32 pooled embeddings (:attr:`pooling`), shape ``(len(texts), dimension)``; concurrent
        calls are gathered into batches (:class:`Coalescing`)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._encode_batch(texts, progress) if progress else self._encode(list(texts))

    def _encode_batch(self, texts: list[str], progress: bool = False) -> np.ndarray:
        if self.pooling == "cls":
            return self.passage_states(texts).pooled
        with self._lock:
            lengths = self._count_truncated(texts)
            vectors = self.model.encode(texts, batch_size=self.forward_size(lengths), normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=progress)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def forward(self, texts: list[str], token_layers: tuple[int, ...] = ()) -> dict:
        """One forward pass with gradients as the caller's context allows (training uses this).

        Returns torch tensors: ``pooled`` ``[B, d]``, ``mean`` ``[B, d]`` (the model's own pooling), ``tokens``
        ``[B, T, d]`` (last layer), ``mask`` ``[B, T]``,
        ``cls`` ``[B, L+1, d]`` and ``layer_tokens`` ``{l: [B, T, d]}``, all L2-normalised along ``d``.
        """
        import torch
        import torch.nn.functional as F

        model = self.model
        with self._lock:
            features = {key: value.to(model.device) if hasattr(value, "to") else value
                        for key, value in model.preprocess(texts).items()}
            out = model(features)
        hidden = out["all_layer_embeddings"]  # each state normalised in fp32 (an fp32 one as it is, without a copy)
        last, mean = hidden[-1].float(), out["sentence_embedding"].float()
        pooled = last[:, 0] if self.pooling == "cls" else mean
        return {
            "pooled": F.normalize(pooled, dim=-1),
            "mean": F.normalize(mean, p=2, dim=1),
            "tokens": F.normalize(last, dim=-1),
            "mask": features["attention_mask"].bool(),
            "cls": F.normalize(torch.stack([h[:, 0] for h in hidden], dim=1).float(), dim=-1),
            "layer_tokens": {layer: F.normalize(hidden[layer].float(), dim=-1) for layer in token_layers},
        }

    def states(self, texts: list[str], token_layers: tuple[int, ...] = ()) -> EncodedStates:
        """:meth:`forward` without gradients, batched by length, as numpy arrays trimmed to each text's tokens;
        concurrent calls for the same layers are gathered into batches (:class:`Coalescing`)."""
        if not texts:
            raise ValueError("no texts to encode")
        layers = tuple(token_layers)
        with self._lock:
            if layers not in self._states:
                self._states[layers] = Coalescing(lambda batch: self._states_batch(batch, layers),
                                                  lambda states, start, stop: states.rows(start, stop),
                                                  self.max_batch, self.max_wait_s)
        return self._states[layers](list(texts))

    def candidate_states(self, texts: list[str], token_layers: tuple[int, ...] = ()) -> EncodedStates:
        """The states of texts a reranker scores against a query (passages, sentences, triples): :meth:`states`'s,
        for an encoder that encodes both sides alike (a ColBERT checkpoint encodes them as passages)."""
        return self.states(texts, token_layers)

    def passage_states(self, texts: list[str], token_layers: tuple[int, ...] | None = None) -> EncodedStates:
        """One forward pass a batch over ``texts`` (an index build's): both poolings (``pooled_by``), the ``[CLS]``
        state of every layer and, unless ``token_layers`` is None, the token states :meth:`states` gives. The batches
        are those of sentence-transformers' ``encode`` (longest first, :meth:`forward_size` texts a batch), so the
        ``mean`` vectors equal :meth:`encode`'s bit for bit, and the tokens and ``[CLS]`` states :meth:`states`'."""
        return self._states_batch(list(texts), tuple(token_layers or ()), keep_tokens=token_layers is not None)

    def _states_batch(self, texts: list[str], token_layers: tuple[int, ...], keep_tokens: bool = True) -> EncodedStates:
        import torch

        with self._lock:
            lengths = self._count_truncated(texts)
        order = np.argsort([-len(t) for t in texts])  # sentence-transformers' order: the same batches as `encode`
        pooled = np.zeros((len(texts), self.dimension), dtype=np.float32)
        mean = np.zeros_like(pooled)
        cls = np.zeros((len(texts), self.num_layers + 1, self.dimension), dtype=np.float32)
        tokens: list = [None] * len(texts) if keep_tokens else []
        layer_tokens: dict[int, list] = {layer: [None] * len(texts) for layer in token_layers}
        batch = self.forward_size(lengths)
        with torch.inference_mode():
            for start in range(0, len(texts), batch):
                rows = order[start : start + batch]
                out = self.forward([texts[i] for i in rows], token_layers)
                pooled[rows] = out["pooled"].float().cpu().numpy()
                mean[rows] = out["mean"].float().cpu().numpy()
                cls[rows] = out["cls"].float().cpu().numpy()
                if not keep_tokens:
                    continue
                for j, (row, length) in enumerate(zip(rows, out["mask"].sum(dim=1).tolist(), strict=True)):
                    tokens[row] = out["tokens"][j, :length].float().cpu().numpy()
                    for layer in token_layers:
                        layer_tokens[layer][row] = out["layer_tokens"][layer][j, :length].float().cpu().numpy()
        return EncodedStates(pooled, tokens, cls, layer_tokens, mean)

    def forward_size(self, lengths: list[int]) -> int:
        """Texts a forward pass takes of texts whose longest has ``max(lengths)`` tokens: :attr:`batch_size`, or as
        many as fill :attr:`forward_tokens` padded tokens when more do. Off by default: measured with MPNet on 2 CPU
        cores, 64 MuSiQue questions, passes of up to 40 questions (1,024 tokens) cost 83 ms of CPU a query against 64
        in passes of 8 with one torch thread, and 15–25 % less only with two threads contending for loaded cores. On a
        GPU ``batch_size`` 512-token texts already fill more."""
        longest = min(max(lengths, default=1), self.model.max_seq_length)
        return max(self.batch_size, self.forward_tokens // max(1, longest))

    def _count_truncated(self, texts: list[str]) -> list[int]:
        """Count the texts longer than the model takes; their token lengths."""
        tokenizer = self.model.tokenizer
        limit = self.model.max_seq_length
        lengths = [len(ids) for ids in tokenizer(texts, truncation=False, verbose=False)["input_ids"]]
        cut = sum(length > limit for length in lengths)
        if cut:
            self.truncated += cut
            logger.info("%d of %d texts are longer than %d tokens and were truncated", cut, len(texts), limit)
        return lengths


def batch_for_memory(free_bytes: int, hidden: int, layers: int, bytes_per_value: int, share: float = 0.25) -> int:
    """Texts of :data:`MAX_LENGTH` tokens a forward pass can take in ``share`` of ``free_bytes``: each keeps every
    layer's states (``(layers + 1)·512·hidden`` values, as RaLa reads them) and about four times that in the layer being
    computed (attention and feed-forward), between 8 and 512 texts."""
    per_text = (layers + 1 + 4) * MAX_LENGTH * hidden * bytes_per_value
    return int(min(512, max(8, share * free_bytes // per_text)))


def resolve_encoder(name_or_path: str | Path) -> Path:
    """A sentence-transformers folder: a registry encoder by name (:func:`multihop.lm.models.resolve`), a folder on
    disk, or a Hugging Face Hub model (:func:`multihop.lm.models.hub_snapshot`), in that order. A folder written by
    ``multihop cooprag train`` carries its weights' sha256 in its :data:`FINETUNED_STAMP`, checked here like a
    registry model's."""
    spec = models.REGISTRY.get(str(name_or_path))
    if spec is not None and spec.kind == "encoder":
        return models.resolve(spec.name)
    folder = models.hub_snapshot(str(name_or_path))[0] if models.is_hub_id(name_or_path) else Path(name_or_path)
    if not (folder / "modules.json").exists() and not (folder / "config.json").exists():
        known = ", ".join(name for name, s in models.REGISTRY.items() if s.kind == "encoder")
        raise FileNotFoundError(f"{name_or_path!r} is neither a known encoder ({known}), a model folder nor a "
                                "Hugging Face Hub model (org/name)")
    stamp = folder / FINETUNED_STAMP
    if stamp.exists():
        models.verify(folder / "model.safetensors", json.loads(stamp.read_text())["sha256"])
    return folder


def fine_tuned(folder: Path) -> bool:
    """Whether ``folder`` holds an encoder written by ``multihop cooprag train`` (it carries the training stamp)."""
    return (Path(folder) / FINETUNED_STAMP).exists()


def trained_special_tokens(folder: Path) -> tuple[str, ...]:
    """The special tokens a folder written by ``multihop cooprag train`` was trained with (none for other models)."""
    stamp = folder / FINETUNED_STAMP
    return tuple(json.loads(stamp.read_text()).get("special_tokens", ())) if stamp.exists() else ()


def trained_layers(folder: Path) -> tuple[tuple[int, ...], dict] | None:
    """The RaLa candidate layers a folder written by ``multihop cooprag train`` was trained with, and its training
    config (None for other models)."""
    stamp = folder / FINETUNED_STAMP
    if not stamp.exists():
        return None
    info = json.loads(stamp.read_text())
    return tuple(info.get("layers", ())), info.get("config", {})


def _add_special_tokens(transformer, tokens: tuple[str, ...]) -> None:
    """Add ``tokens`` to the tokenizer; new embedding rows start at the mean of the existing ones."""
    import torch

    tokenizer, model = transformer.tokenizer, transformer.auto_model
    if not tokens or not tokenizer.add_tokens(list(tokens), special_tokens=True):
        return
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    weight = model.get_input_embeddings().weight
    new_ids = tokenizer.convert_tokens_to_ids(list(tokens))
    with torch.no_grad():
        mean = weight[: min(new_ids)].mean(dim=0)
        for token_id in new_ids:
            weight[token_id] = mean


_SHARED: dict[str, Encoder] = {}
_SHARED_LOCK = threading.Lock()


def shared_encoder(name: str) -> Encoder:
    """One :class:`Encoder` of ``name`` (no special tokens, mean pooling) for the whole process: the encoder a
    program embeds with on its own (threads evaluating questions share it, and it loads once)."""
    with _SHARED_LOCK:
        if name not in _SHARED:
            _SHARED[name] = Encoder(name)
        return _SHARED[name]
