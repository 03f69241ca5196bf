"""Full-corpus benchmark: FAISS at a million vectors, token-state forms, encoding throughput.

    python benchmarks/scale.py faiss [--count 1000000] [--index "IVF1024,PQ64" ...]
    python benchmarks/scale.py tokens [--data musique] [--limit 100]
    python benchmarks/scale.py encoding [--limit 20] [--batch-sizes 8,16,32]
    python benchmarks/scale.py ray [--limit 10] [--workers 2]
    python benchmarks/scale.py project --tokens-json T --faiss-json F --encoding-json E [--ray-json R --gpu-rate P]

``faiss``: ``--count`` synthetic 768-d vectors drawn around real MPNet centroids (k-means of the MPNet embeddings of
the MuSiQue dev passages, each vector a centroid plus Gaussian noise of the clusters' own spread, normalised), one
index per factory string: build seconds, the index's bytes, search latency p50/p99 of single queries on the cores
there are, recall@10 against exact search.

``tokens``: ``--token-states`` forms (default :data:`TOKEN_FORMS`; ``FORM/CLS`` keeps the ``[CLS]`` states in
``CLS``; a ``plaid:BITS:DIM:trained`` form's projection is trained with ``--seed`` on MuSiQue train questions first,
:func:`~multihop.retrievers.plaid_projection.trained_projection`, and cached) on the IRCoT corpus of the ``--limit``
first dev questions (the largest real corpus we have), MPNet,
keeping the ``[CLS]`` layers of RaLa's default draw (as ``index build --rerank rala-eq4`` does), every form written
from one float32 encoding kept under ``MULTIHOP_HOME/shards``: bytes a token (the last layer's, and all stored
files' with the ``[CLS]`` share) and a passage, the trained state, the decode time a token, R@2/R@5 of the dense
top-20 reranked to the top-5 by RaLa Eq. 4 and by MaxSim against ``full``, the rerank latency p50/p99 (``none``
encodes the 20 candidates a query), and the size and decode time a query at 5M passages of 120 tokens.

``encoding``: passages a second of the MPNet encoding pass an index build runs, by batch size (length-sorted
batches, as sentence-transformers sorts them).

``ray``: the same encoding (the passages of the ``--limit`` first dev questions, token states kept) in one process and
on ``--workers`` actors of a local Ray cluster on this machine's cores: seconds, the ratio, whether the vectors are
bit-equal and how far the token states are.

``project``: disk, RAM and encoding hours of MuSiQue's, 2Wiki's and HotpotQA's full corpora from the other parts'
measured rows (:func:`projection_rows`).

Each part prints a table and, with ``--json FILE``, writes its rows. Timings are of this machine and its load, which
the table's title states.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

console = Console(width=160)


def load_note() -> str:
    return f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"


def percentile_ms(values: list[float], q: float) -> float:
    return 1000 * float(np.percentile(values, q))


def synthetic_vectors(count: int, seed: int = 0, centroids: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """``count`` normalised vectors around k-means centroids of real MPNet passage embeddings, and 200 queries drawn
    the same way."""
    import faiss

    from multihop.data.question_sets import question_file
    from multihop.experiments.program_indexes import program_retriever

    dense, _ = program_retriever("SingleStepRAG", question_file("musique", "dev"), "mpnet")  # `compare`'s cached index
    real = dense.index.index.reconstruct_n(0, len(dense.corpus))
    kmeans = faiss.Kmeans(real.shape[1], min(centroids, len(real) // 8), niter=20, seed=seed, spherical=True)
    kmeans.train(real)
    _, assigned = kmeans.index.search(real, 1)
    spread = float(np.sqrt(np.mean((real - kmeans.centroids[assigned[:, 0]]) ** 2)))
    rng = np.random.default_rng(seed)

    def draw(n: int) -> np.ndarray:
        out = np.empty((n, real.shape[1]), dtype=np.float32)
        for start in range(0, n, 100_000):
            stop = min(n, start + 100_000)
            picks = rng.integers(0, len(kmeans.centroids), stop - start)
            block = kmeans.centroids[picks] + spread * rng.standard_normal((stop - start, real.shape[1]),
                                                                           dtype=np.float32)
            out[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
        return out

    return draw(count), draw(200)


def faiss_rows(args) -> list[dict]:
    import faiss

    from multihop.retrievers import FaissIndex

    vectors, queries = synthetic_vectors(args.count)
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(vectors)
    _, truth = exact.search(queries, 10)
    del exact
    rows = []
    for kind in args.index:
        start = time.perf_counter()
        index = FaissIndex.build(vectors, {}, kind=kind)
        build = time.perf_counter() - start
        for name, value in args.search.get(kind, {}).items():
            index.set_search(**{name: value})
        latency, found = [], []
        for query in queries:
            t0 = time.perf_counter()
            found.append(index.search(query[None], 10)[1][0])
            latency.append(time.perf_counter() - t0)
        recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, found, strict=True)]))
        rows.append({"index": kind, "search": index.search_params(), "build_s": round(build, 1),
                     "bytes": int(faiss.serialize_index(index.index).nbytes), "p50_ms": percentile_ms(latency, 50),
                     "p99_ms": percentile_ms(latency, 99), "recall@10": recall})
        console.print(rows[-1])
        del index
    return rows


def token_encoding(args):
    """The questions with gold passages, the corpus, MPNet and the corpus's float32 encoding (last-layer tokens and
    every ``[CLS]`` layer), kept under ``MULTIHOP_HOME/shards`` so that every run after the first encodes nothing."""
    from multihop.data.loaders import questions_with_corpus
    from multihop.data.paths import home
    from multihop.retrievers import Encoder
    from multihop.retrievers.index import encode_corpus

    examples, corpus = questions_with_corpus(args.data, "dev", limit=args.limit)
    examples = [example for example in examples if example.gold_passage_ids]
    encoder = Encoder("mpnet")
    start = time.perf_counter()
    shards = home() / "shards" / f"scale-tokens-{corpus.checksum()[:16]}"
    encoded = encode_corpus(corpus, encoder, shards, token_layers=(), token_dtype="float32")
    console.print(f"encoding of {len(corpus)} passages ready in {time.perf_counter() - start:.0f} s ({load_note()})")
    return examples, corpus, encoder, encoded


TOKEN_FORMS = ("full", "int8", "pq", "plaid:2:128", "plaid:4:128", "plaid:2:64", "plaid:4:64", "plaid:2:96")
PROJECTED_PASSAGES, PROJECTED_TOKENS = 5_000_000, 120  # the corpus the per-token figures are projected to
CANDIDATES = 20


def token_rows(args) -> list[dict]:
    """Each form of ``--forms`` (``FORM/CLS`` keeps the ``[CLS]`` states in the form ``CLS`` instead of the form's
    own) written from one encoding: bytes a token of the last layer's codes and of every stored file but the trained
    state (the ``[CLS]`` share included), the trained state's bytes and the write's seconds (training included), the
    decode time a token (the candidates' tokens and ``[CLS]`` states read in batches of 20 passages, as a rerank reads
    them), R@2/R@5 and rerank latency of RaLa Eq. 4 and MaxSim over the dense top 20, and the size and decode time
    of a query projected to 5M passages of 120 tokens."""
    from multihop.evaluation.metrics import recall_at_k
    from multihop.retrievers import DenseRetriever, MaxSim, RaLa, RerankedRetriever
    from multihop.retrievers.dense import IndexSpec
    from multihop.retrievers.plaid_codec import parse_plaid
    from multihop.retrievers.plaid_projection import trained_projection
    from multihop.retrievers.token_cache import META, TokenCache

    examples, corpus, encoder, encoded = token_encoding(args)
    queries = [encoder.states([example.question]) for example in examples]  # once, for every form
    work = Path(tempfile.mkdtemp(prefix="scale-tokens-"))
    rows = []
    kept = RaLa(encoder=encoder).cls_layers(encoder.num_layers)  # what `index build --rerank rala-eq4` keeps
    for label in args.forms or TOKEN_FORMS:
        form, _, cls_states = label.partition("/")
        spec = IndexSpec(token_layers=(), token_states=form, cls_layers=kept)
        folder = work / label.replace("/", "-").replace(":", "-")
        plaid = parse_plaid(form)
        projection = None
        if plaid is not None and plaid.projection == "trained":  # trained on train questions once, then cached
            start = time.perf_counter()
            projection = trained_projection(encoder, plaid.dim, seed=args.seed)
            console.print(f"trained projection to {plaid.dim} ready in {time.perf_counter() - start:.0f} s")
        start = time.perf_counter()
        tokens = None if form == "none" else TokenCache.write(
            folder, encoded.shards, encoded.num_layers, (), form=spec.token_states, cls_layers=kept,
            cls_states=cls_states or None, projection=projection)
        written = time.perf_counter() - start
        dense = DenseRetriever.from_encoding(corpus, encoder, encoded, spec, folder, tokens=tokens)
        row = {"form": label, "bytes/token": tokens.bytes_per_token() if tokens else 0}
        if tokens:
            files = [path for path in folder.iterdir() if path.name not in (META, "offsets.npy")]
            state = [path for path in files if path.suffix in (".npz", ".faiss")]
            codes = sum(path.stat().st_size for path in files if path not in state)
            cls_bytes = sum(path.stat().st_size for path in files if path.name.startswith("cls.") and path not in state)
            total = int(tokens.offsets[-1])
            start = time.perf_counter()
            for first in range(0, len(corpus), CANDIDATES):
                tokens.get(list(range(first, min(len(corpus), first + CANDIDATES))))
            decode = (time.perf_counter() - start) / total
            row.update({"bytes/token all": round(codes / total, 1), "cls B/passage": round(cls_bytes / len(corpus)),
                        "bytes/passage": round(sum(path.stat().st_size for path in folder.rglob("*")) / len(corpus)),
                        "state KB": round(sum(path.stat().st_size for path in state) / 1e3), "write s":
                        round(written, 1), "decode µs/token": round(1e6 * decode, 2),
                        "5M GB": round(PROJECTED_PASSAGES * (PROJECTED_TOKENS * row["bytes/token"] + cls_bytes /
                                                            len(corpus)) / 1e9, 1),
                        "5M decode ms/query": round(1e3 * decode * CANDIDATES * PROJECTED_TOKENS, 1)})
        else:
            row["bytes/passage"] = 0
        for name, reranker in (("rala-eq4", RaLa()), ("maxsim", MaxSim())):
            retriever = RerankedRetriever(dense, reranker, n=CANDIDATES, k=5)
            r2, r5, latency = [], [], []
            for example, states in zip(examples, queries, strict=True):
                first = dense.search_vectors(states.pooled, CANDIDATES)[0]
                t0 = time.perf_counter()
                hits = retriever.reranker.rerank(example.question, first, 5, query_tokens=states.tokens[0])
                latency.append(time.perf_counter() - t0)
                r2.append(recall_at_k(hits.ids, example.gold_passage_ids, 2))
                r5.append(recall_at_k(hits.ids, example.gold_passage_ids, 5))
            row.update({f"{name} R@2": 100 * float(np.mean(r2)), f"{name} R@5": 100 * float(np.mean(r5)),
                        f"{name} p50 ms": percentile_ms(latency, 50), f"{name} p99 ms": percentile_ms(latency, 99)})
        rows.append(row)
        console.print(row)
        shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return rows


def encoding_rows(args) -> list[dict]:
    from multihop.data.loaders import questions_with_corpus
    from multihop.retrievers import Encoder

    _, corpus = questions_with_corpus(args.data, "dev", limit=args.limit)
    texts = corpus.texts()
    rows = []
    for batch_size in args.batch_sizes:
        encoder = Encoder("mpnet", batch_size=batch_size)
        encoder.passage_states(texts[:2], ())  # the model loads outside the timing
        start = time.perf_counter()
        encoder.passage_states(texts, ())
        rows.append({"backend": f"torch {encoder.model.device} fp32", "batch": batch_size,
                     "passages/s": round(len(texts) / (time.perf_counter() - start), 2)})
        console.print(rows[-1])
    return rows


def ray_rows(args) -> list[dict]:
    """The same encoding in one process and on ``--workers`` Ray actors of a local cluster (this machine's cores):
    seconds, the ratio, and whether the vectors and token states are the same."""
    from multihop.data.loaders import questions_with_corpus
    from multihop.evaluation.ray_cluster import connect
    from multihop.retrievers import Encoder
    from multihop.retrievers.index import encode_corpus
    from multihop.retrievers.ray_encoding import ray_encode_corpus

    _, corpus = questions_with_corpus(args.data, "dev", limit=args.limit)
    work = Path(tempfile.mkdtemp(prefix="scale-ray-"))
    encoder = Encoder("mpnet")
    encoder.passage_states(corpus.texts()[:2], ())  # the model loads outside the timing
    start = time.perf_counter()
    connect("auto", num_cpus=os.cpu_count())
    started = time.perf_counter() - start
    timings, encodings = {}, {}
    for name, encode in (("single process", encode_corpus), ("ray", ray_encode_corpus)):
        options = {"workers": args.workers} if name == "ray" else {}
        start = time.perf_counter()
        encodings[name] = encode(corpus, encoder, work / name.replace(" ", "-"), shard_size=args.shard_size,
                                 token_layers=(), **options)
        timings[name] = time.perf_counter() - start
    same = all(np.array_equal(np.load(a)["pooled_mean"], np.load(b)["pooled_mean"]) for a, b in
               zip(encodings["single process"].shards, encodings["ray"].shards, strict=True))
    close = max(float(np.abs(np.load(a)["tokens"].astype(np.float32) - np.load(b)["tokens"]).max()) for a, b in
                zip(encodings["single process"].shards, encodings["ray"].shards, strict=True))
    shutil.rmtree(work, ignore_errors=True)
    return [{"run": name, "passages": len(corpus), "seconds": round(seconds, 1),
             "× single": round(seconds / timings["single process"], 2), "vectors bit-equal": same,
             "max token diff": close, "ray start s": round(started, 1)} for name, seconds in timings.items()]


CORPORA = {"MuSiQue (IRCoT)": ("musique", 139_416), "2Wiki (IRCoT)": ("2wiki", 430_225),
           "HotpotQA (abstracts)": ("hotpotqa", 5_233_329)}


def projection_rows(args) -> list[dict]:
    """Disk, RAM and encoding hours of the papers' corpora, from the rates the other parts measured (their ``--json``
    files) and the mean MPNet tokens of a passage of each dataset's dev corpus here. GPU hours need a GPU's measured
    passages a second (``--gpu-rate``, from ``scale.py encoding`` run on one); N GPUs divide them by N at the Ray
    efficiency measured on the CPUs (``--ray-json``)."""
    from multihop.data.loaders import questions_with_corpus
    from multihop.retrievers import Encoder

    tokens = json.loads(args.tokens_json.read_text())["rows"]
    faiss_rows = json.loads(args.faiss_json.read_text())["rows"] if args.faiss_json else []
    cpu_rate = max(row["passages/s"] for row in json.loads(args.encoding_json.read_text())["rows"])
    ray = json.loads(args.ray_json.read_text())["rows"] if args.ray_json else []
    efficiency = 1 / ray[-1]["× single"] if ray else 1.0  # the work of 2 actors against one process on 2 cores
    tokenizer = Encoder("mpnet").model.tokenizer
    def mean_tokens(dataset: str) -> float:
        _, corpus = questions_with_corpus(dataset, "dev")
        return float(np.mean([len(ids) for ids in tokenizer(corpus.texts(), truncation=True, max_length=512)[
            "input_ids"]]))

    per_token = {row["form"]: row["bytes/token"] for row in tokens}
    measured = mean_tokens(args.data)  # the token rows' corpus: what a passage costs besides its tokens
    cls_bytes = {row["form"]: row["bytes/passage"] - row["bytes/token"] * measured for row in tokens}
    rows = []
    for name, (dataset, passages) in CORPORA.items():
        tokens_a_passage = mean_tokens(dataset)
        row = {"corpus": name, "passages": passages, "tokens/passage": round(tokens_a_passage, 1)}
        for form in ("fp16", "int8", "pq"):
            size = passages * (tokens_a_passage * per_token[form] + max(0.0, cls_bytes[form]))
            row[f"{form} GB"] = round(size / 1e9, 1)
        for factory in faiss_rows:
            row[f"{factory['index']} RAM GB"] = round(factory["bytes"] / args.faiss_count * passages / 1e9, 2)
        row["CPU h (2 cores)"] = round(passages / cpu_rate / 3600, 1)
        if args.gpu_rate:
            row["1 GPU h"] = round(passages / args.gpu_rate / 3600, 2)
            row[f"{args.gpus} GPUs h"] = round(passages / (args.gpu_rate * args.gpus * efficiency) / 3600, 2)
        rows.append(row)
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    table = Table(*rows[0].keys(), title=f"{title} ({load_note()})")
    for row in rows:
        table.add_row(*(f"{value:.1f}" if isinstance(value, float) else str(value) for value in row.values()))
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=("faiss", "tokens", "encoding", "ray", "project"))
    parser.add_argument("--count", type=int, default=1_000_000, help="synthetic vectors (faiss)")
    parser.add_argument("--index", nargs="+", default=["IVF1024,Flat", "IVF1024,SQ8", "IVF1024,PQ64",
                                                       "IVF1024,PQ64,Refine(SQ8)"],
                        help="factory strings (faiss)")
    parser.add_argument("--nprobe", type=int, default=32, help="nprobe of the IVF indexes (faiss)")
    parser.add_argument("--k-factor", type=int, default=16, help="candidates a refined index re-scores, × k (faiss)")
    parser.add_argument("--data", default="musique", help="dataset of the real corpus (tokens, encoding)")
    parser.add_argument("--limit", type=int, default=100, help="dev questions whose passages form the corpus")
    parser.add_argument("--batch-sizes", default="8,16,32", help="encoding batch sizes (encoding)")
    parser.add_argument("--forms", type=lambda text: text.split(","), help="token-state forms, e.g. "
                        "int8,pq,plaid:4:64,plaid:2:128/int8 (tokens; default: TOKEN_FORMS)")
    parser.add_argument("--seed", type=int, default=0, help="seed of a plaid:…:trained form's projection (tokens)")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors (ray)")
    parser.add_argument("--shard-size", type=int, default=64, help="passages a shard (ray)")
    for part in ("tokens", "faiss", "encoding", "ray"):
        parser.add_argument(f"--{part}-json", type=Path, help=f"the {part} part's rows (project)")
    parser.add_argument("--faiss-count", type=int, default=1_000_000, help="vectors the faiss rows indexed (project)")
    parser.add_argument("--gpu-rate", type=float, help="passages a second one GPU encodes, measured there (project)")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs of the N-GPU column (project)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    args.batch_sizes = [int(size) for size in args.batch_sizes.split(",")]
    args.search = {kind: {**({"nprobe": args.nprobe} if "IVF" in kind else {}),
                          **({"k_factor_rf": args.k_factor} if "Refine" in kind or "RFlat" in kind else {})}
                   for kind in args.index}
    parts = {"faiss": faiss_rows, "tokens": token_rows, "encoding": encoding_rows, "ray": ray_rows,
             "project": projection_rows}
    rows = parts[args.part](args)
    print_table(args.part, rows)
    if args.json:
        args.json.write_text(json.dumps({"part": args.part, "load": load_note(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
