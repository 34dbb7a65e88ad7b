"""Shared fixtures of the language model's tests."""

from __future__ import annotations

import numpy as np
import pytest

from nasrlm.rlm.tokenizers import OnnxTokenizer
from search_spaces import NasBench201


@pytest.fixture(scope="module")
def corpus() -> tuple[OnnxTokenizer, list[str], np.ndarray]:
    """48 NB201 cells: a tokenizer trained on their texts, the texts, and two learnable toy targets
    (an accuracy and a latency over decades, both from the count of convolutions)."""
    space = NasBench201()
    ids = space.sample_ids(48, seed=1)
    texts = [space.to_text(space.parse(i)) for i in ids]
    convs = np.array([sum(op.startswith("nor_conv") for op in space.parse(i).ops) for i in ids], float)
    values = np.stack([80 + 2 * convs, 1 + convs**2], axis=1)  # a learnable toy target
    return OnnxTokenizer.train(texts), texts, values
