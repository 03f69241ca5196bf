"""Encoder backend benchmark (issue 15): MPNet on PyTorch against ONNX Runtime (fp32 and dynamic int8), in one run.

    pip install onnxruntime onnx   # not project dependencies: measured here, offered only if worth it
    python benchmarks/encoder_backends.py [--dataset musique] [--limit 20] [--batch-size 8]

sentence-transformers' own ONNX backend needs ``optimum-onnx``, whose releases pin ``transformers<5`` (this project
runs 5.x), so the encoder's transformer is exported here with ``torch.onnx.export`` — every layer's hidden states
among its outputs, as RaLa's token states need — and run by ONNX Runtime on the physical cores; int8 is ONNX
Runtime's dynamic quantisation of that export. Reported per backend on the passages of the first ``--limit`` dev
questions: passages/s, the largest difference from PyTorch's pooled embedding and last-layer token states (cosine),
and Recall@2 of a dense search over those passages (the RaLa re-ranking reads the same token states, so their
agreement bounds its change).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from multihop.data.loaders import questions_with_corpus
from multihop.evaluation.metrics import recall_at_k
from multihop.lm.engines.llamacpp import physical_cores
from multihop.retrievers.encoder import Encoder

console = Console(width=150)


class Exported(torch.nn.Module):
    """The encoder's transformer with every layer's hidden states as outputs."""

    def __init__(self, transformer):
        super().__init__()
        self.transformer = transformer

    def forward(self, input_ids, attention_mask):
        out = self.transformer(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return tuple(out.hidden_states)


def export(encoder: Encoder, folder: Path) -> tuple[Path, Path]:
    """The fp32 ONNX export of the encoder's transformer and its dynamic int8 quantisation."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    features = encoder.model.preprocess(["an example passage", "a second, longer example passage to pad"])
    layers = encoder.num_layers + 1
    fp32, int8 = folder / "encoder.onnx", folder / "encoder-int8.onnx"
    torch.onnx.export(Exported(encoder.model[0].auto_model).eval(),
                      (features["input_ids"], features["attention_mask"]), str(fp32), dynamo=False,
                      input_names=["input_ids", "attention_mask"], output_names=[f"h{i}" for i in range(layers)],
                      dynamic_axes={"input_ids": {0: "b", 1: "t"}, "attention_mask": {0: "b", 1: "t"},
                                    **{f"h{i}": {0: "b", 1: "t"} for i in range(layers)}}, opset_version=17)
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    return fp32, int8


def torch_states(encoder: Encoder, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
    pooled, tokens = [], []
    with torch.inference_mode():
        for start in range(0, len(texts), encoder.batch_size):
            out = encoder.forward(texts[start:start + encoder.batch_size])
            pooled.append(out["pooled"].numpy())
            tokens += [t[m].numpy() for t, m in zip(out["tokens"], out["mask"], strict=True)]
    return np.concatenate(pooled), tokens


def onnx_states(encoder: Encoder, session, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
    pooled, tokens = [], []
    for start in range(0, len(texts), encoder.batch_size):
        features = encoder.model.preprocess(texts[start:start + encoder.batch_size])
        ids, mask = features["input_ids"].numpy(), features["attention_mask"].numpy()
        last = session.run(None, {"input_ids": ids, "attention_mask": mask})[-1]
        weights = mask[..., None].astype(np.float32)
        mean = (last * weights).sum(1) / weights.sum(1)  # MPNet's mean pooling
        pooled.append(mean / np.linalg.norm(mean, axis=-1, keepdims=True))
        normed = last / np.linalg.norm(last, axis=-1, keepdims=True)
        tokens += [t[m.astype(bool)] for t, m in zip(normed, mask, strict=True)]
    return np.concatenate(pooled), tokens


def recall_at_2(examples, corpus, pooled: np.ndarray, queries: np.ndarray) -> float:
    ids = [passage.id for passage in corpus]
    scores = queries @ pooled.T
    hits = [[ids[i] for i in np.argsort(-row)[:2]] for row in scores]
    return 100 * float(np.mean([recall_at_k(h, ex.gold_passage_ids, 2) for h, ex in zip(hits, examples, strict=True)]))


def main() -> None:
    import onnxruntime as ort

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="musique")
    parser.add_argument("--limit", type=int, default=20, help="dev questions whose paragraphs are encoded")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    examples, corpus = questions_with_corpus(args.dataset, limit=args.limit)
    texts = corpus.texts()
    questions = [ex.question for ex in examples]
    encoder = Encoder("mpnet", device="cpu", batch_size=args.batch_size)
    torch.set_num_threads(physical_cores())
    rows = {}
    start = time.perf_counter()
    reference, reference_tokens = torch_states(encoder, texts)
    seconds = time.perf_counter() - start
    query_vectors, _ = torch_states(encoder, questions)
    rows["pytorch fp32"] = (len(texts) / seconds, 0.0, 0.0, recall_at_2(examples, corpus, reference, query_vectors))
    options = ort.SessionOptions()
    options.intra_op_num_threads = physical_cores()
    with tempfile.TemporaryDirectory() as folder:
        for name, path in zip(("onnxruntime fp32", "onnxruntime int8"), export(encoder, Path(folder)), strict=True):
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            onnx_states(encoder, session, texts[:8])  # warm up
            start = time.perf_counter()
            pooled, tokens = onnx_states(encoder, session, texts)
            seconds = time.perf_counter() - start
            queries, _ = onnx_states(encoder, session, questions)
            pooled_gap = float(1 - (pooled * reference).sum(-1).min())
            token_gap = max(float(1 - (a * b).sum(-1).min()) for a, b in zip(tokens, reference_tokens, strict=True))
            rows[name] = (len(texts) / seconds, pooled_gap, token_gap, recall_at_2(examples, corpus, pooled, queries))
    table = Table(title=f"MPNet on {len(texts)} {args.dataset} passages of {len(examples)} dev questions "
                        f"(batch {args.batch_size}, {physical_cores()} cores)")
    for column in ("backend", "passages/s", "speed-up", "max 1-cos pooled", "max 1-cos token", "R@2"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    base = rows["pytorch fp32"][0]
    for name, (rate, pooled_gap, token_gap, recall) in rows.items():
        table.add_row(name, f"{rate:.1f}", f"{rate / base:.2f}×", f"{pooled_gap:.1e}", f"{token_gap:.1e}",
                      f"{recall:.1f}")
    console.print(table)


if __name__ == "__main__":
    main()
