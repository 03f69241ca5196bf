"""Engine benchmark: the local engines on the same prompts and programs, in one run.

    python benchmarks/engines.py [--dataset musique] [--limit 3] [--programs SingleStepRAG,CoopRAG,ComposeRAG]
                                 [--engines transformers,llamacpp,llamacpp-json] [--max-tokens 128]

Engines: ``transformers`` (fp32) and ``llamacpp`` (the float32 GGUF llama.cpp converts from the Q4_1 file), each
with free decoding and, as ``-json``, decoding under each signature's bounded JSON schema; both reuse the KV state of
a prefix shared with the previous call. Table 1, raw speed on the answer prompts of
SingleStepRAG for the first questions (greedy, no cache, every call from an empty prefix): prompt and new tokens per
call, prefill tokens/s (a call capped at 1 new token), decode tokens/s (the extra tokens of a 64-token call over the
extra time), seconds per call, seconds per call and prompt tokens read from the prefix cache when each call follows
another prompt of the same stage, and whether the greedy text equals the transformers engine's. Table 2, the programs
on the same questions with each engine (MPNet index of their paragraphs with CoopRAG's markers, JSONAdapter, no LM
cache): seconds and LLM calls per question, stage replies that failed to parse (``stage_errors``, per question and
per stage, in percent of the stage's calls), replies that ran to ``--max-tokens``, prompt tokens read from the prefix
cache per question, and F1. Every row is an evaluation folder under ``--out``; a rerun resumes.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import dspy
from rich.console import Console
from rich.table import Table

from multihop.data.loaders import questions_with_corpus
from multihop.evaluation.runner import evaluate
from multihop.lm.backends import chat_request, make_lm
from multihop.programs import PROGRAMS, CoopRAG, SingleStepRAG
from multihop.retrievers import build_cached, load_retriever

console = Console(width=170)
ENGINES = {"transformers": {"engine": "transformers", "constrained": False},
           "transformers-json": {"engine": "transformers", "constrained": True},
           "llamacpp": {"engine": "llamacpp", "constrained": False},
           "llamacpp-json": {"engine": "llamacpp", "constrained": True}}


def engine_lm(name: str, max_tokens: int) -> dspy.LM:
    return make_lm("local:smollm2", max_tokens=max_tokens, cache=False, **ENGINES[name])


def answer_prompts(examples, retriever, count: int) -> list[list[dict]]:
    """The chat messages of SingleStepRAG's answer stage for the first ``count`` questions (JSONAdapter)."""
    program, adapter = SingleStepRAG(retriever=retriever), dspy.JSONAdapter()
    prompts = []
    for example in examples[:count]:
        hits = retriever(example.question, k=5)
        prompts.append(adapter.format(program.answer.signature, [], {"passages": hits.passages,
                                                                        "question": example.question}))
    return prompts


def speed_row(lm: dspy.LM, prompts: list[list[dict]]) -> dict:
    """Prefill and decode rates, seconds and tokens per call of one engine on ``prompts`` (greedy), every call from
    an empty prefix; and seconds per call when consecutive calls share the stage's prefix."""
    engine = lm._engine_spec
    prefill_tokens = prefill_s = decode_tokens = decode_s = calls_s = new = reused_s = saved = 0.0
    texts = []
    lm(chat_request(lm, prompts[0], max_tokens=1))  # load the model outside the timings
    for messages in prompts:
        engine.forget_prefix()
        start = time.perf_counter()
        first = lm(chat_request(lm, messages, max_tokens=1)).usage
        first_s = time.perf_counter() - start
        engine.forget_prefix()
        start = time.perf_counter()
        full = lm(chat_request(lm, messages, max_tokens=64))
        full_s = time.perf_counter() - start
        prefill_tokens += first.input_tokens
        prefill_s += first_s
        decode_tokens += max(full.usage.output_tokens - 1, 0)
        decode_s += max(full_s - first_s, 1e-9)
        calls_s += full_s
        new += full.usage.output_tokens
        texts.append(full.text)
    engine.forget_prefix()
    for messages in prompts:  # each call after another prompt of the same stage (the first after none)
        start = time.perf_counter()
        saved += lm(chat_request(lm, messages, max_tokens=64)).usage.cache_read_tokens or 0
        reused_s += time.perf_counter() - start
    n = len(prompts)
    return {"prompt tokens/call": prefill_tokens / n, "new tokens/call": new / n,
            "prefill tok/s": prefill_tokens / prefill_s, "decode tok/s": decode_tokens / decode_s,
            "s/call": calls_s / n, "s/call, prefix reused": reused_s / n, "prefill saved/call": saved / n,
            "texts": texts}


def stage_failures(folder: Path) -> dict[str, str]:
    """Per stage: unparsable replies in percent of the stage's calls, from the evaluation's traces."""
    calls, failed = Counter(), Counter()
    for path in (folder / "traces").glob("*.json"):
        for record in json.loads(path.read_text()):
            if record["kind"] == "lm":
                calls[record["stage"]] += 1
                failed[record["stage"]] += "error" in record
    return {stage: f"{100 * failed[stage] / calls[stage]:.0f}" for stage in sorted(calls)}


def capped_replies(folder: Path, max_tokens: int) -> float:
    """The share of LM calls (percent) whose completion ran to the cap."""
    completions = [record.get("completion_tokens", 0) for path in (folder / "traces").glob("*.json")
                   for record in json.loads(path.read_text()) if record["kind"] == "lm"]
    return 100 * sum(c >= max_tokens for c in completions) / max(len(completions), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="musique", help="dataset name or question file (dev split)")
    parser.add_argument("--limit", type=int, default=3, help="questions")
    parser.add_argument("--programs", default="SingleStepRAG,CoopRAG,ComposeRAG")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--max-tokens", type=int, default=128, help="generation cap of every stage")
    parser.add_argument("--speed-prompts", type=int, default=4, help="answer prompts for table 1 (0: skip it)")
    parser.add_argument("--out", default="runs/bench-engines")
    args = parser.parse_args()

    examples, corpus = questions_with_corpus(args.dataset, limit=args.limit)
    retriever = load_retriever(build_cached(corpus, token_layers=(), special_tokens=CoopRAG.special_tokens))
    engines = args.engines.split(",")
    console.print(f"{len(examples)} questions, {len(corpus)} passages; engines {engines}")
    if args.speed_prompts:
        prompts = answer_prompts(examples, retriever, args.speed_prompts)
        free = [name for name in engines if not ENGINES[name].get("constrained")]  # these prompts carry no schema
        rows = {name: speed_row(engine_lm(name, 64), prompts) for name in free}
        table = Table(title=f"Speed on {len(prompts)} SingleStepRAG answer prompts (greedy, no cache)")
        columns = ["prompt tokens/call", "new tokens/call", "prefill tok/s", "decode tok/s", "s/call",
                   "s/call, prefix reused", "prefill saved/call"]
        for column in ("engine", *columns, "same text as transformers"):
            table.add_column(column, justify="left" if column == "engine" else "right")
        reference = rows.get("transformers", {}).get("texts")
        for name, row in rows.items():
            equal = sum(a == b for a, b in zip(row["texts"], reference or row["texts"], strict=True))
            same = "–" if reference is None else f"{equal}/{len(reference)}"
            table.add_row(name, *(f"{row[c]:.1f}" for c in columns), same)
        console.print(table)
    table = Table(title=f"Programs on {len(examples)} {args.dataset} dev questions (max_tokens {args.max_tokens})")
    for column in ("program", "engine", "s/q", "LLM calls/q", "unparsable/q", "capped replies %", "prefill saved/q",
                   "F1", "unparsable % by stage"):
        table.add_column(column, justify="left" if column in ("program", "engine", "unparsable % by stage") else
                         "right")
    for program_name in filter(None, args.programs.split(",")):
        for engine in engines:
            folder = Path(args.out) / f"{args.dataset}-{corpus.checksum()[:8]}" / engine / program_name
            with dspy.context(lm=engine_lm(engine, args.max_tokens), adapter=dspy.JSONAdapter()):
                summary = evaluate(PROGRAMS[program_name](retriever=retriever), examples, folder,
                                   name=f"{program_name} on {engine}")
            failures = ", ".join(f"{stage} {rate}" for stage, rate in stage_failures(folder).items())
            table.add_row(program_name, engine, f"{summary['seconds']:.1f}", f"{summary['llm_calls']:.1f}",
                          f"{summary['stage_errors']:.1f}", f"{capped_replies(folder, args.max_tokens):.0f}",
                          f"{summary.get('cached_prompt_tokens', 0):.0f}", f"{100 * summary['f1']:.1f}", failures)
    if table.rows:
        console.print(table)


if __name__ == "__main__":
    main()
