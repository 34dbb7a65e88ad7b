"""Flat ``RLMSampler`` options by name, routed to its keywords: each name is one of its plain keywords
(``n_startup_trials``, ``base``, ...) or a field of one of its settings objects (``proposals_per_fit``,
``fit_steps``, ``num_candidates``, ...), so that a command line (``nasrlm search --rlm-option KEY=VALUE``)
or a JSON object (the experiments' ``--rlm-options``) sets any of them by name alone."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from nasrlm.search.sampler._candidates import CandidateSettings
from nasrlm.search.sampler._proposals import ProposalSettings
from nasrlm.search.sampler._sampler import RLMSampler
from nasrlm.search.sampler._surrogate import FitSettings

#: ``RLMSampler`` keywords a flat option names as they are (the others take Python objects or come from
#: elsewhere: the seed, progress bars, the independent sampler, the settings objects).
SAMPLER_OPTIONS = ("n_startup_trials", "startup", "base", "device", "label_cache")
#: The settings objects, by the ``RLMSampler`` keyword that takes each.
SETTINGS: dict[str, type] = {"proposals": ProposalSettings, "fit": FitSettings,
                             "candidates": CandidateSettings}
#: Every flat option, in the order they are listed: the ``RLMSampler`` keyword it sets (itself, or the
#: settings object whose field it names; field names are unique across the objects).
OPTIONS: dict[str, str] = {**{name: name for name in SAMPLER_OPTIONS},
                           **{f.name: keyword for keyword, cls in SETTINGS.items() for f in fields(cls)}}


def sampler_keywords(options: Mapping[str, Any]) -> dict[str, Any]:
    """``RLMSampler`` keywords from flat ``options``: each settings object made from the fields given
    (the others keep their defaults). An unknown name raises ``ValueError`` listing the known ones; a
    bad value raises it as the settings object or the sampler does."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown rlm option {unknown[0]!r}; choose from {', '.join(OPTIONS)}")
    keywords = {name: value for name, value in options.items() if OPTIONS[name] == name}
    for keyword, cls in SETTINGS.items():
        given = {name: value for name, value in options.items() if OPTIONS[name] == keyword}
        if given:
            keywords[keyword] = cls(**given)
    return keywords


def option_hints() -> dict[str, Any]:
    """The type hint of every flat option (:data:`OPTIONS`), for checking values before any work."""
    keywords = typing.get_type_hints(RLMSampler.__init__)
    hints = {name: keywords[name] for name in SAMPLER_OPTIONS}
    for cls in SETTINGS.values():
        hints.update(typing.get_type_hints(cls))
    return hints
