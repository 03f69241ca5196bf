"""Where each LM call's time goes on the llama.cpp engine, per stage, with and without the per-stage prefix cache.

    python benchmarks/stage_account.py [--limit 5] [--programs SingleStepRAG,CoopRAG] [--out runs/bench-account]

The programs run as ``multihop demo`` runs them — MuSiQue dev questions over the demo's MPNet indexes of its corpus
(built once and cached), SmolLM2 on llama.cpp under the stages' JSON schemas (prompts evaluated on its float32 context,
replies decoded from its Q4_1 file), 32 new tokens a call (CoopRAG's stages 256) — twice in one process: with the engine
keeping only the last call's KV state (``prefix_cache_bytes=0``) and with its per-stage prefix cache. For every stage
(the trace's stage running when the engine is called): calls, decodes a call (a decode cut by its token cap is decoded
again under a tighter schema, reading the prompt again), prompt tokens a call, prompt tokens evaluated (over all its
decodes) and reused (read from the cache by its first decode) a call, the share evaluated, and the seconds a call spent
in llama.cpp's prompt evaluation (both contexts') and its decoding (its own counters, ``llama_perf_context``; the
prompt's last token, evaluated by the decoding context, counts as decoded) and elsewhere (sampling under the grammar,
templating, DSPy, parsing).
Then per program: seconds a question both ways and whether every answer is the same. Rows are evaluation folders under
``--out`` (a rerun resumes them: delete the folder to measure again).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

import dspy
from rich.console import Console
from rich.table import Table

from multihop.data.jsonl import read_rows
from multihop.data.loaders import build_corpus, load_questions
from multihop.evaluation.runner import evaluate
from multihop.experiments.demo import CHAIN_MAX_TOKENS, DEMO_MAX_TOKENS
from multihop.lm.backends import engine_lm, llamacpp_weights
from multihop.lm.engines import LlamaCppEngine
from multihop.programs import CoopRAG, SingleStepRAG
from multihop.retrievers import DenseRetriever, IndexSpec, load_retriever
from multihop.runtime.tracing import active_traces

console = Console(width=170)
MODES = {"last call only": 0, "per-stage cache": None}  # prefix_cache_bytes (None: the engine's default)


class CountedEngine(LlamaCppEngine):
    """The llama.cpp engine recording, for each call, the stage that made it, its decodes, llama.cpp's
    prompt-evaluation and decoding milliseconds and the prompt tokens it evaluated and reused. Its counters are the
    engine's own, so it counts calls made one at a time (as the evaluation here makes them: an in-process engine
    takes one question and one call at a time)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[dict] = []
        self._decodes: list = []

    def complete(self, request):
        import llama_cpp.llama_cpp as bindings

        self._decodes = []
        for model in self._contexts():
            bindings.llama_perf_context_reset(model._ctx.ctx)
        started = time.perf_counter()
        response = super().complete(request)
        decoding, *prompts = (bindings.llama_perf_context(model._ctx.ctx) for model in self._contexts())
        # the decoding context evaluates a split prompt's last token alone: llama.cpp counts it as a decoded one
        self.calls.append({"stage": running_stage(), "seconds": time.perf_counter() - started,
                           "prompt_ms": decoding.t_p_eval_ms + sum(p.t_p_eval_ms + p.t_eval_ms for p in prompts),
                           "decode_ms": decoding.t_eval_ms, "decodes": len(self._decodes),
                           "prompt": self._decodes[0].prompt_tokens, "reused": self._decodes[0].cached_tokens,
                           "evaluated": sum(g.prompt_tokens - g.cached_tokens for g in self._decodes)})
        return response

    def generate(self, messages, config, max_tokens, schema):
        generation = super().generate(messages, config, max_tokens, schema)
        self._decodes.append(generation)
        return generation

    def _contexts(self) -> list:
        """The loaded llama.cpp models: the decoding one, then the one evaluating its prompts, if apart."""
        if self._model is None:
            return []
        return [self._model] + ([self._model.prompts] if self._model.prompts is not None else [])


def running_stage() -> str:
    """The stage of the program being traced here whose LM call is running."""
    stage = next((trace.current.get()["stage"] for trace in active_traces() if trace.current.get() is not None), None)
    if stage is None:
        raise RuntimeError("an LM call outside any traced stage: the account counts the calls of a program's stages")
    return stage


def programs(limit: int) -> tuple[list[dspy.Example], dict]:
    """The demo's dev questions and its two indexes (baselines' and CoopRAG's), built once and cached."""
    trainset, devset = load_questions("musique", "train", limit=20), load_questions("musique", "dev", limit=20)
    corpus = build_corpus([*trainset, *devset], source="musique train+dev questions in use")
    plain, marked = DenseRetriever.build_cached_many(corpus, "mpnet", [
        IndexSpec(), IndexSpec(CoopRAG.index_pooling, token_layers=(), special_tokens=CoopRAG.special_tokens)])
    return devset[:limit], {"SingleStepRAG": lambda: SingleStepRAG(retriever=load_retriever(plain)),
                            "CoopRAG": lambda: CoopRAG(retriever=load_retriever(marked))}


def run(name: str, build, examples, folder: Path, cache_bytes: int | None) -> tuple[dict, dict, CountedEngine]:
    """One program's evaluation on a fresh engine; its summary, its LM calls by stage and the engine."""
    weights = llamacpp_weights("smollm2", split_prompts=True)  # as the demo's LM runs it
    cache = {} if cache_bytes is None else {"prefix_cache_bytes": cache_bytes}
    engine = CountedEngine(weights.gguf, prompt_gguf=weights.prompt_gguf, **cache)
    lm = engine_lm(f"local/{weights.identity}-account-{cache_bytes}", engine, max_tokens=DEMO_MAX_TOKENS, cache=False)
    program = build()
    if name == "CoopRAG":
        for stage in program.stage_names():
            program.set_stage_lm(stage, lm.copy(max_tokens=CHAIN_MAX_TOKENS))
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        summary = evaluate(program, examples, folder, name=name, progress=False)
    by_stage = defaultdict(list)
    for call in engine.calls:
        by_stage[call["stage"]].append(call)
    return summary, by_stage, engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=5, help="MuSiQue dev questions (of the demo's 20)")
    parser.add_argument("--programs", default="SingleStepRAG,CoopRAG")
    parser.add_argument("--out", default="runs/bench-account")
    args = parser.parse_args()
    examples, builders = programs(args.limit)
    table = Table(title=f"LM calls by stage on {len(examples)} MuSiQue dev questions (SmolLM2 on llama.cpp)")
    for column in ("program", "stage", "engine keeps", "calls", "decodes", "prompt tok", "evaluated", "reused",
                   "evaluated %", "prompt eval s", "decode s", "rest s", "s/call"):
        table.add_column(column, justify="left" if column in ("program", "stage", "engine keeps") else "right")
    outcome = Table(title="Per question")
    for column in ("program", "engine keeps", "s/q", "evaluated % of prompt tokens", "F1", "same answers"):
        outcome.add_column(column, justify="left" if column in ("program", "engine keeps") else "right")
    for name in filter(None, args.programs.split(",")):
        answers = {}
        for mode, cache_bytes in MODES.items():
            folder = Path(args.out) / name / mode.replace(" ", "-")
            if (folder / "results.jsonl").exists():
                raise SystemExit(f"{folder} holds an earlier measurement: delete {args.out} to measure again")
            summary, by_stage, _ = run(name, builders[name], examples, folder, cache_bytes)
            answers[mode] = {qid: row["prediction"] for qid, row in read_rows(folder / "results.jsonl").items()}
            prompt_total = evaluated_total = 0
            for stage, calls in by_stage.items():
                n = len(calls)
                prompt = sum(c["prompt"] for c in calls)
                evaluated = sum(c["evaluated"] for c in calls)
                prompt_total, evaluated_total = prompt_total + prompt, evaluated_total + evaluated
                eval_s, decode_s = sum(c["prompt_ms"] for c in calls) / 1e3, sum(c["decode_ms"] for c in calls) / 1e3
                seconds = sum(c["seconds"] for c in calls)
                table.add_row(name, stage, mode, str(n), f"{sum(c['decodes'] for c in calls) / n:.2f}",
                              f"{prompt / n:.0f}", f"{evaluated / n:.0f}", f"{sum(c['reused'] for c in calls) / n:.0f}",
                              f"{100 * evaluated / max(prompt, 1):.0f}",
                              f"{eval_s / n:.2f}", f"{decode_s / n:.2f}", f"{(seconds - eval_s - decode_s) / n:.2f}",
                              f"{seconds / n:.2f}")
            same = "–" if len(answers) < 2 else \
                f"{sum(a == answers['last call only'][q] for q, a in answers[mode].items())}/{len(answers[mode])}"
            outcome.add_row(name, mode, f"{summary['seconds']:.1f}",
                            f"{100 * evaluated_total / max(prompt_total, 1):.0f}", f"{100 * summary['f1']:.1f}", same)
    console.print(table)
    console.print(outcome)


if __name__ == "__main__":
    main()
