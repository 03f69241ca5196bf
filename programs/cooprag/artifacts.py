"""The encoders CoopRAG's tables need (:class:`~..papers.Artifact`): MPNet fine-tuned on a dataset's train questions
with RaLa's loss (§3.6, App. A) under the switches of each training ablation (Tables 5, 17, 19, 20, 23), made by
``multihop cooprag train`` or by ``multihop reproduce --build`` through :func:`encoder_artifact`'s builder, which
runs the same training (:func:`.training.fine_tune`) on the first N train questions."""

from __future__ import annotations

from pathlib import Path

from ..papers import Artifact
from .program import CoopRAG

# each switch of `multihop cooprag train`, as the TrainConfig / training_questions setting it sets
SWITCHES = {"--no-alpha": ("alpha", False), "--no-omega": ("omega", False), "--score eq3": ("score", "eq3"),
            "--loss bce": ("loss", "bce"), "--alpha-from chain": ("alpha_from", "chain"),
            **{f"--buckets {size}": ("buckets", size) for size in (2, 4, 6, 12)}}


def encoder_artifact(*switches: str) -> Artifact:
    """The MPNet encoder fine-tuned on a dataset's train questions with ``switches`` of ``multihop cooprag train``
    (none: the paper's own training, App. A), named after them (``encoder``, ``encoder-no-alpha``)."""
    unknown = [switch for switch in switches if switch not in SWITCHES]
    if unknown:
        raise ValueError(f"no training switch {unknown}; known: {', '.join(SWITCHES)}")
    name = "-".join(("encoder", *(switch.lstrip("-").replace(" ", "-") for switch in switches)))
    command = " ".join(("multihop cooprag unroll DATA --out U.jsonl, then multihop cooprag train DATA --unrolled "
                        "U.jsonl --markers CoopRAG --recipe paper", *switches, "--out DIR"))
    return Artifact(name, "encoder", command, per_dataset=True, switches=tuple(switches),
                    build=lambda folder, **run: train_encoder(folder, switches, **run))


def train_encoder(folder: Path, switches: tuple[str, ...], dataset: str, limit: int | None, encoder: str = "mpnet",
                  progress: bool = True, **_run) -> Path:
    """Fine-tune ``encoder`` into ``folder`` on the first ``limit`` train questions of ``dataset`` with ``switches``
    (the paper's recipe otherwise): the questions are first unrolled by the LM DSPy is configured with (shared by
    every encoder of the dataset, beside ``folder``: α counts their sub-questions or chain steps, Eq. 6), then trained
    on in batches of 40 (fewer when fewer questions are asked for). Resumable: the unrolling file and the training
    checkpoints, as ``multihop cooprag unroll`` and ``multihop cooprag train``."""
    from multihop.data.loaders import load_dataset
    from multihop.data.question_sets import question_file
    from multihop.retrievers.finetune import TrainConfig

    from .training import fine_tune, training_questions, unroll_questions

    settings = dict(SWITCHES[switch] for switch in switches)
    alpha_from = settings.pop("alpha_from", "sub_questions")
    examples = load_dataset(question_file(dataset, "train"), limit=limit)
    unrolled = unroll_questions(CoopRAG(rerank=None), examples, Path(folder).parent / "unrolled.jsonl",
                                progress=progress)  # as `multihop cooprag unroll` builds it: the same file serves both
    questions = training_questions(examples, unrolled, alpha_from=alpha_from)
    config = TrainConfig.for_recipe("paper", encoder=encoder, special_tokens=CoopRAG.special_tokens,
                                    batch_size=min(40, len(questions)), **settings)
    return fine_tune(questions, folder, config)


ENCODER = encoder_artifact()
