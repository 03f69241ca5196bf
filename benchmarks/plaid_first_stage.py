"""The PLAID first stage against an exhaustive MaxSim over the same decoded token states (Santhanam et al., 2022b, §4).

    python benchmarks/plaid_first_stage.py [--data musique] [--encoder minilm] [--token-states plaid:2] [--k 10]

The corpus is the union of the questions' paragraphs and the raw question is the query. One PLAID index is built
(:class:`multihop.retrievers.plaid.PlaidRetriever`, its settings PLAID's defaults for ``--k``); each question's top
``k`` is compared with the exhaustive MaxSim top ``k`` over every passage's decoded projected states (the overlap of the
two), both timed a query, and both scored by R@2/5/10 against the gold passages (the questions that have them).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import multihop
from multihop.retrievers.plaid import PlaidRetriever, exhaustive_maxsim


def recall(rankings: list[list[str]], gold: list[set[str]], k: int) -> float:
    """Mean share of each question's gold passages in its top ``k`` (the questions with gold passages)."""
    return float(np.mean([len(set(ids[:k]) & g) / len(g) for ids, g in zip(rankings, gold, strict=True) if g]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="musique")
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--token-states", default="plaid:2")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    examples = multihop.load_dataset(args.data, split="dev")
    corpus = multihop.build_corpus(examples)
    started = time.perf_counter()
    plaid = PlaidRetriever.build(corpus, args.encoder, k=args.k, token_states=args.token_states, progress=False)
    print(f"{len(corpus)} passages, {int(plaid.tokens.offsets[-1])} tokens, {len(plaid.lists)} centroids, form "
          f"{plaid.tokens.form} ({plaid.tokens.bytes_per_token()} bytes a token), built in "
          f"{time.perf_counter() - started:.1f} s; settings {plaid.settings.for_k(args.k).record()}")
    tokens = plaid.encoder.states([example.question for example in examples]).tokens
    started = time.perf_counter()
    hits = plaid.search_tokens(tokens, args.k)
    plaid_ms = 1000 * (time.perf_counter() - started) / len(tokens)
    started = time.perf_counter()
    exact = [[corpus[int(row)].id for row in exhaustive_maxsim(plaid.codec.project(query), plaid.tokens, args.k)[0]]
             for query in tokens]
    exact_ms = 1000 * (time.perf_counter() - started) / len(tokens)
    overlap = np.mean([len(set(found.ids) & set(ids)) / args.k for found, ids in zip(hits, exact, strict=True)])
    gold = [set(example.get("gold_passage_ids") or []) for example in examples]
    print(f"top-{args.k} overlap with exhaustive MaxSim {overlap:.3f}; {plaid_ms:.1f} ms a query (exhaustive "
          f"{exact_ms:.1f} ms)")
    for name, rankings in (("PLAID", [found.ids for found in hits]), ("exhaustive", exact)):
        print(f"{name}: R@2 {recall(rankings, gold, 2):.3f} R@5 {recall(rankings, gold, 5):.3f} "
              f"R@10 {recall(rankings, gold, 10):.3f}")


if __name__ == "__main__":
    main()
