"""The projection trained to keep MaxSim's scores for the ``plaid`` form (retrievers/plaid_projection.py)."""

import numpy as np
import pytest

from multihop.retrievers.plaid_codec import PlaidCodec, learn_projection
from multihop.retrievers.plaid_projection import TrainingSet, distillation_kl, train_projection


def unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def training_set(rng, questions: int = 4, paragraphs: int = 6, d: int = 80) -> TrainingSet:
    """Questions whose paragraphs lie ever farther from them, in a space whose largest-variance directions are
    noise the ranking does not read (what PCA keeps and distillation need not)."""
    loud = rng.normal(size=(6, d)) * 3.0
    queries, groups = [], []
    for _ in range(questions):
        query = rng.normal(size=(5, d))
        queries.append(unit(query))
        groups.append([unit(np.concatenate([query + spread * rng.normal(size=(5, d)), rng.normal(size=(4, d))])
                            + rng.normal(size=(9, 6)) @ loud).astype(np.float16)
                       for spread in np.linspace(0.3, 3.0, paragraphs)])
    return TrainingSet(queries, groups, "test")


@pytest.mark.slow  # torch's Adam imports torch._dynamo on its first construction: 7–9 s on 2 shared cores
def test_training_lowers_the_listwise_kl_from_the_pca_start_and_its_maps_feed_the_codec():
    rng = np.random.default_rng(0)
    training = training_set(rng)
    state = train_projection(training, dim=8, seed=0, epochs=3, learning_rate=1e-2)
    sample = np.concatenate([np.concatenate(group) for group in training.groups]).astype(np.float32)
    mean, components = learn_projection(unit(sample), 8)
    pca = {"mean": mean, "components": components, "scale": state["scale"]}
    assert state["components"].shape == state["back"].shape == (8, 80)
    assert distillation_kl(training, state) < distillation_kl(training, pca)
    kind = PlaidCodec(bits=2, dim=8, projection="trained")
    kind.train(unit(sample), tokens=len(sample), projection=state)
    assert kind.describe()["projection"] == {"kind": "trained", "from": 80, "to": 8}
    np.testing.assert_array_equal(kind.state()["back"], state["back"])
