"""Every named recipe: model sizes, the training recipes and their settings, each defined once."""

from __future__ import annotations

import math
from dataclasses import fields, replace

import pytest

from nasrlm.rlm.model import RLMConfig
from nasrlm.rlm.predictor import MIN_VALIDATION_ROWS
from nasrlm.rlm.recipes import (
    ALONE_TUNE,
    DECODER_TUNE,
    FINE_TUNE,
    REFIT,
    SIZES,
    TRAIN,
    PretrainConfig,
    Recipe,
    TrainConfig,
    fine_tune_recipe,
    size_options,
)
from nasrlm.search import FitSettings


def test_every_size_builds_a_config_and_unknown_sizes_are_named() -> None:
    for name in SIZES:
        RLMConfig(text_vocab_size=10, text_pad_id=0, objectives=("a",), **size_options(name))
    with pytest.raises(ValueError, match="tiny, compact, small, lean, base"):
        size_options("huge")


def test_fine_tuning_takes_a_fixed_number_of_steps_however_few_the_rows() -> None:
    few, many = FINE_TUNE.settings(20, 32), FINE_TUNE.settings(1000, 32)
    assert few["max_epochs"] == FINE_TUNE.steps and few["validation_fraction"] == 0.0
    assert many["max_epochs"] * 32 == pytest.approx(FINE_TUNE.steps, rel=0.1)  # 32 batches an epoch
    assert many["validation_fraction"] > 0 and many["patience"] >= 10
    assert TRAIN.config(20) == TrainConfig()  # training from scratch is TrainConfig's own values


def test_the_decoder_tunes_longer_only_where_a_validation_split_can_stop_it() -> None:
    few, many = DECODER_TUNE.settings(20, 32), DECODER_TUNE.settings(1000, 32)
    assert few["max_epochs"] == DECODER_TUNE.unvalidated_steps and few["validation_fraction"] == 0.0
    assert many["max_epochs"] * 32 == pytest.approx(DECODER_TUNE.steps, rel=0.1)
    assert many["validation_fraction"] > 0 and DECODER_TUNE.steps > FINE_TUNE.steps


def test_the_model_alone_pools_members_only_where_its_validation_rows_calibrate_it() -> None:
    few, many = ALONE_TUNE.settings(ALONE_TUNE.members_from - 1, 32), ALONE_TUNE.settings(1000, 32)
    assert few["members"] == 1 and many["members"] == ALONE_TUNE.members > 1
    assert few["validation_fraction"] == 0.0  # every row trains; cross-fits calibrate the spread
    assert round(ALONE_TUNE.members_from * many["validation_fraction"]) == MIN_VALIDATION_ROWS
    assert not many["keep_best"] and DECODER_TUNE.settings(1000, 32)["keep_best"]


@pytest.mark.parametrize("rows", [16, 20, 100, 299, 300, 1000, 5000])
def test_the_model_alone_takes_steps_in_proportion_to_its_rows_up_to_the_decoders(rows) -> None:
    settings = ALONE_TUNE.settings(rows, 32)
    per_epoch = -(-rows // 32)  # batches over every row: a validation split then trains on 0.9 of them
    counted = settings["max_epochs"] * per_epoch
    expected = min(ALONE_TUNE.steps, ALONE_TUNE.steps_per_row * rows)
    assert expected <= counted < expected + per_epoch, (rows, counted, expected)


def test_a_setting_a_recipe_does_not_name_keeps_the_one_value_train_config_gives_it() -> None:
    shared = [f.name for f in fields(Recipe) if f.name in {g.name for g in fields(TrainConfig)}]
    assert len(shared) >= 8
    assert all(getattr(Recipe(), name) == getattr(TrainConfig(), name) for name in shared)
    assert all(getattr(PretrainConfig(), name) == getattr(TrainConfig(), name)
               for name in ("batch_size", "weight_decay", "clip_norm"))


def test_a_base_fine_tunes_by_the_recipe_of_its_prior_and_only_the_whole_model_unfrozen() -> None:
    assert fine_tune_recipe(alone=True, blend=False) is ALONE_TUNE
    assert fine_tune_recipe(alone=False, blend=True) is DECODER_TUNE
    assert fine_tune_recipe(alone=False, blend=False) is FINE_TUNE
    assert ALONE_TUNE.config(20).freeze_encoder and DECODER_TUNE.config(20).freeze_encoder
    assert not FINE_TUNE.config(20).freeze_encoder and not TRAIN.config(20).freeze_encoder
    assert DECODER_TUNE.config(1000, max_epochs=3, seed=4).max_epochs == 3  # fields override the recipe


@pytest.mark.parametrize("rows", [2, 7, 32, 33, 150, 1000])
def test_the_sampler_refits_by_its_steps_on_every_trial_with_no_validation_split(rows) -> None:
    settings = FitSettings()
    assert (settings.fit_steps, settings.learning_rate, settings.warmup_fraction) == (
        REFIT.steps, REFIT.learning_rate, REFIT.warmup_fraction)
    batch = min(settings.batch_size, rows)
    config = replace(REFIT, steps=settings.fit_steps).config(rows, batch_size=batch)
    assert config.validation_fraction == 0.0 and config.batch_size == batch
    assert config.max_epochs == max(1, math.ceil(settings.fit_steps / math.ceil(rows / batch)))
