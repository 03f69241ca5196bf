"""What the benchmarks, the demo and the CLI share: the question sets in ``MULTIHOP_DATA`` by dataset name, the
IRCoT corpus's cached dense index, and the LM options (which LM, its server and key, a LoRA adapter, the generation
cap) with the argparse arguments that set them.

Imports stay light (the heavy modules load inside the functions), so the CLI starts at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from multihop.models import DEFAULT_LM, DEFAULT_LM_TIMEOUT, LM_TIMEOUT_ENV, LOCAL_ENGINES
from multihop.paths import data_dir

QUESTION_SETS = {
    "dev": {"musique": "musique/dev/musique_qa_100.json", "hotpotqa": "hotpotqa/dev/hotpot_dev100.jsonl",
            "2wiki": "2wikimultihopqa/dev/2wiki_dev100.jsonl"},
    "train": {"musique": "musique/train/musique_train.json", "hotpotqa": "hotpotqa/train/hotpotqa_train.json",
              "2wiki": "2wikimultihopqa/train/wikihop_train_preprocess.json"},
}
DATASETS = tuple(QUESTION_SETS["dev"])
API_KEY_ENV = "MULTIHOP_API_KEY"
LM_HELP = "local:smollm2, local:<HF folder | .gguf>, or a dspy.LM model string (openai/<model>, ollama_chat/<model>)"
API_BASE_HELP = ("base URL of an OpenAI-compatible server; with a local:<model> spec, the server `multihop serve` "
                 "runs")
API_KEY_HELP = (f"API key of the server (default: ${API_KEY_ENV}); provider variables such as OPENAI_API_KEY also "
                "work, through LiteLLM")
ADAPTER_HELP = "LoRA adapter folder for a local LM (from `multihop distill`)"
MAX_TOKENS_HELP = "generation cap per LM call (default: 128 for a local LM, 384 for a served one)"
TIMEOUT_HELP = (f"seconds one LM request may take before it is retried (twice, with backoff, as are HTTP 429 and 5xx "
                f"answers); default ${LM_TIMEOUT_ENV} or {DEFAULT_LM_TIMEOUT:g}, for a served LM")
ENGINE_HELP = ("local LM engine: auto (llama.cpp for a GGUF model when llama-cpp-python is installed, a LoRA adapter "
               "converted to GGUF; else transformers), llamacpp or transformers")


def question_file(source: str | Path = "musique", split: str = "dev") -> Path:
    """A question file: ``source`` names a dataset (musique, hotpotqa, 2wiki: its ``split`` file in
    ``MULTIHOP_DATA``) or is a path, returned as it is."""
    if split not in QUESTION_SETS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(QUESTION_SETS)}")
    relative = QUESTION_SETS[split].get(str(source))
    return data_dir() / relative if relative else Path(source)


def held_apart_ids() -> set[str]:
    """The ids of every dev question file in ``MULTIHOP_DATA``: the questions measured, never trained on."""
    from multihop.data import load_dataset

    files = [data_dir() / relative for relative in QUESTION_SETS["dev"].values()]
    return {str(example.get("id")) for path in files if path.exists() for example in load_dataset(path)}


def load_questions(source: str | Path = "musique", split: str = "dev", limit: int | None = None) -> list:
    """The first ``limit`` questions (all by default) of :func:`question_file`\\ ``(source, split)``."""
    from multihop.data import load_dataset

    return load_dataset(question_file(source, split), limit=limit)


def questions_with_corpus(source: str | Path = "musique", split: str = "dev", limit: int | None = None) -> tuple:
    """:func:`load_questions` and their IRCoT corpus (the union of their paragraphs, deduplicated)."""
    from multihop.data import build_corpus, load_dataset

    path = question_file(source, split)
    examples = load_dataset(path, limit=limit)
    return examples, build_corpus(examples, source=str(path))


def cached_index(corpus, encoder: str = "mpnet", token_layers: tuple[int, ...] | None = None,
                 special_tokens: tuple[str, ...] = (), pooling: str = "mean") -> Path:
    """The folder of ``corpus``'s dense index under ``MULTIHOP_HOME/indexes``: built on first use (the encoding
    resumes if interrupted), then reused. ``token_layers=()`` keeps the last layer's token states for reranking;
    ``special_tokens`` are the markers a program's queries carry (``program.special_tokens``), ``pooling`` its index's
    first-stage pooling (``program.index_pooling``)."""
    from multihop.retrievers import DenseRetriever

    return DenseRetriever.build_cached(corpus, encoder=encoder, token_layers=token_layers,
                                       special_tokens=special_tokens, pooling=pooling)


def cached_retriever(corpus, encoder: str = "mpnet", token_layers: tuple[int, ...] | None = None,
                     special_tokens: tuple[str, ...] = (), pooling: str = "mean"):
    """The :func:`cached_index` of ``corpus`` loaded as a dense retriever (its ``corpus`` attribute is ``corpus``)."""
    from multihop.retrievers import DenseRetriever

    return DenseRetriever.load(cached_index(corpus, encoder, token_layers, special_tokens, pooling))


@dataclass(frozen=True)
class LMOptions:
    """The LM a run uses: its spec (``lm``), server (``api_base``, ``api_key``), LoRA ``adapter`` and ``engine``
    (local LMs), generation cap (``max_tokens``; None: the backend's default) and the time a served LM's request may
    take (``timeout``; None: ``$MULTIHOP_LM_TIMEOUT`` or 120 s). Other LMs of the run (a teacher, a
    judge, a prompt writer) share the server and key, and the engine choice."""

    lm: str = DEFAULT_LM
    api_base: str | None = None
    api_key: str | None = None
    adapter: str | None = None
    max_tokens: int | None = None
    engine: str = "auto"
    timeout: float | None = None

    def make(self, spec: str | None = None, max_tokens: int | None = None):
        """``spec`` (default: this LM, with its adapter and cap) as a ``dspy.LM``; ``max_tokens`` replaces the cap."""
        from multihop.lms import make_lm

        return make_lm(spec or self.lm, **self._settings(spec, max_tokens))

    def configure(self, spec: str | None = None, max_tokens: int | None = None):
        """:meth:`make` it and ``dspy.configure`` it with the adapter its spec runs best with."""
        from multihop.lms import configure_lm

        return configure_lm(spec or self.lm, **self._settings(spec, max_tokens))

    def _settings(self, spec: str | None, max_tokens: int | None) -> dict:
        own = spec is None or spec == self.lm
        local = (spec or self.lm).startswith("local:")
        # a server address serves the run's own LM; another local LM (a judge, a student) runs in-process
        api_base = self.api_base if own or not local else None
        return {"adapter": self.adapter if own else None, "api_base": api_base, "api_key": self.api_key,
                "max_tokens": max_tokens or (self.max_tokens if own else None), "timeout": self.timeout,
                **({"engine": self.engine} if local else {})}

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser, max_tokens: int | None = None) -> None:
        """``--lm --api-base --api-key --adapter --max-tokens`` on an argparse script (``max_tokens``: its default)."""
        parser.add_argument("--lm", default=DEFAULT_LM, help=LM_HELP)
        parser.add_argument("--api-base", default=None, help=API_BASE_HELP)
        parser.add_argument("--api-key", default=os.environ.get(API_KEY_ENV), help=API_KEY_HELP)
        parser.add_argument("--adapter", default=None, help=ADAPTER_HELP)
        parser.add_argument("--max-tokens", type=int, default=max_tokens, help=MAX_TOKENS_HELP)
        parser.add_argument("--engine", default="auto", choices=LOCAL_ENGINES,
                            help=ENGINE_HELP)
        parser.add_argument("--lm-timeout", type=float, default=None, help=TIMEOUT_HELP)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LMOptions:
        return cls(args.lm, args.api_base, args.api_key, args.adapter, args.max_tokens, args.engine, args.lm_timeout)


def student_lm(options: LMOptions, adapter: str | Path) -> tuple:
    """``options``' LM with the LoRA ``adapter`` folder, and the first 8 hex digits of its weights' sha256 (which key
    the folders of its resumable runs)."""
    from multihop.models import sha256_file

    weights = sha256_file(Path(adapter) / "adapter_model.safetensors")[:8]
    return dataclasses.replace(options, adapter=str(adapter)).make(), weights


def run_folder(root: str | Path, lm, dataset: str, corpus) -> Path:
    """Where a benchmark's rows on ``dataset`` resume: one folder per LM, dataset and corpus."""
    return Path(root) / f"{Path(str(lm.model)).name}-{dataset}-{corpus.checksum()[:8]}"


def evaluate_rows(rows: list[tuple], examples: list, out: Path, lm, judge_lm=None, threads: int = 1,
                  chosen: str | None = None) -> dict[str, dict]:
    """Evaluate each ``(name, folder, program)`` row (only the 1-based row numbers ``chosen`` lists, "2,5", when
    given) into ``out / folder``; each row's LM has its own rollout id, so no row is served from another row's
    cache. Returns the summaries by row name."""
    import dspy

    from multihop.evaluation import evaluate

    if chosen:
        rows = [rows[int(i) - 1] for i in chosen.split(",")]
    summaries = {}
    for number, (name, folder, program) in enumerate(rows, 1):
        with dspy.context(lm=lm.copy(rollout_id=number)):
            summaries[name] = evaluate(program, examples, out / folder, threads=threads, name=name, judge_lm=judge_lm)
    return summaries
