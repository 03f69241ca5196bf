"""``multihop adaptiverag``: Adaptive-RAG's classifier from its silver labels (§3.2): ``labels`` runs the strategies on
a held-out sample of the train questions (resumable; the authors' 500 of each dataset, :mod:`.sampling`), ``train``
fits the classifier on the labels joined, as the authors do, to the inductive-bias labels of the train files' first
400 questions of each dataset outside that sample (:func:`.labels.with_bias_labels`), and says how many rows each
source gave."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import typer

from multihop.data.question_sets import TRAIN_QUESTIONS, question_path
from multihop.lm.options import LMOptions, lm_options
from multihop.programs.baselines.adaptive_rag.classifier import TrainingSettings
from multihop.programs.baselines.adaptive_rag.complexity import BY_BIAS, DATASET_BIAS, LABELS
from multihop.programs.baselines.adaptive_rag.sampling import SAMPLE_SEED, SAMPLE_SIZE
from multihop.programs.command_kit import CommandKit, SharedOption
from multihop.programs.switches import parse_settings
from multihop.runtime.console import console

app = typer.Typer(help="Adaptive-RAG's query-complexity classifier (§3.2).", no_args_is_help=True)

SPLITS = ("train", "dev")
OWN_SETTINGS = ("route", "classifier", "oracle_labels")  # the job sets the route; the others do not answer
DEFAULTS = TrainingSettings()
BIAS_LIMIT = 400  # the authors' bias questions a dataset (preprocess_binary_train.py: the first 400 of each)


@app.command("labels")
@lm_options(help="the LM the strategies answer with (local:smollm2 by default): the labels are this LM's")
def adaptiverag_labels(
    lm: LMOptions,
    kit: CommandKit,
    dataset: str = typer.Option(..., "--dataset", help=f"the questions: {TRAIN_QUESTIONS}"),
    out: Path = typer.Option(..., help="labels folder (a rerun resumes it; with --sample 0 a larger --limit extends "
                             "it)"),
    limit: int = typer.Option(None, min=1, help="the first N questions of the file only (a sample is drawn from "
                              "them)"),
    sample: int = typer.Option(None, min=0, help=f"label a held-out sample of N questions of each dataset, drawn with "
                               f"--seed (default: the authors' {SAMPLE_SIZE} on train, every question on dev; 0: every "
                               "question, or the first --limit); `train` keeps the bias labels out of it"),
    seed: int = typer.Option(SAMPLE_SEED, help="the seed the sample is drawn with (the authors' random.seed)"),
    split: str = typer.Option("train", help="train: the classifier's labels; dev: the oracle's (`--set "
                              "oracle_labels=DIR` with `--set route=oracle`), which `train` refuses"),
    bias: str = typer.Option(None, help="the inductive-bias label of a question file of another dataset than "
                             f"{', '.join(DATASET_BIAS)} (B: single-hop, C: multi-hop)"),
    retriever: str = typer.Option(None, help="a saved retriever folder (default: a BM25 index of the question "
                                  "file's paragraphs, the method's first stage)"),
    corpus: str = typer.Option(None, help="a corpus file to index instead of the question file's paragraphs"),
    settings: list[str] = SharedOption("--set"),
    threads: int = typer.Option(1, min=1, help="questions labelled at once (for a served LM; the rows are the same)"),
):
    """Silver labels: each question of a held-out sample of the train file (the authors' 500 of each dataset) answered
    with no retrieval (A), single-step retrieval (B) and IRCoT (C), simplest first; its label is the simplest strategy
    that answers it correctly, else its dataset's inductive bias."""
    from multihop.data.folders import sha256_file
    from multihop.data.loaders import load_dataset
    from multihop.programs import AdaptiveRAG
    from multihop.programs.baselines.adaptive_rag.labels import label_questions, question_key
    from multihop.programs.baselines.adaptive_rag.sampling import held_out_sample
    from multihop.programs.switches import SwitchTypeError
    from multihop.retrievers import load_retriever

    if split not in SPLITS:
        raise typer.BadParameter(f"{split!r} is none of {', '.join(SPLITS)}", param_hint="--split")
    if bias is not None and bias not in LABELS:
        raise typer.BadParameter(f"{bias!r} is none of {', '.join(LABELS)}", param_hint="--bias")
    try:
        switches = AdaptiveRAG.typed_settings(parse_settings(settings or []))
    except (SwitchTypeError, TypeError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from exc
    refused = sorted(set(switches) & set(OWN_SETTINGS) | set(switches) - set(AdaptiveRAG.settings()))
    if refused:
        raise typer.BadParameter(f"{', '.join(refused)} cannot be set here; the strategies' settings: k, "
                                 "single_step_k, max_steps, reader", param_hint="--set")
    data_file = question_path(dataset, split)
    examples = load_dataset(data_file, limit=limit)
    size = (SAMPLE_SIZE if split == "train" else 0) if sample is None else sample
    if size:
        examples = held_out_sample(examples, size, seed)
    folder = kit.retriever_folder(retriever, corpus, str(data_file), "mpnet", "AdaptiveRAG")
    rm = load_retriever(folder)
    try:
        strategies = {label: AdaptiveRAG(retriever=rm, route=label, **switches) for label in LABELS}
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from exc
    configured = lm.configure()
    manifest = {"data": {"path": str(data_file), "sha256": sha256_file(data_file)}, "split": split,
                "strategies": {label: program.config() for label, program in strategies.items()},
                "lm": str(configured.model), "retriever": str(folder), "bias": bias,
                "sample": {"size": size, "seed": seed, "limit": limit} if size else None}
    rows = label_questions(strategies, examples, out, manifest, bias=bias, threads=threads,
                           sample=(size, seed) if size else None)
    labelled = [rows[question_key(example)] for example in examples]
    by_label = Counter(row["label"] for row in labelled)
    from_bias = sum(row["source"] == BY_BIAS for row in labelled)
    drawn = f" (a sample of {size} a dataset, seed {seed})" if size else ""
    console.print(f"labelled {len(labelled)} questions{drawn}: "
                  + ", ".join(f"{label} {by_label[label]}" for label in LABELS)
                  + f" ({from_bias} answered by no strategy took the dataset's bias) → {out}")
    if split == "train":
        console.print(f"train the classifier: multihop adaptiverag train {out} --out CLASSIFIER")


@app.command("train")
def adaptiverag_train(
    kit: CommandKit,
    labels: list[Path] = typer.Argument(..., exists=True, help="labels folders, or their labels.jsonl files "
                                        "(`multihop adaptiverag labels`)"),
    out: Path = typer.Option(..., help="the classifier folder to write (a classifier there is replaced)"),
    encoder: str = typer.Option("minilm", help="the frozen question encoder: a registry name or a "
                                "sentence-transformers folder"),
    epochs: int = typer.Option(DEFAULTS.epochs, min=1, help="full-batch epochs at most"),
    lr: float = typer.Option(DEFAULTS.lr, min=0.0, help="AdamW's learning rate"),
    weight_decay: float = typer.Option(DEFAULTS.weight_decay, min=0.0, help="AdamW's weight decay"),
    valid_share: float = typer.Option(DEFAULTS.valid_share, min=0.0, max=0.9, help="labels held out to pick the "
                                      "epoch kept (0: the last epoch)"),
    seed: int = typer.Option(DEFAULTS.seed, help="draws the held-out labels and the head's initial weights"),
    bias_data: list[str] = typer.Option(None, "--bias-data", help="a train question file, or a dataset name for its "
                                        "train file, whose questions take their dataset's inductive-bias label (B "
                                        "single-hop, C multi-hop; repeatable; default: the question files the labels "
                                        "folders were made from)"),
    bias_limit: int = typer.Option(BIAS_LIMIT, min=0, help="the first N questions of each dataset of each bias file "
                                   "(the authors' 400; 0: every question)"),
    bias: str = typer.Option(None, help="the inductive-bias label of a --bias-data file of another dataset than "
                             f"{', '.join(DATASET_BIAS)} (B: single-hop, C: multi-hop)"),
    silver_only: bool = typer.Option(False, "--silver-only", help="train on the silver labels alone, without the "
                                     "train files' bias labels"),
    overlapping_bias: bool = typer.Option(False, "--overlapping-bias", help="take the bias questions from the first "
                                          "--bias-limit of each dataset whether or not the silver labels hold them, a "
                                          "question with both keeping its silver label (ours: silver labels of a "
                                          "file's first questions then leave few bias labels; default: the first ones "
                                          "outside the silver labels and their sample: two sets that never overlap, "
                                          "like the authors')"),
):
    """Train the query-complexity classifier (a linear head on a frozen encoder, our stand-in for the paper's
    T5-Large) on silver labels of train questions and, as the authors do, the inductive-bias labels of other train
    questions: the first 400 of each dataset outside the silver labels' sample; says how many rows each source gave;
    give its folder to Adaptive-RAG with `--set classifier=DIR`."""
    from multihop.data.folders import RUN_MANIFEST, sha256_file
    from multihop.data.loaders import held_apart_ids
    from multihop.programs.baselines.adaptive_rag.classifier import train_classifier
    from multihop.programs.baselines.adaptive_rag.labels import (
        LABELS_FILE,
        question_key,
        read_labels,
        with_bias_labels,
    )
    from multihop.programs.baselines.adaptive_rag.sampling import sampled_questions
    from multihop.retrievers import Encoder

    if bias is not None and bias not in LABELS:
        raise typer.BadParameter(f"{bias!r} is none of {', '.join(LABELS)}", param_hint="--bias")
    if silver_only and (bias_data or overlapping_bias):
        raise typer.BadParameter("--silver-only trains on no bias labels: give --bias-data or --overlapping-bias, "
                                 "or --silver-only, not both", param_hint="--bias-data")
    settings = TrainingSettings(epochs=epochs, lr=lr, weight_decay=weight_decay, valid_share=valid_share, seed=seed)
    jobs = []
    for folder in (path if path.is_dir() else path.parent for path in labels):
        job = json.loads((folder / RUN_MANIFEST).read_text()) if (folder / RUN_MANIFEST).is_file() else {}
        if job.get("split", "train") != "train":
            raise typer.BadParameter(f"{folder} holds silver labels of {job['split']} questions (the oracle's): "
                                     "train on labels of train questions", param_hint="LABELS")
        jobs.append(job)
    silver = read_labels(*labels)
    sources = [] if silver_only else bias_sources(bias_data, jobs, bias)
    held = set() if overlapping_bias else {question_key(row) for row in silver}.union(
        *(sampled_questions(path) for path in labels))
    bias_labelled, bias_files = bias_labels(sources, bias_limit, held)
    rows = with_bias_labels(silver, bias_labelled)
    try:
        kit.refuse_held_apart(rows, held_apart_ids())
    except ValueError as exc:  # a question held apart for measuring
        raise typer.BadParameter(str(exc), param_hint="--bias-data" if bias_labelled else "LABELS") from exc
    classifier, record = train_classifier([row["question"] for row in rows], [row["label"] for row in rows],
                                          Encoder(encoder), settings)
    files = [path / LABELS_FILE if path.is_dir() else path for path in labels]
    record["label_files"] = [{"path": str(path), "sha256": sha256_file(path), "rows": len(read_labels(path)),
                              "sampled": len(sampled_questions(path))} for path in files]
    joined = {question_key(row) for row in rows[:len(rows) - len(silver)]}  # the bias rows the join kept
    for entry in bias_files:
        entry["kept"] = sum(key in joined for key in entry.pop("keys"))
    record["bias_files"] = bias_files
    record["bias_overlapping"] = overlapping_bias
    unanswered = sum(row.get("source") == BY_BIAS for row in silver)
    record["rows"] = {"silver": len(silver), "silver_by_bias": unanswered, "bias": len(rows) - len(silver)}
    classifier.save(out, record)
    for entry in record["label_files"]:
        console.print(f"silver labels: {entry['rows']} rows from {entry['path']}"
                      + (f" (a sample of {entry['sampled']} questions)" if entry["sampled"] else ""))
    taken = f"the first {bias_limit} of each dataset" if bias_limit else "every question"
    for entry in bias_files:
        outside = (f"; {entry['questions'] - entry['kept']} of them keep their silver label" if overlapping_bias
                   else f" outside the silver labels' {entry['skipped']} questions in the file")
        console.print(f"bias labels: {entry['kept']} rows from {entry['path']} ({taken}{outside})")
    training = record["training"]
    kept = "" if training["valid_accuracy"] is None else (f", epoch {training['epoch_kept']} kept at "
                                                          f"{training['valid_accuracy']:.1%} held-out accuracy")
    fallback = f" ({unanswered} answered by no strategy took the dataset's bias)" if unanswered else ""
    console.print(f"trained on {training['train_questions']} labels {training['labels']} ({len(silver)} silver"
                  f"{fallback}, {len(rows) - len(silver)} by the dataset's bias){kept} → {out}")


def bias_sources(bias_data: list[str] | None, jobs: list[dict], bias: str | None) -> list[tuple[Path, str | None]]:
    """The train files whose questions take their dataset's bias label, each with the bias given for a dataset
    without a known one: ``--bias-data`` (with ``--bias``), else the question files the labels jobs read (with the
    bias each job was given); a file once."""
    if bias_data:
        sources = [(question_path(data, "train"), bias) for data in bias_data]
    else:
        sources = [(Path(job["data"]["path"]), job.get("bias") or bias) for job in jobs if job.get("data")]
        missing = next((path for path, _ in sources if not path.is_file()), None)
        if missing is not None:
            raise typer.BadParameter(f"{missing}, the question file the labels were made from, is gone: give the "
                                     "train files with --bias-data, or train with --silver-only",
                                     param_hint="--bias-data")
    return list({path.resolve(): (path, label) for path, label in sources}.values())


def bias_labels(sources: list[tuple[Path, str | None]], limit: int, held: set[tuple[str, str]] = frozenset()
                ) -> tuple[list[dict], list[dict]]:
    """The bias rows of the first ``limit`` questions (0: all) of each dataset of each file outside ``held`` (the
    silver labels' questions and sample, by dataset and id; each row's dataset is the one its question file's loader
    gives it: the file's format, or a JSON-lines row's ``dataset`` field), and what each file gave (path, checksum,
    questions, how many held questions it holds, the questions' keys) for the classifier's manifest."""
    from multihop.data.folders import sha256_file
    from multihop.data.loaders import load_dataset
    from multihop.programs.baselines.adaptive_rag.labels import bias_rows, first_of_each_dataset, question_key

    rows, files = [], []
    for path, label in sources:
        examples = load_dataset(path)
        try:
            found = bias_rows(first_of_each_dataset(examples, limit, held), label)
        except ValueError as exc:
            raise typer.BadParameter(f"{path}: {exc}", param_hint="--bias") from exc
        rows += found
        files.append({"path": str(path), "sha256": sha256_file(path), "questions": len(found),
                      "skipped": sum(question_key(example) in held for example in examples),
                      "keys": [question_key(row) for row in found]})
    return rows, files
