"""The main job (``make run`` → ``multihop demo``): the whole stack, end to end, on the embedded defaults.

1. install/verify the offline models (MPNet encoder, SmolLM2 LM);
2. load MuSiQue train and dev from ``MULTIHOP_DATA`` and build the IRCoT corpus of the questions used (the union of
   their paragraphs) and two MPNet FAISS indexes of it (cached, resumable): the baselines' (mean pooling) and
   CoopRAG's own ([CLS] pooling, Eq. 2, with its query markers and the token states RaLa reranks from);
3. compile ``SingleStepRAG`` with BootstrapFewShot on the train questions and save it (one bootstrapped demo);
4. evaluate the compiled ``SingleStepRAG``, ``NoRetrieval`` and ``CoopRAG`` (unroll → RaLa-reranked retrieval of the
   unrolled query → chain completion → answer; three LLM calls) on the dev questions (resumable), and
   ``SingleStepRAG`` with the shipped gold-trained student as its reader (:data:`SHIPPED_STUDENT`; docs/measurements.md,
   "The shipped student", measures it: of the stages it learnt, the reader is the one that lifts end-to-end F1 on
   MuSiQue dev; ``--student DIR`` another, ``--no-student`` none);
5. print one metrics table and where the rows and traces are.

The embedded LM runs on llama.cpp when it is built, decoding every stage under its signature's JSON schema, so the
replies parse and end when their fields are written. The baselines write one short answer (``--max-tokens``, 32 by
default); CoopRAG's unrolling writes sub-questions and a triple chain, so its stages get :data:`CHAIN_MAX_TOKENS`.

This module is the job; :mod:`multihop.cli.demo` is its command (``multihop demo``), the command line's layer over it.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from rich.console import Console

from multihop.data.loaders import load_questions
from multihop.data.question_sets import QUESTION_SETS
from multihop.lm.options import LMOptions

# Both programs answer with a short phrase: 32 tokens hold a JSON answer such as {"answer": "for Best Performance by
# a Leading Actress in a Play in Ondine"}, and on two CPU cores each generated token of SmolLM2 costs ~0.1 s. One
# bootstrapped demo (with its five passages) keeps the compiled prompt near 1,500 tokens.
DEMO_MAX_TOKENS = 32
CHAIN_MAX_TOKENS = 256
SHIPPED_STUDENT = Path(__file__).resolve().parents[1] / "student_adapters" / "gold-smollm2"


def run_demo(out: Path, train: int = 20, dev: int = 20, lm: LMOptions | None = None,
             console: Console | None = None, student: Path | None = None) -> dict:
    from multihop.data.loaders import build_corpus
    from multihop.evaluation.runner import evaluate, render_table
    from multihop.lm import models
    from multihop.optimize.compile import compile_program
    from multihop.optimize.student_stages import use_student
    from multihop.programs import PROGRAMS, load, save
    from multihop.retrievers import DenseRetriever, IndexSpec, load_retriever

    CoopRAG, NoRetrieval, SingleStepRAG = (PROGRAMS[name] for name in ("CoopRAG", "NoRetrieval", "SingleStepRAG"))
    lm = lm or LMOptions(max_tokens=DEMO_MAX_TOKENS)
    console = console or Console()
    started = time.perf_counter()
    timings = {}

    def step(name: str, t0: float) -> None:
        timings[name] = round(time.perf_counter() - t0, 1)
        console.print(f"[green]✓[/green] {name} ({timings[name]} s)")

    t0 = time.perf_counter()
    console.rule("1/5 models")
    models.install(["mpnet", "smollm2"])
    step("models", t0)

    t0 = time.perf_counter()
    console.rule("2/5 data and index")
    trainset = load_questions("musique", "train", limit=train)
    devset = load_questions("musique", "dev", limit=dev)
    corpus = build_corpus([*trainset, *devset], source="musique train+dev questions in use")
    console.print(f"MPNet indexes of {len(corpus)} passages (built once, resume if interrupted, then cached)")
    index_dir, cooprag_dir = DenseRetriever.build_cached_many(corpus, "mpnet", [  # one encoding pass for both
        IndexSpec(), IndexSpec(CoopRAG.index_pooling, token_layers=(), special_tokens=CoopRAG.special_tokens)])
    retriever = load_retriever(index_dir)
    console.print(f"{len(trainset)} train / {len(devset)} dev questions, {len(corpus)} passages, indexes {index_dir} "
                  f"and (CoopRAG) {cooprag_dir}")
    step("data + index", t0)

    t0 = time.perf_counter()
    console.rule("3/5 compile SingleStepRAG (BootstrapFewShot)")
    lm.configure()
    compiled_dir = out / "compiled-SingleStepRAG"
    if (compiled_dir / "manifest.json").exists():
        rag = load(compiled_dir, retriever=retriever)
    else:
        rag = compile_program(SingleStepRAG(retriever=retriever), trainset, metric="f1", max_bootstrapped_demos=1,
                              max_labeled_demos=0)
        save(rag, compiled_dir, retriever=str(index_dir), lm=lm.lm, **rag.compile_report,
             data={"path": QUESTION_SETS["train"]["musique"], "questions": len(trainset)})
    console.print(f"demos per stage: { {n: len(p.demos) for n, p in rag.named_predictors()} } → {compiled_dir}")
    step("compile", t0)

    cooprag = CoopRAG(retriever=load_retriever(cooprag_dir))
    chain_lm = lm.make(max_tokens=max(lm.max_tokens or 0, CHAIN_MAX_TOKENS))
    for stage in cooprag.stage_names():
        cooprag.set_stage_lm(stage, chain_lm)
    programs = {"SingleStepRAG (compiled)": rag, "NoRetrieval": NoRetrieval(), "CoopRAG": cooprag}
    if student is not None:  # zero-shot, as the student was trained: its rows carry no demos
        reader = SingleStepRAG(retriever=retriever)
        stages = use_student(reader, dataclasses.replace(lm, adapter=str(student)).make(), student)
        console.print(f"SingleStepRAG (student): stage {', '.join(stages)} on the student {student}")
        programs["SingleStepRAG (student)"] = reader
    summaries = {}
    for name, program in programs.items():
        t0 = time.perf_counter()
        console.rule(f"4/5 evaluate {name} on {len(devset)} MuSiQue dev questions")
        folder = name.split()[0] + ("-student" if name.endswith("(student)") else "")
        summaries[name] = evaluate(program, devset, out / folder, name=name)
        step(f"eval {name}", t0)

    console.rule("5/5 results")
    console.print(render_table(summaries, title=f"MuSiQue dev ({len(devset)} questions), LM {lm.lm}, MPNet top-5 "
                                                f"(CoopRAG: [CLS] top-20 reranked by RaLa Eq. 4)"))
    console.print(f"rows and traces: {out}/<program>/results.jsonl, traces/<id>.json — "
                  f"`multihop trace show {out}/SingleStepRAG` lists them")
    console.print(f"total {time.perf_counter() - started:.0f} s; steps: {timings}")
    return summaries
