"""``multihop cirag``: CIRAG's offline triple cache (§4.3), extracted once for a corpus and given to the program with
``--set triple_cache=DIR``."""

from __future__ import annotations

from pathlib import Path

import typer

from multihop.lm.options import LMOptions, lm_options
from multihop.runtime.console import console

app = typer.Typer(help="CIRAG's offline triple cache (§4.3).", no_args_is_help=True)


@app.command("extract")
@lm_options(help="the extracting LM (local:smollm2 by default)")
def cirag_extract(
    lm: LMOptions,
    corpus: str = typer.Argument(..., help="a corpus file or a question file (its paragraphs form the corpus)"),
    out: Path = typer.Option(..., help="the cache folder (a rerun resumes it)"),
    shard_size: int = typer.Option(5000, min=1, help="passages per JSON-lines shard"),
    questions: int = typer.Option(None, min=1, help="a question file: the paragraphs of its first N questions only "
                                  "(e.g. the train questions whose gold integration rows read the cache)"),
    threads: int = typer.Option(1, min=1, help="passages extracted at once (for a served LM; the cache is the same)"),
):
    """Extract every passage's named entities and triples once (Figs. 9–10) into a resumable, sharded cache that
    `--set triple_cache=DIR` gives CIRAG; passages whose extraction failed are kept as failed rows and extracted
    again by a rerun."""
    from multihop.data.loaders import build_corpus, load_corpus, load_dataset
    from multihop.programs import CIRAG
    from multihop.programs.cirag.cache import CacheMismatchError, build_cache

    passages = build_corpus(load_dataset(corpus, limit=questions), corpus) if questions else load_corpus(corpus)
    configured = lm.configure()
    try:
        done, failed = build_cache(passages, out, CIRAG().extract, shard_size=shard_size,
                                   extractor=str(configured.model), threads=threads)
    except CacheMismatchError as exc:
        raise typer.BadParameter(str(exc), param_hint="--out") from exc
    console.print(f"extracted {done} passages ({failed} failed: a rerun retries them; {len(passages) - done} were "
                  f"cached already) → {out}")
