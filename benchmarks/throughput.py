"""Throughput against a served LM, as a share of the ideal.

    python benchmarks/throughput.py --latency 0.3 --in-flight 1,8,32,64 --async-in-flight 32 --questions 32

A loopback OpenAI-compatible server (:mod:`multihop.lm.loopback`, started here in its own process on 127.0.0.1 and an
ephemeral port, stopped after ``--lifetime`` seconds) answers every call after exactly ``--latency`` seconds with a
reply drawn from the call's bounded JSON schema (``--structured auto``: the ``json_schema`` form), so the only cost
of an LM call is the latency and all the rest is ours. Every program (the five methods and the baselines) answers
the same ``--questions`` MuSiQue dev questions over the first stage ``multihop compare`` shares (``--first-stage``:
the dense MPNet index with the cached token states its rerankers read, by default; or BM25, whose queries cost no
encoder call, over which CoopRAG's and DualRAG's rerankers encode their candidates for every question), with
questions in flight as threads (``program(...)`` in a pool) and as asyncio tasks (``await program.acall(...)`` under a
semaphore). DSPy's cache is off, so every call reaches the server.

``--encoder-batching 1x0,64x0,64x2`` runs every program and setting under each way of batching the encoders' concurrent
calls (:class:`~multihop.retrievers.encoder.Coalescing`), side by side in one run: ``MAXxWAIT`` gathers at most
``MAX`` texts a batch and waits at most ``WAIT`` ms for company (``1x0``: every call encoded alone; ``64x0``: the calls
that arrived while a batch ran, no window); ``MAXxWAITxTOKENS`` sets the padded tokens a forward pass fills with short
texts too (``x0``: the encoder's ``batch_size`` texts a pass, whatever their length), and ``@THREADS`` torch's CPU
threads (``torch.set_num_threads``; without it, torch's own count). Each row records what the
encoders ran (batches, texts a batch, the calls' waits for their batch, the seconds the batches ran: ``encoder s``,
time the encoder is busy).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import heapq
import json
import pstats
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import dspy
import torch
from rich.console import Console
from rich.table import Table

from multihop.data.loaders import load_dataset
from multihop.data.paths import atomic_write_text
from multihop.data.question_sets import question_file
from multihop.experiments.program_indexes import program_retriever
from multihop.lm.adapter import default_adapter
from multihop.lm.backends import make_lm
from multihop.programs import PROGRAMS, takes_retriever
from multihop.retrievers.encoder import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT_S, FORWARD_TOKENS, BatchStats, Encoder
from multihop.runtime.parallel import fan_out

console = Console(width=170)
TORCH_THREADS = torch.get_num_threads()  # torch's own count, which a setting without @THREADS runs with


@contextmanager
def served(latency: float, lifetime: float):
    """The loopback server's address, the server running in a child process for at most ``lifetime`` seconds."""
    child = subprocess.Popen([sys.executable, "-m", "multihop.lm.loopback", "--latency", str(latency), "--lifetime",
                              str(lifetime)], stdout=subprocess.PIPE, text=True)
    try:
        yield child.stdout.readline().strip()
    finally:
        child.terminate()
        child.wait(timeout=10)


def lm_rounds(trace: list[dict]) -> int:
    """The sequential LM rounds of one question: the most LM records of its trace that pairwise do not overlap in
    time (greedy by end time), each weighing its requests (a retried call is two rounds)."""
    calls = sorted(((r["start_s"], r["start_s"] + r.get("latency_s", 0.0), r.get("lm_requests", 1))
                    for r in trace if r["kind"] == "lm"), key=lambda call: call[1])
    rounds, free_at = 0, float("-inf")
    for start, end, requests in calls:
        if start >= free_at - 1e-4:
            rounds, free_at = rounds + max(1, requests), end
    return rounds


def ideal_wall(durations: list[float], in_flight: int) -> float:
    """The wall time of jobs taking ``durations``, started in order, each as soon as one of ``in_flight`` slots is
    free (greedy list scheduling: what a pool of ``in_flight`` workers does with no cost of its own)."""
    free = [0.0] * max(1, min(in_flight, len(durations)))
    for duration in durations:
        heapq.heapreplace(free, free[0] + duration)
    return max(free)


def run_threads(program, questions: list[str], in_flight: int) -> list:
    return fan_out(lambda question: program(question=question), questions, in_flight)  # each in a context copy


def run_async(program, questions: list[str], in_flight: int) -> list:
    async def all_questions():
        gate = asyncio.Semaphore(in_flight)

        async def ask(question):
            async with gate:
                return await program.acall(question=question)

        return await asyncio.gather(*(ask(question) for question in questions))

    return asyncio.run(all_questions())


def batching(setting: str) -> tuple[int, float, int, int | None]:
    """``MAXxWAIT[xTOKENS][@THREADS]`` (texts, milliseconds, padded tokens a forward pass, torch's CPU threads) as
    ``(max_batch, max_wait_s, forward_tokens, threads)``; without ``TOKENS``, the encoder's default; without
    ``THREADS``, None (torch's own count)."""
    sizes, at, threads = setting.partition("@")
    parts = sizes.split("x")
    parts += [str(FORWARD_TOKENS)] if len(parts) == 2 else []
    if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) < 1 or not parts[1].replace(".", "", 1).isdigit() \
            or not parts[2].isdigit() or (at and (not threads.isdigit() or int(threads) < 1)):
        raise SystemExit(f"--encoder-batching takes MAXxWAIT[xTOKENS][@THREADS] settings (texts x milliseconds x "
                         f"padded tokens a forward pass, torch's CPU threads: 64x2, 64x2x0@1), not {setting!r}")
    size, wait, tokens = parts
    return int(size), float(wait) / 1000, int(tokens), int(threads) if threads else None


def live_encoders() -> list[Encoder]:
    """Every encoder this process holds (the retrievers', the rerankers' and the programs' own)."""
    return [each for each in gc.get_objects() if issubclass(type(each), Encoder)]  # type(): no lazy proxy warns


def encoder_stats() -> BatchStats:
    """What the encoders ran since the last call (their counts start again)."""
    return sum((encoder.batching_stats(reset=True) for encoder in live_encoders()), BatchStats())


def measure(name: str, retriever, api_base: str, questions: list[str], in_flight: int, mode: str,
            setting: str | None = None) -> dict:
    """One program's questions at ``in_flight`` at once: wall seconds, CPU seconds, calls, each question's LM
    requests and rounds (in the questions' order), and what the encoders ran; ``setting`` (``MAXxWAIT``): the
    encoders' batching for this run (None: as they are)."""
    cls = PROGRAMS[name]  # with its own defaults
    program = cls(retriever=retriever) if takes_retriever(cls) else cls()
    lm = make_lm("openai/loopback", api_base=api_base, api_key="loopback", cache=False)
    if setting is not None:
        *settings, threads = batching(setting)
        for encoder in live_encoders():
            encoder.configure_batching(*settings)
        torch.set_num_threads(threads or TORCH_THREADS)
    encoder_stats()
    with dspy.context(lm=lm, adapter=default_adapter(lm)):
        run = run_threads if mode == "threads" else run_async
        cpu, start = time.process_time(), time.perf_counter()
        predictions = run(program, questions, in_flight)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    calls = sum(p.counts["llm_calls"] for p in predictions)
    errors = sum(p.counts.get("stage_errors", 0) for p in predictions)
    return {"program": name, "mode": mode, "in_flight": in_flight, "questions": len(questions), "wall_s": wall,
            "cpu_s": cpu, "llm_calls": calls, "lm_requests": [p.counts["lm_requests"] for p in predictions],
            "rounds": [lm_rounds(p.stage_trace) for p in predictions], "stage_errors": errors,
            "batching": setting, "torch_threads": torch.get_num_threads(), "encoder": encoder_stats().as_dict()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds every LM call takes")
    parser.add_argument("--in-flight", default="1,8,32,64", help="questions in flight, comma-separated")
    parser.add_argument("--questions", type=int, default=32, help="MuSiQue dev questions")
    parser.add_argument("--programs", default=None, help="programs, comma-separated (default: compare's)")
    parser.add_argument("--async-in-flight", default="32", help="questions in flight as asyncio tasks, comma-separated "
                        "(none: '')")
    parser.add_argument("--first-stage", default="dense", choices=("bm25", "dense"),
                        help="the shared first stage: dense (MPNet queries, cached token states for the rerankers) or "
                        "bm25 (no encoder a query; rerankers encode their candidates)")
    parser.add_argument("--encoder-batching", default=f"{DEFAULT_MAX_BATCH}x{DEFAULT_MAX_WAIT_S * 1000:g}",
                        help="the encoders' batching settings to run side by side, comma-separated MAXxWAIT (texts a "
                        "batch x milliseconds a batch waits for company; 1x0: no batching)")
    parser.add_argument("--lifetime", type=float, default=3 * 3600, help="seconds the loopback server may run")
    parser.add_argument("--out", type=Path, default=Path("runs/throughput"))
    parser.add_argument("--profile", type=int, default=0, help="print the N functions taking most of the harness's "
                        "CPU in the 0 ms run (cProfile, this process's CPU time), per program")
    parser.add_argument("--table", type=Path, default=None, help="print the tables of a saved throughput.json only")
    args = parser.parse_args()
    if args.table is not None:
        saved = json.loads(args.table.read_text())
        if any(isinstance(row["rounds"], int) for row in saved["rows"]):
            raise SystemExit(f"{args.table} holds totals, not each question's rounds (an earlier version of this "
                             "benchmark): measure again")
        console.print(table(saved["rows"], saved["latency_s"]))
        print(markdown(saved["rows"], saved["latency_s"]))
        return
    path = question_file("musique", "dev")
    questions = [example.question for example in load_dataset(path, limit=args.questions)]
    names = args.programs.split(",") if args.programs else PROGRAMS.compared_by_default()
    loaded = {}  # index folder → its retriever, shared by the programs that read the same pooling
    searched = {name: program_retriever(name, path, "mpnet", args.first_stage, loaded=loaded)[0] for name in names}
    runs = [("threads", int(n)) for n in args.in_flight.split(",") if n] + [
        ("async", int(n)) for n in args.async_in_flight.split(",") if n]
    settings = [setting for setting in args.encoder_batching.split(",") if setting]
    for setting in settings:
        batching(setting)  # a malformed setting, before anything runs
    args.out.mkdir(parents=True, exist_ok=True)
    rows, harness = [], {}
    with served(0.0, args.lifetime) as api_base:
        for name in names:  # warm-up (encoders loaded, first calls) then the harness's CPU a call
            measure(name, searched[name], api_base, questions[:2], 1, "threads")
            profiler = cProfile.Profile(time.process_time) if args.profile else None
            with profiler or contextlib.nullcontext():
                zero = measure(name, searched[name], api_base, questions, 1, "threads")
            if profiler is not None:
                console.print(f"{name}: the harness's CPU by function, {sum(zero['lm_requests'])} calls")
                pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile)
            harness[name] = 1000 * zero["cpu_s"] / max(1, sum(zero["lm_requests"]))
            console.print(f"{name}: harness {harness[name]:.1f} ms CPU a call ({zero['llm_calls']} calls)")
    with served(args.latency, args.lifetime) as api_base:
        for name in names:
            for mode, in_flight in runs:
                for setting in settings:  # side by side: the same load for each setting
                    row = measure(name, searched[name], api_base, questions, in_flight, mode, setting)
                    row["harness_ms_per_call"] = harness[name]
                    rows.append(row)
                    console.print(f"{name} {mode} ×{in_flight} batching {setting}: {row['wall_s']:.1f} s, "
                                  f"{row['llm_calls']} calls, {sum(row['rounds'])} rounds, encoder "
                                  f"{row['encoder']['run_s']:.1f} s in {row['encoder']['batches']} batches")
                atomic_write_text(args.out / "throughput.json", json.dumps(
                    {"latency_s": args.latency, "questions": len(questions), "first_stage": args.first_stage,
                     "rows": rows}, indent=1))
    console.print(table(rows, args.latency))
    atomic_write_text(args.out / "throughput.md", markdown(rows, args.latency))


def table(rows: list[dict], latency: float) -> Table:
    """The measured rows against their ideals. A program's LM rounds are those of its run with one question at a
    time (nothing else competes there), so a run whose independent calls were serialised falls short of its ideal
    instead of moving it."""
    rounds = {row["program"]: row["rounds"] for row in rows if row["mode"] == "threads" and row["in_flight"] == 1}
    out = Table(title=f"Throughput against a loopback server answering every call after {latency * 1000:.0f} ms")
    for column in COLUMNS:
        out.add_column(column, justify="left" if column in ("program", "mode") else "right")
    for row in rows:
        out.add_row(*cells(row, latency, rounds.get(row["program"], row["rounds"])))
    return out


COLUMNS = ("program", "mode", "in flight", "batching", "LLM calls/q", "LM rounds/q", "wall s", "q/s",
           "ideal s (serial)", "ideal s (overlapped)", "share of ideal", "harness ms/call", "encoder batches",
           "texts/batch (max)", "wait ms (max)", "encoder s", "stage errors")


def cells(row: dict, latency: float, rounds: list[int]) -> list[str]:
    n = row["questions"]
    serial = ideal_wall([requests * latency for requests in row["lm_requests"]], row["in_flight"])
    overlapped = ideal_wall([question * latency for question in rounds], row["in_flight"])
    encoder = row.get("encoder") or BatchStats().as_dict()
    return [row["program"], row["mode"], str(row["in_flight"]), row.get("batching") or "-",
            f"{row['llm_calls'] / n:.1f}", f"{sum(rounds) / n:.1f}", f"{row['wall_s']:.1f}", f"{n / row['wall_s']:.2f}",
            f"{serial:.1f}", f"{overlapped:.1f}", f"{100 * overlapped / row['wall_s']:.0f}%",
            f"{row['harness_ms_per_call']:.1f}", str(encoder["batches"]),
            f"{encoder['mean_batch']:.1f} ({encoder['largest_batch']})",
            f"{encoder['mean_wait_ms']:.0f} ({encoder['longest_wait_ms']:.0f})", f"{encoder['run_s']:.1f}",
            str(row["stage_errors"])]


def markdown(rows: list[dict], latency: float) -> str:
    """The table as Markdown (the README's)."""
    rounds = {row["program"]: row["rounds"] for row in rows if row["mode"] == "threads" and row["in_flight"] == 1}
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells(row, latency, rounds.get(row["program"], row["rounds"]))) + " |"
              for row in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
