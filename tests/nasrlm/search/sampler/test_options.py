"""Flat RLMSampler options by name (``--rlm-option KEY=VALUE``, ``--rlm-options JSON``) routed to the
sampler's keywords and settings objects."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

from nasrlm.search import CandidateSettings, FitSettings, ProposalSettings, RLMSampler, sampler_keywords
from nasrlm.search.sampler._options import OPTIONS, SAMPLER_OPTIONS, SETTINGS, option_hints


def test_every_name_is_one_keyword_or_one_field_of_one_settings_object() -> None:
    names = [*SAMPLER_OPTIONS, *(f.name for cls in SETTINGS.values() for f in fields(cls))]
    assert len(names) == len(set(names)) == len(OPTIONS)  # unique across the objects: one way to set each
    keywords = inspect.signature(RLMSampler).parameters
    assert set(SAMPLER_OPTIONS) | set(SETTINGS) <= set(keywords)
    assert {SETTINGS[k] for k in ("proposals", "fit", "candidates")} == {
        ProposalSettings, FitSettings, CandidateSettings}
    assert set(option_hints()) == set(OPTIONS)


def test_each_name_lands_where_it_should() -> None:
    assert sampler_keywords({}) == {}
    for name, keyword in OPTIONS.items():
        value = {"base": "BASE", "device": "cuda", "label_cache": "labels.db", "refine": ((3, 9),),
                 "model": {"d_model": 32}, "spread": "model", "prior": "line", "surrogate": "rlm",
                 "weigh_residual": False, "prior_alone_after": 7, "temperature": 0.5, "headroom": 0.2,
                 "warmup_fraction": 0.3, "learning_rate": 0.01, "pretrain_learning_rate": 0.01,
                 "min_feasible_share": 0.8}.get(name, 7)
        got = sampler_keywords({name: value})
        assert list(got) == [keyword], name
        if keyword == name:
            assert got[name] == value
        else:
            assert got[keyword] == SETTINGS[keyword](**{name: value})
            assert getattr(got[keyword], name) == value, name


def test_names_of_one_object_make_one_object_and_the_others_keep_their_defaults() -> None:
    got = sampler_keywords({"fit_steps": 50, "pretrain_archs": 0, "num_candidates": 300, "temperature": 2,
                            "n_startup_trials": 6})
    assert got == {"n_startup_trials": 6, "proposals": ProposalSettings(temperature=2),
                   "fit": FitSettings(fit_steps=50, pretrain_archs=0),
                   "candidates": CandidateSettings(num_candidates=300)}


def test_an_unknown_name_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown rlm option 'temprature'; choose from n_startup_trials, .*"
                                         "temperature.*fit_steps.*num_candidates"):
        sampler_keywords({"temprature": 2.0})
    for name in ("seed", "progress", "independent_sampler", "proposals", "fit", "candidates"):
        with pytest.raises(ValueError, match=f"unknown rlm option '{name}'"):
            sampler_keywords({name: None})


def test_a_bad_value_is_refused_by_its_settings_object() -> None:
    with pytest.raises(ValueError, match="fit_steps must be positive"):
        sampler_keywords({"fit_steps": 0})
    with pytest.raises(ValueError, match="fresh_candidates must be 0 or more"):
        sampler_keywords({"fresh_candidates": -1})
