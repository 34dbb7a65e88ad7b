"""Named presets: model sizes and training schedules."""

from __future__ import annotations

import pytest

from nasrlm.rlm.model import RLMConfig
from nasrlm.rlm.predictor import MIN_VALIDATION_ROWS
from nasrlm.rlm.presets import ALONE_TUNE, DECODER_TUNE, FINE_TUNE, SIZES, TRAIN, size_options


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
    assert TRAIN.settings(20, 32) == {"max_epochs": TRAIN.max_epochs, "learning_rate": TRAIN.learning_rate,
                                      "validation_fraction": 0.1, "patience": 10, "keep_best": True,
                                      "members": 1, "state_dropout": 0.0}


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
