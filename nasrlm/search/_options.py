"""``RLMSampler``'s keyword options checked, before it builds anything (a bad one raises ``ValueError``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from nasrlm.priors.feature_prior import PRIOR_KINDS
from nasrlm.search._candidates import CandidateSettings
from nasrlm.search._surrogate import FitSettings

#: ``RLMSampler(spread=)`` choices.
SPREADS = ("auto", "prior", "trees", "model")
#: ``RLMSampler(surrogate=)`` choices.
SURROGATES = ("rlm", "prior")


def checked_settings(*, n_startup_trials: int, proposals_per_fit: int, num_samples: int, temperature: float,
                     spread: str, prior: str | None, surrogate: str, prior_alone_after: int | None,
                     base: str | None, model: dict[str, Any] | None, fit: FitSettings,
                     candidates: CandidateSettings) -> None:
    """Raise ``ValueError`` for the first of ``RLMSampler``'s options that is wrong, alone or with another."""
    if n_startup_trials < 2:
        raise ValueError("n_startup_trials must be at least 2 (the model needs two examples)")
    for name, value in (("proposals_per_fit", proposals_per_fit),
                        ("num_candidates", candidates.num_candidates), ("num_samples", num_samples),
                        ("fit_steps", fit.fit_steps)):
        if value < 1:
            raise ValueError(f"{name} must be positive, got {value}")
    if candidates.fresh_candidates < 0:
        raise ValueError(f"fresh_candidates must be 0 or more, got {candidates.fresh_candidates}")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if prior is not None and prior not in PRIOR_KINDS:
        raise ValueError(f"prior {prior!r}: expected None or one of {', '.join(PRIOR_KINDS)}")
    if spread not in SPREADS:
        raise ValueError(f"spread {spread!r}: expected one of {', '.join(SPREADS)}")
    if spread in ("prior", "trees") and prior is None:
        raise ValueError(f"spread={spread!r} needs a prior (prior=None given)")
    if base is not None and model is not None:
        raise ValueError("give model or base, not both: a base model has its own size")
    if surrogate not in SURROGATES:
        raise ValueError(f"surrogate {surrogate!r}: expected one of {', '.join(SURROGATES)}")
    if surrogate == "prior" and prior in (None, "line"):
        raise ValueError(f"surrogate='prior' needs a feature prior (trend-forest, forest, ridge, auto), "
                         f"got prior={prior!r}")
    if prior_alone_after is not None and prior_alone_after < 1:
        raise ValueError(f"prior_alone_after must be positive or None, got {prior_alone_after}")
    if surrogate == "prior" and (base is not None or spread == "model"):
        raise ValueError("surrogate='prior' has no model: base and spread='model' do not apply")


def overridden(settings: Any, **fields: Any) -> Any:
    """``settings`` (a frozen dataclass) with the ``fields`` that were given (not ``None``) changed."""
    return replace(settings, **{name: value for name, value in fields.items() if value is not None})


def refine_ranges(refine: Sequence[Sequence[int | None]] | None) -> tuple[tuple[int, int | None], ...]:
    """``RLMSampler(refine=)`` checked and as tuples (a JSON list of pairs from the command line too)."""
    ranges = []
    for pair in refine or ():
        start, stop = pair if isinstance(pair, Sequence) and len(pair) == 2 else (None, None)
        if not (isinstance(start, int) and start >= 1
                and (stop is None or isinstance(stop, int) and stop > start)):
            raise ValueError(f"refine: each range is a pair (start, stop) with 1 <= start < stop, or stop "
                             f"None, got {pair!r}")
        ranges.append((start, stop))
    return tuple(ranges)
