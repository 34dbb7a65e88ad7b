"""FitSettings: how the RLMSampler's model trains, each bad value refused naming its field."""

from __future__ import annotations

import pytest

from nasrlm.search import DEFAULT_MODEL, FitSettings


@pytest.mark.parametrize(("fields", "says"), [
    ({"fit_steps": 0}, "fit_steps must be positive"),
    ({"batch_size": 0}, "batch_size must be positive"),
    ({"learning_rate": 0.0}, "learning_rate must be positive"),
    ({"pretrain_learning_rate": -1e-3}, "pretrain_learning_rate must be positive"),
    ({"pretrain_archs": -1}, "pretrain_archs must be 0 or more"),
    ({"pretrain_epochs": -1}, "pretrain_epochs must be 0 or more"),
    ({"warmup_fraction": 1.5}, "warmup_fraction must be in"),
    ({"headroom": 0.5}, "headroom must be in"),
    ({"model": None}, "model must be a mapping"),
])
def test_a_bad_value_is_refused_naming_the_field(fields, says) -> None:
    with pytest.raises(ValueError, match=says):
        FitSettings(**fields)


def test_the_model_is_the_compact_size_by_default_and_a_copy_of_what_is_given() -> None:
    assert FitSettings().model == DEFAULT_MODEL and FitSettings().model is not DEFAULT_MODEL
    given = {"d_model": 32}
    settings = FitSettings(model=given)
    given["d_model"] = 16
    assert settings.model == {"d_model": 32}
