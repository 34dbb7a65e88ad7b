"""The language model as an estimator of its own: a clone trains apart from it; its first member shares it;
texts longer than it reads are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nasrlm.data import Objective
from nasrlm.errors import NasrlmError
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.recipes import TrainConfig

TINY = {"d_model": 32, "num_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}
ACC = Objective("acc", "%", "accuracy", "test", True)
ONE_EPOCH = TrainConfig(max_epochs=1, validation_fraction=0.0, progress=False)


def test_a_clone_trains_apart_and_leaves_the_model_it_was_cloned_from_as_it_was(corpus) -> None:
    tokenizer, texts, values = corpus
    lm = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, **TINY).lm
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    twin = lm.clone()
    assert twin.tokenizer is lm.tokenizer and twin.model is not lm.model
    twin.fit(texts, values[:, :1], ("acc",), ONE_EPOCH)
    assert "acc" in twin.normalizers and "acc" not in lm.normalizers and lm.decode_order == ()
    assert all(torch.equal(v, before[k]) for k, v in lm.model.state_dict().items())
    assert any(not torch.equal(v, before[k]) for k, v in twin.model.state_dict().items())


def test_the_first_member_shares_the_weights_and_samples_what_the_model_alone_does(corpus) -> None:
    tokenizer, texts, values = corpus
    lm = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, **TINY).lm
    lm.fit(texts, values[:, :1], ("acc",), ONE_EPOCH)
    first = lm.first_member()
    assert first.model is lm.model and first.members == [] and first.decode_order == ("acc",)
    np.testing.assert_array_equal(first.sample(texts[:4], ("acc",), num_samples=6, seed=2),
                                  lm.sample(texts[:4], ("acc",), num_samples=6, seed=2))


def test_a_text_longer_than_the_model_reads_is_a_one_line_error(corpus) -> None:
    tokenizer, texts, _ = corpus
    lm = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, max_input_tokens=8, **TINY).lm
    with pytest.raises(NasrlmError, match=r"48 text\(s\) exceed max_input_tokens=8 \(longest \d+ tokens\)"):
        lm.encode_texts(texts)
    with pytest.raises(ValueError):  # what callers caught before
        lm.encode_texts(texts[:1])
