"""An ensemble of decoders on one frozen encoder (``TrainConfig.members``): trained, sampled, saved."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nasrlm.rlm._held_out
import nasrlm.rlm._members
import nasrlm.rlm.predictor
from nasrlm.data import Objective
from nasrlm.rlm._members import own_weights, pooled, train_members, wearing
from nasrlm.rlm.checkpoints import MEMBERS_FILE, ModelFileError, ModelNotFoundError
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.recipes import ALONE_TUNE, DECODER_TUNE, TrainConfig
from nasrlm.rlm.training import FROZEN_WITH_THE_ENCODER, train

TINY = {"d_model": 32, "num_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.1}
ACC = Objective("acc", "%", "accuracy", "test", True)


def accuracy(corpus: tuple) -> tuple:
    """The shared corpus (conftest.py) with its accuracy column alone."""
    tokenizer, texts, values = corpus
    return tokenizer, texts, values[:, 0]


def config(**fields) -> TrainConfig:
    return TrainConfig(**{"max_epochs": 4, "batch_size": 16, "learning_rate": 3e-3, "freeze_encoder": True,
                          "validation_fraction": 0.25, "progress": False, "members": 3, **fields})


@pytest.fixture(scope="module")
def fitted(corpus) -> RLMPredictor:
    tokenizer, texts, values = accuracy(corpus)
    predictor = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, **TINY)
    predictor.fit(texts, values[:, None], ("acc",), config())
    return predictor


def test_each_member_holds_out_rows_of_its_own_and_member_0_is_the_plain_fit(corpus) -> None:
    tokenizer, texts, values = accuracy(corpus)
    predictor = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, **TINY)
    predictor.lm.normalizers["acc"] = Normalizer.fit(values)
    inputs, targets = predictor.lm.encode_texts(texts), predictor.lm.targets(values[:, None], ("acc",))
    start = {k: v.clone() for k, v in predictor.lm.model.state_dict().items()}
    rows = []
    for member in (0, 1, 2, 0):
        predictor.lm.model.load_state_dict(start)
        rows.append(train(predictor.lm.model, inputs, targets, ("acc",), config(members=1), member=member)
                    .validation_rows)
    plain = train(predictor.lm.model, inputs, targets, ("acc",), config(members=1)).validation_rows
    assert rows[0] == rows[3] == plain
    assert rows[0] != rows[1] and rows[0] != rows[2] and rows[1] != rows[2] and len(rows[1]) == len(rows[0])


def test_members_keeping_their_last_step_train_on_every_row_but_the_first(corpus) -> None:
    tokenizer, texts, values = accuracy(corpus)
    predictor = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, **TINY)
    predictor.lm.normalizers["acc"] = Normalizer.fit(values)
    inputs, targets = predictor.lm.encode_texts(texts), predictor.lm.targets(values[:, None], ("acc",))
    splits, real = [], nasrlm.rlm._members.train

    def recording(*args, **kwargs):  # each member's validation rows
        report = real(*args, **kwargs)
        splits.append(len(report.validation_rows))
        return report

    for keep_best in (True, False):
        splits.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(nasrlm.rlm._members, "train", recording)
            report, others, held_out = train_members(predictor.lm.model, inputs, targets, ("acc",),
                                                     config(keep_best=keep_best))
        assert len(others) == 2 and splits[0] == len(report.validation_rows) > 0
        if keep_best:  # each stops on rows of its own
            assert splits[1:] == splits[:1] * 2 and len(held_out) > len(report.validation_rows)
        else:  # only the first member's rows, which calibrate, are held out
            assert splits[1:] == [0, 0] and list(held_out) == report.validation_rows


def test_members_differ_in_the_decoder_only_and_pool_their_samples(fitted, corpus) -> None:
    _, texts, _ = corpus
    assert len(fitted.lm.members) == 2
    mine = own_weights(fitted.lm.model)
    assert not any(name.startswith(FROZEN_WITH_THE_ENCODER) for name in mine)
    for weights in fitted.lm.members:
        assert set(weights) == set(mine)
        assert any(not torch.equal(weights[n], mine[n]) for n in mine)  # each learned on its own
    pooled_draws = fitted.sample(texts[:6], num_samples=12, seed=4, calibrated=False)
    one = fitted.lm.first_member()  # the same weights, without the other decoders
    alone = one.sample(texts[:6], ("acc",), num_samples=12, seed=4)
    first = one.sample(texts[:6], ("acc",), num_samples=4, seed=4)
    reading = one.read(texts[:6], ["acc"])
    assert pooled_draws.shape == alone.shape == (6, 12, 1)
    np.testing.assert_array_equal(pooled_draws[:, :4], first)  # the first member's share, drawn first
    assert not np.array_equal(pooled_draws, alone)
    # one greedy sample: the first's
    np.testing.assert_array_equal(fitted.lm.read(texts[:6], ["acc"]), reading)
    before = own_weights(fitted.lm.model)
    with wearing(fitted.lm.model, fitted.lm.members[1]):
        assert all(torch.equal(v, fitted.lm.members[1][n]) for n, v in own_weights(fitted.lm.model).items())
    assert all(torch.equal(v, before[n]) for n, v in own_weights(fitted.lm.model).items())  # its own again


def test_samples_are_shared_as_evenly_as_they_go() -> None:
    assert [share for _, share in pooled(["a", "b", "c"], 8)] == [3, 3, 2]
    assert pooled(["a", "b", "c"], 1) == [("a", 1)]


def test_members_are_saved_and_loaded_and_a_missing_file_is_named(fitted, corpus, tmp_path) -> None:
    _, texts, _ = corpus
    path = fitted.save(tmp_path / "model")
    loaded = RLMPredictor.load(path)
    assert len(loaded.lm.members) == 2
    np.testing.assert_array_equal(loaded.sample(texts[:5], num_samples=9, seed=1),
                                  fitted.sample(texts[:5], num_samples=9, seed=1))
    (path / MEMBERS_FILE).unlink()
    with pytest.raises(ModelNotFoundError, match=MEMBERS_FILE):
        RLMPredictor.load(path)
    (path / MEMBERS_FILE).write_bytes(b"not safetensors")
    with pytest.raises(ModelFileError, match=MEMBERS_FILE):
        RLMPredictor.load(path)
    single = RLMPredictor.load(fitted.save(tmp_path / "again"))
    single.lm.members = []
    single.save(tmp_path / "again")  # saved again without members: the file goes
    assert not (tmp_path / "again" / MEMBERS_FILE).exists()
    assert RLMPredictor.load(tmp_path / "again").lm.members == []


def test_members_need_a_frozen_encoder_and_no_prior(corpus) -> None:
    tokenizer, texts, values = accuracy(corpus)
    predictor = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, **TINY)
    predictor.fit(texts, values[:, None], ("acc",), config(max_epochs=1))
    members, normalizers = predictor.lm.members, dict(predictor.lm.normalizers)
    with pytest.raises(ValueError, match="freeze_encoder"):  # refused as the config is made
        config(freeze_encoder=False)
    with pytest.raises(ValueError, match="at least 1"):
        config(members=0)
    with pytest.raises(ValueError, match="prior"):
        predictor.fit(texts, values[:, None] + 5, ("acc",), config(), prior_inputs={"x": values},
                      prior="ridge")
    assert predictor.lm.members is members and predictor.lm.normalizers == normalizers  # refused: as it was
    assert ALONE_TUNE.members > 1 and DECODER_TUNE.members == 1  # the model alone pools; blended, one
    alone = ALONE_TUNE.config(1000)
    assert alone.members == ALONE_TUNE.members and alone.freeze_encoder
    assert DECODER_TUNE.config(1000).members == 1


def test_validation_rows_others_trained_on_calibrate_through_the_first_member(corpus, monkeypatch) -> None:
    monkeypatch.setattr(nasrlm.rlm.predictor, "MIN_VALIDATION_ROWS", 12)  # the corpus is small
    calls = []
    real = nasrlm.rlm.predictor.first_member_spreads

    def recording(predictor, *args, **kwargs):
        calls.append(len(predictor.lm.members))
        spreads = real(predictor, *args, **kwargs)
        assert len(predictor.lm.members) == calls[-1]  # put back
        return spreads

    fitted_on = []  # the members sampled when the spread is fitted: the first one alone
    spreads = nasrlm.rlm._held_out.HeldOut.spreads

    def fitting(self, predictor, *args, **kwargs):
        fitted_on.append(len(predictor.lm.members))
        return spreads(self, predictor, *args, **kwargs)

    monkeypatch.setattr(nasrlm.rlm.predictor, "first_member_spreads", recording)
    monkeypatch.setattr(nasrlm.rlm._held_out.HeldOut, "spreads", fitting)
    tokenizer, texts, values = accuracy(corpus)
    predictor = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, **TINY)
    predictor.fit(texts, values[:, None], ("acc",), config())
    assert calls == [2] and fitted_on == [0] and set(predictor.spreads) == {"acc"}


def test_the_pool_is_compared_with_the_first_member_on_at_most_width_rows(corpus, monkeypatch) -> None:
    monkeypatch.setattr(nasrlm.rlm.predictor, "MIN_VALIDATION_ROWS", 12)  # the corpus is small
    monkeypatch.setattr(nasrlm.rlm._held_out, "WIDTH_ROWS", 7)
    sampled = []  # the rows each calibration sampling decoded
    real = nasrlm.rlm._held_out.HeldOut.sample

    def recording(self, predictor, texts, values, objectives, rows, **kwargs):
        sampled.append(len(rows))
        return real(self, predictor, texts, values, objectives, rows, **kwargs)

    monkeypatch.setattr(nasrlm.rlm._held_out.HeldOut, "sample", recording)
    tokenizer, texts, values = accuracy(corpus)
    predictor = RLMPredictor.from_scratch((ACC,), size=None, tokenizer=tokenizer, **TINY)
    report = predictor.fit(texts, values[:, None], ("acc",), config(keep_best=False))
    # the first member's validation rows, then one member and the pool on 7 of the rows all trained on
    assert sampled == [len(report.validation_rows), 7, 7] and len(texts) - len(report.validation_rows) > 7
