"""The base class of the retrievers: a ``dspy.Module`` that copies share instead of duplicating."""

from __future__ import annotations

import dspy


class RetrieverModule(dspy.Module):
    """A retriever is a read-only resource (an encoder, an index, a corpus) with no predictors to optimize. DSPy's
    optimizers deep-copy the program for every candidate they try; a copy of a program therefore shares its retriever
    rather than duplicating the encoder's weights and the index in memory once per candidate."""

    def __deepcopy__(self, memo: dict) -> RetrieverModule:
        return self
