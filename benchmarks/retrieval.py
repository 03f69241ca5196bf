"""Retrieval benchmark (CoopRAG §4.2, App. E.5, E.9): Recall@2/5, nDCG@10 and MRR, index build throughput and query
latency.

    python benchmarks/retrieval.py [--data musique | FILE] --limit 25

The corpus is the union of the questions' paragraphs and the raw question is the query; each retriever's top 10 of
every question is scored by ``ranx`` against the gold passages (the questions that have them). One table lists BM25,
hybrid, dense MiniLM, dense MPNet (mean pooling and Eq. 2's [CLS]), MPNet + MaxSim, MPNet + RaLa Eq. 4 and Eq. 3
(top-20 reranked to top-5), and, with ``--finetuned DIR`` (from ``multihop cooprag train``), the fine-tuned MPNet
alone and with RaLa Eq. 4. Three rows set our readings of CoopRAG against the alternatives: RaLa Eq. 4 with ω
floored against the bare product a negative ω reverses, and the candidate layers drawn from 1..L−1 against the
earlier draw from 0..L−1 (which can pick the embedding output), each averaged over the layer-draw seeds 0–3.
A second table compares the MPNet index build with the raw encoder throughput measured in the same run and gives
query latency p50/p95 of the first stage and of the rerank, with the cached and with recomputed token states.
A third compares IVF and HNSW with exact search on ``--scale`` synthetic clustered vectors (recall@10, latency).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from multihop.data.loaders import questions_with_corpus
from multihop.data.paths import home
from multihop.data.question_sets import question_file
from multihop.evaluation.results import ranx_qrels, ranx_run
from multihop.retrievers import (
    BM25Retriever,
    DenseRetriever,
    Encoder,
    FaissIndex,
    HybridRetriever,
    MaxSim,
    RaLa,
    RerankedRetriever,
)
from multihop.retrievers.encoder import FINETUNED_STAMP

console = Console(width=150)


MEASURES = ["recall@2", "recall@5", "ndcg@10", "mrr"]  # ranx's names; the table's columns


def ranking_scores(ranked: dict[str, list[str]], examples) -> dict[str, float]:
    """ranx's mean of each of :data:`MEASURES` over the questions with gold passages (a question a retriever found
    nothing for scores 0), ``ranked`` question id → passage ids in order."""
    import ranx

    scores = ranx.evaluate(ranx_qrels(examples), ranx_run(ranked, name="retriever"), MEASURES, make_comparable=True)
    return {measure: float(scores[measure]) for measure in MEASURES}


def recall_row(name: str, retriever, examples) -> list[str]:
    """Recall@2 and @5, nDCG@10 and MRR of the top 10 (:func:`ranking_scores`, in percent) and the median query
    latency."""
    ranked, latency = {}, []
    for example in examples:
        start = time.perf_counter()
        prediction = retriever(example.question, k=10)
        latency.append(time.perf_counter() - start)
        ranked[str(example.id)] = list(prediction.ids)
    scores = ranking_scores(ranked, examples)
    return [name, *(f"{100 * scores[measure]:.1f}" for measure in MEASURES), ms(np.median(latency))]


def mean_row(name: str, retrievers: list, examples) -> list[str]:
    """:func:`recall_row` averaged over ``retrievers`` (one per layer-draw seed)."""
    rows = np.array([[float(value) for value in recall_row(name, r, examples)[1:]] for r in retrievers])
    return [name, *(f"{value:.1f}" for value in rows.mean(axis=0))]


class RaLaFromEmbeddings(RaLa):
    """RaLa drawing its candidate layers from hidden states 0..L−1, as before our Eq. 7 reading (1 ≤ l < L)."""

    def candidate_layers(self, num_layers: int) -> tuple[int, ...]:
        buckets, seed = self.settings()
        rng = random.Random(seed)
        return tuple(int(rng.choice(bucket)) for bucket in np.array_split(np.arange(num_layers), buckets))


def ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f}"


def percentiles(values: list[float]) -> str:
    return f"{ms(np.percentile(values, 50))} / {ms(np.percentile(values, 95))}"


def stage_latency(retriever: RerankedRetriever, examples) -> dict[str, list[float]]:
    """Time the parts of a reranked query, as :meth:`RerankedRetriever.search` runs them when the dense first stage
    and the reranker share the encoder: query encoding (one pass), FAISS search, rerank of the top-n."""
    times: dict[str, list[float]] = {"encode": [], "search": [], "rerank": []}
    for example in examples:
        t0 = time.perf_counter()
        states = retriever.reranker.encoder.states([example.question])
        t1 = time.perf_counter()
        first = retriever.first_stage.search_vectors(states.pooled, retriever.n)[0]
        t2 = time.perf_counter()
        retriever.reranker.rerank(example.question, first, 5, query_tokens=states.tokens[0])
        t3 = time.perf_counter()
        for key, value in zip(times, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            times[key].append(value)
    return times


def build_throughput(corpus, encoder: Encoder, work: Path, token_layers, sample: int) -> tuple[DenseRetriever, dict]:
    texts = corpus.texts()
    subset = random.Random(0).sample(texts, sample) if 0 < sample < len(texts) else texts
    encoder.encode(subset[:2])  # load the model outside the timings
    start = time.perf_counter()
    encoder.encode(subset)
    raw = len(subset) / (time.perf_counter() - start)
    shutil.rmtree(work, ignore_errors=True)  # time a build from scratch, not a resumed one
    start = time.perf_counter()
    dense = DenseRetriever.build(corpus, encoder=encoder, work_dir=work, token_layers=token_layers)
    built = len(corpus) / (time.perf_counter() - start)
    return dense, {"raw": raw, "build": built}


def scale_rows(count: int, dim: int = 768, queries: int = 200) -> list[list[str]]:
    """IVF and HNSW against exact search on clustered synthetic vectors (a stand-in for a large corpus)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(max(count // 100, 1), dim)).astype(np.float32)
    vectors = centers[rng.integers(0, len(centers), count)] + 0.5 * rng.normal(size=(count, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    probe = vectors[rng.choice(count, queries, replace=False)] + 0.1 * rng.normal(size=(queries, dim)).astype(
        np.float32)
    probe /= np.linalg.norm(probe, axis=1, keepdims=True)
    rows, truth = [], None
    for kind in ("flat", "ivf", "hnsw"):
        start = time.perf_counter()
        index = FaissIndex.build(vectors, {}, kind=kind)
        build_s = time.perf_counter() - start
        latency, found = [], []
        for query in probe:
            start = time.perf_counter()
            found.append(index.search(query[None], 10)[1][0])
            latency.append(time.perf_counter() - start)
        truth = truth if truth is not None else found
        recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, found, strict=True)])
        rows.append([kind, f"{build_s:.1f}", f"{100 * recall:.1f}", percentiles(latency)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="musique", help="any question file load_dataset reads, or a dataset name "
                                                          "(its dev file in MULTIHOP_DATA; default: musique)")
    parser.add_argument("--limit", type=int, default=None, help="questions to use (all by default)")
    parser.add_argument("--finetuned", default=None, help="a fine-tuned encoder folder to compare")
    parser.add_argument("--n", type=int, default=20, help="first-stage passages reranked")
    parser.add_argument("--sample", type=int, default=0, help="passages for the raw encoder throughput (0: all)")
    parser.add_argument("--scale", type=int, default=100_000, help="synthetic vectors for the index comparison")
    args = parser.parse_args()

    examples, corpus = questions_with_corpus(args.data, limit=args.limit)
    console.print(f"{len(examples)} questions, {len(corpus)} passages ({corpus.merged_duplicates} duplicates merged)")
    work = home() / "benchmarks" / corpus.checksum()[:16]  # encoding shards: a rerun resumes
    eq3 = RaLa("eq3")
    mpnet = Encoder("mpnet")
    dense, throughput = build_throughput(corpus, mpnet, work / "mpnet", eq3.token_layers(mpnet.num_layers),
                                         args.sample)
    bm25 = BM25Retriever(corpus)
    minilm = DenseRetriever.build(corpus, encoder="minilm", work_dir=work / "minilm")
    cls = DenseRetriever.build(corpus, encoder=Encoder("mpnet", pooling="cls"), work_dir=work / "mpnet-cls",
                               token_layers=())
    systems = [
        ("BM25", bm25),
        ("Hybrid (MPNet + BM25, RRF)", HybridRetriever(dense, bm25)),
        ("Dense MiniLM", minilm),
        ("Dense MPNet (mean pooling)", dense),
        ("Dense MPNet [CLS] (Eq. 2)", cls),
        ("MPNet + MaxSim rerank", RerankedRetriever(dense, MaxSim(), n=args.n)),
        ("MPNet + RaLa Eq. 4", RerankedRetriever(dense, RaLa("eq4"), n=args.n)),
        ("MPNet [CLS] + RaLa Eq. 4", RerankedRetriever(cls, RaLa("eq4"), n=args.n)),
        ("MPNet + RaLa Eq. 3", RerankedRetriever(dense, eq3, n=args.n)),
    ]
    seeds = range(4)
    variants = [("MPNet + RaLa Eq. 4, ω floored, layers 1..L−1 (seeds 0–3)", RaLa),
                ("MPNet + RaLa Eq. 4, bare ω product at inference (seeds 0–3)",
                 lambda **kw: RaLa(omega_floor=None, **kw)),
                ("MPNet + RaLa Eq. 4, layers 0..L−1 (seeds 0–3)", RaLaFromEmbeddings)]
    if args.finetuned:
        tuned = DenseRetriever.build(corpus, encoder=args.finetuned, work_dir=work / Path(args.finetuned).name,
                                     token_layers=())
        base = json.loads((Path(args.finetuned) / FINETUNED_STAMP).read_text())["config"]["encoder"]
        tuned_cls = DenseRetriever.build(corpus, encoder=Encoder(args.finetuned, pooling="cls"),
                                         work_dir=work / f"{Path(args.finetuned).name}-cls", token_layers=())
        systems += [(f"Fine-tuned {base}", tuned),
                    (f"Fine-tuned {base} + RaLa Eq. 4", RerankedRetriever(tuned, RaLa("eq4"), n=args.n)),
                    (f"Fine-tuned {base} [CLS] + RaLa Eq. 4", RerankedRetriever(tuned_cls, RaLa("eq4"), n=args.n))]

    name = question_file(args.data).name
    table = Table(title=f"Ranking on {name} ({len(examples)} questions, {len(corpus)} passages, top 10)")
    for column in ("retriever", "R@2", "R@5", "nDCG@10", "MRR", "p50 ms/query"):
        table.add_column(column, justify="left" if column == "retriever" else "right")
    for name, retriever in systems:
        table.add_row(*recall_row(name, retriever, examples))
    for name, make in variants:
        reranked = [RerankedRetriever(dense, make(scoring="eq4", seed=seed), n=args.n) for seed in seeds]
        table.add_row(*mean_row(name, reranked, examples))
    console.print(table)

    cached = stage_latency(RerankedRetriever(dense, RaLa("eq4"), n=args.n), examples)
    recomputed = stage_latency(RerankedRetriever(dense, RaLa("eq4", cache=False), n=args.n), examples[:5])
    speed = Table(title="MPNet speed")
    speed.add_column("measure")
    speed.add_column("value", justify="right")
    speed.add_row("raw encoder throughput (passages/s)", f"{throughput['raw']:.2f}")
    speed.add_row("index build throughput, token cache included (passages/s)", f"{throughput['build']:.2f}")
    speed.add_row("build / raw", f"{throughput['build'] / throughput['raw']:.2f}")
    speed.add_row("truncated passages (> 512 tokens)", str(mpnet.truncated))
    speed.add_row("query encoding p50 / p95 (ms)", percentiles(cached["encode"]))
    speed.add_row("first-stage search p50 / p95 (ms)", percentiles(cached["search"]))
    speed.add_row(f"RaLa Eq. 4 rerank of top-{args.n}, cached states p50 / p95 (ms)", percentiles(cached["rerank"]))
    speed.add_row(f"RaLa Eq. 4 rerank of top-{args.n}, recomputed (5 queries) p50 / p95 (ms)",
                  percentiles(recomputed["rerank"]))
    console.print(speed)

    if args.scale:
        scale = Table(title=f"Index kinds on {args.scale} synthetic 768-d vectors (200 queries, top-10)")
        for column in ("kind", "build s", "recall@10 vs flat", "search p50 / p95 ms"):
            scale.add_column(column, justify="left" if column == "kind" else "right")
        for row in scale_rows(args.scale):
            scale.add_row(*row)
        console.print(scale)


if __name__ == "__main__":
    main()
