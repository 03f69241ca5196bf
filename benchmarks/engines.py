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

With ``--sampling N``, table 3 instead: sampling under the stages' schemas on llama.cpp, on the calls the demo's
programs make (SingleStepRAG and CoopRAG as ``multihop demo`` runs them, on its first N MuSiQue dev questions, greedy):
each call decoded by every sampler variant in turn (the order alternating from call to call; the programs continue on
the first variant's replies), the milliseconds a sampled token spent in the model's ``sample`` (logits to token,
the grammar advanced; the model's forward excluded) and a call in building its grammar and sampler, and how many
replies equal the first variant's, the differing ones printed. The variant here is the engine's own sampler;
:func:`sampling_run` takes others (a script comparing with another checkout's sampler passes it in).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from contextlib import contextmanager, nullcontext
from pathlib import Path

import dspy
from rich.console import Console
from rich.table import Table

from multihop.data.loaders import questions_with_corpus
from multihop.data.paths import atomic_write_text
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


class Stopwatch:
    """Seconds and calls counted into the named variant while :meth:`timing` it."""

    def __init__(self):
        self.current, self.seconds, self.counts = None, Counter(), Counter()

    @contextmanager
    def timing(self, variant: str):
        self.current = variant
        try:
            yield
        finally:
            self.current = None

    def wrap(self, function, kind: str):
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                if self.current is not None:
                    self.seconds[self.current, kind] += time.perf_counter() - started
                    self.counts[self.current, kind] += 1

        return timed


def sampling_run(limits: dict[str, int], variants: dict, out: Path) -> dict:
    """The demo's programs (``limits``: SingleStepRAG and/or CoopRAG → how many of its dev questions, in that order),
    each LM call decoded by every sampler variant (name → a function of the loaded llama.cpp model giving a context
    manager that installs it); per program: calls, sampled tokens, sampling and set-up seconds by variant, and each
    call's replies, written to ``out``/sampling.json as each program ends."""
    import llama_cpp
    from stage_account import programs, running_stage

    from multihop.experiments.demo import CHAIN_MAX_TOKENS, DEMO_MAX_TOKENS
    from multihop.lm.backends import engine_lm, llamacpp_weights
    from multihop.lm.engines import LlamaCppEngine, llamacpp_sampler

    watch = Stopwatch()
    llama_cpp.Llama.sample = watch.wrap(llama_cpp.Llama.sample, "sample")
    llamacpp_sampler.vocab_tokenizer = watch.wrap(llamacpp_sampler.vocab_tokenizer, "vocabulary")  # once a model
    grammar_from_schema = llama_cpp.llama_grammar.LlamaGrammar.from_json_schema.__func__
    llama_cpp.llama_grammar.LlamaGrammar.from_json_schema = classmethod(watch.wrap(grammar_from_schema, "setup"))
    calls = []

    class ABEngine(LlamaCppEngine):
        def generate(self, messages, config, max_tokens, schema):
            with self._lock:
                if self._model is None:
                    self._load()
            model, names = self._model, list(variants)
            order = names if len(calls) % 2 == 0 else names[::-1]
            call = {"stage": running_stage(), "replies": {}}
            for name in order:
                with variants[name](model), watch.timing(name):
                    kept_here = {key: model.__dict__.get(key) for key in ("_init_sampler", "schema_grammar")}
                    for attribute in kept_here:  # the variant's own, or the class's, timed as set-up
                        if hasattr(model, attribute):
                            setattr(model, attribute, watch.wrap(getattr(model, attribute), "setup"))
                    try:
                        generation = super().generate(messages, config, max_tokens, schema)
                    finally:
                        for attribute, value in kept_here.items():
                            model.__dict__.pop(attribute, None) if value is None else setattr(model, attribute, value)
                call["replies"][name] = {"text": generation.text, "tokens": generation.completion_tokens}
                if name == names[0]:
                    kept = generation
            calls.append(call)
            return kept

    weights = llamacpp_weights("smollm2", split_prompts=True)
    examples, builders = programs(max(limits.values()))
    summary = {}
    for program_name, limit in limits.items():
        engine = ABEngine(weights.gguf, prompt_gguf=weights.prompt_gguf)
        lm = engine_lm(f"local/{weights.identity}-sampling", engine, max_tokens=DEMO_MAX_TOKENS, cache=False)
        program = builders[program_name]()
        if program_name == "CoopRAG":
            for stage in program.stage_names():
                program.set_stage_lm(stage, lm.copy(max_tokens=CHAIN_MAX_TOKENS))
        watch.seconds.clear()
        watch.counts.clear()
        first = len(calls)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            evaluate(program, examples[:limit], out / "sampling" / program_name, name=program_name, progress=False)
        engine.close()
        summary[program_name] = {"variants": list(variants), "calls": calls[first:], "seconds": dict(watch.seconds),
                                 "counts": dict(watch.counts)}
        rows = {name: {**row, "seconds": {"/".join(key): value for key, value in row["seconds"].items()},
                       "counts": {"/".join(key): value for key, value in row["counts"].items()}}
                for name, row in summary.items()}
        atomic_write_text(out / "sampling.json", json.dumps(rows, indent=1))
    return summary


def print_sampling(summary: dict) -> None:
    table = Table(title="Sampling under the stages' schemas on llama.cpp (the demo's programs, greedy)")
    for column in ("program", "sampler", "calls", "tokens", "sampling ms/token", "set-up ms/call", "vocabulary s",
                   "same replies"):
        table.add_column(column, justify="left" if column in ("program", "sampler") else "right")
    for program_name, row in summary.items():
        names, seconds, calls = row["variants"], row["seconds"], row["calls"]
        for name in names:
            tokens = row["counts"].get((name, "sample"), 0)
            vocabulary = seconds.get((name, "vocabulary"), 0)  # inside the first call's set-up: the model's, once
            same = sum(call["replies"][name]["text"] == call["replies"][names[0]]["text"] for call in calls)
            table.add_row(program_name, name, str(len(calls)), str(tokens),
                          f"{1e3 * seconds.get((name, 'sample'), 0) / max(tokens, 1):.3f}",
                          f"{1e3 * (seconds.get((name, 'setup'), 0) - vocabulary) / max(len(calls), 1):.1f}",
                          f"{vocabulary:.2f}", f"{same}/{len(calls)}")
        for call in calls:
            texts = {name: reply["text"] for name, reply in call["replies"].items()}
            if len(set(texts.values())) > 1:
                console.print(f"[bold]{program_name} {call['stage']}[/bold]", texts)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="musique", help="dataset name or question file (dev split)")
    parser.add_argument("--limit", type=int, default=3, help="questions")
    parser.add_argument("--programs", default="SingleStepRAG,CoopRAG,ComposeRAG")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--max-tokens", type=int, default=128, help="generation cap of every stage")
    parser.add_argument("--speed-prompts", type=int, default=4, help="answer prompts for table 1 (0: skip it)")
    parser.add_argument("--out", default="runs/bench-engines")
    parser.add_argument("--sampling", type=int, default=0, help="table 3 alone, on this many of the demo's questions")
    args = parser.parse_args()
    if args.sampling:
        limits = {"SingleStepRAG": args.sampling, "CoopRAG": args.sampling}
        print_sampling(sampling_run(limits, {"llguidance": lambda model: nullcontext()}, Path(args.out)))
        return

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
