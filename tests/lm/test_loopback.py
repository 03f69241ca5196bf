"""The loopback server's ``/embeddings``: DSPy's ``Embedder`` over a hosted model name, pointed at it, gets a unit
vector a text, the same for the same words, as floats or as the OpenAI client's base64."""

import base64
import struct

import dspy
import httpx
import numpy as np

from multihop.lm.loopback import EMBEDDING_DIMENSIONS, loopback_server, text_embedding


def test_dspy_embedder_gets_a_unit_vector_a_text_the_same_for_the_same_words():
    with loopback_server(latency=0.0, lifetime=60) as server:
        embedder = dspy.Embedder("openai/text-embedding-3-small", api_base=server.api_base, api_key="x", caching=False)
        vectors = embedder(["Microsoft makes the Xbox.", "the xbox makes microsoft", "Paris"])
        assert server.requests[-1]["input"][2] == "Paris"
    assert vectors.shape == (3, EMBEDDING_DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0) and np.allclose(vectors[0], vectors[1])
    assert vectors[0] @ vectors[2] < 0.99


def test_base64_embeddings_are_the_float32_vectors_and_a_text_without_words_has_one():
    with loopback_server(latency=0.0, lifetime=60) as server:
        reply = httpx.post(f"{server.api_base}/embeddings", json={"model": "m", "input": "Paris",
                                                                  "encoding_format": "base64"}).json()
    (row,) = reply["data"]
    packed = base64.b64decode(row["embedding"])
    assert np.allclose(struct.unpack(f"<{EMBEDDING_DIMENSIONS}f", packed), text_embedding("Paris"), atol=1e-6)
    assert text_embedding("  ?! ") == [1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1)
