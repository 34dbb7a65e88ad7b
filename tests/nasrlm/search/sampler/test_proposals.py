"""ProposalSettings: the RLMSampler's proposal rounds' settings, each bad value refused naming its field."""

from __future__ import annotations

import pytest

from nasrlm.search import ProposalSettings


@pytest.mark.parametrize(("fields", "says"), [
    ({"proposals_per_fit": 0}, "proposals_per_fit must be positive"),
    ({"num_samples": 0}, "num_samples must be positive"),
    ({"min_feasible_share": 0.0}, "min_feasible_share must be in"),
    ({"temperature": 0.0}, "temperature must be positive"),
    ({"prior": "knn"}, "prior 'knn': expected None or one of"),
    ({"spread": "wide"}, "spread 'wide': expected one of"),
    ({"spread": "prior", "prior": None}, "spread='prior' needs a prior"),
    ({"spread": "trees", "prior": None}, "spread='trees' needs a prior"),
    ({"surrogate": "gp"}, "surrogate 'gp': expected one of"),
    ({"surrogate": "prior", "prior": "line"}, "surrogate='prior' needs a feature prior"),
    ({"surrogate": "prior", "prior": None, "spread": "model"}, "surrogate='prior' needs a feature prior"),
    ({"surrogate": "prior", "spread": "model"}, "surrogate='prior' has no model: spread='model'"),
    ({"prior_alone_after": 0}, "prior_alone_after must be positive or None"),
])
def test_a_bad_value_is_refused_naming_the_field(fields, says) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        ProposalSettings(**fields)


@pytest.mark.parametrize("refine", [[(0, None)], [(5, 5)], [(5,)], [("5", None)], [5]])
def test_a_refine_range_that_is_not_one_is_refused(refine) -> None:
    with pytest.raises(ValueError, match="refine: each range is a pair"):
        ProposalSettings(refine=refine)


def test_refine_ranges_are_kept_as_tuples_and_none_never_refines() -> None:
    assert ProposalSettings(refine=[[8, 11], [20, None]]).refine == ((8, 11), (20, None))  # as JSON gives it
    assert ProposalSettings(refine=None).refine == ProposalSettings(refine=[]).refine == ()
    assert ProposalSettings(refine=[[8, 11]]) == ProposalSettings(refine=((8, 11),))


def test_the_settings_are_frozen() -> None:
    from dataclasses import FrozenInstanceError, replace

    settings = ProposalSettings()
    with pytest.raises(FrozenInstanceError):
        settings.temperature = 2.0  # type: ignore[misc]
    assert replace(settings, temperature=2.0).temperature == 2.0
    with pytest.raises(ValueError, match="temperature"):
        replace(settings, temperature=-1.0)  # replace checks too


def test_auto_spread_is_trees_from_three_objectives_on_and_the_model_s_own_without_a_prior() -> None:
    auto = ProposalSettings(prior="trend-forest")
    assert [auto.spread_for(n) for n in (1, 2, 3, 5)] == ["prior", "prior", "trees", "trees"]
    assert ProposalSettings(prior=None).spread_for(4) == "model"
    assert ProposalSettings(prior="forest", spread="prior").spread_for(5) == "prior"
