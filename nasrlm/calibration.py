"""Is a predictor's spread honest? The share of true values inside the central interval of its samples.

A model whose central 80 % intervals hold about 80 % of held-out true values says how sure it is as it
should: the search explores where the spread is wide and trusts it where it is narrow. Fewer (an
overconfident model) and the search stops exploring too early; many more (an underconfident one) and it
explores where it already knows. The interval is read off each architecture's own decoded samples, so
nothing here assumes a shape for the distribution.
"""

from __future__ import annotations

import numpy as np

#: The central mass whose coverage is checked, and the band of coverages that counts as calibrated.
CENTRAL_MASS = 0.8
CALIBRATED_BAND = (0.70, 0.90)


def central_coverage(samples: np.ndarray, truth: np.ndarray, mass: float = CENTRAL_MASS) -> np.ndarray:
    """Per objective, the share of rows whose true value lies inside the central ``mass`` of its samples.

    ``samples`` is (rows, samples, objectives) as :meth:`~nasrlm.predictor.RLMPredictor.sample` returns
    it, ``truth`` (rows, objectives); rows with a NaN truth are left out of their objective (NaN where
    none is left). Interval ends count as inside: decoded digits often repeat one value exactly.
    """
    samples = np.asarray(samples, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if samples.ndim != 3 or truth.shape != (samples.shape[0], samples.shape[2]):
        raise ValueError(f"samples (rows, samples, objectives) and truth (rows, objectives) disagree: "
                         f"{samples.shape} and {truth.shape}")
    if not 0 < mass < 1:
        raise ValueError(f"mass must be in (0, 1), got {mass}")
    tail = (1 - mass) / 2
    low, high = np.quantile(samples, [tail, 1 - tail], axis=1)  # each (rows, objectives)
    known = ~np.isnan(truth)
    inside = (truth >= low) & (truth <= high) & known
    counts = known.sum(axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(counts > 0, inside.sum(axis=0) / np.maximum(counts, 1), np.nan)


def is_calibrated(coverage: float) -> bool:
    """Whether a central-80 % coverage lies in :data:`CALIBRATED_BAND`."""
    return CALIBRATED_BAND[0] <= coverage <= CALIBRATED_BAND[1]
