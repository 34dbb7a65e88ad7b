"""Is a predictor's spread honest? The share of true values inside the central interval of its samples.

A model whose central 80 % intervals hold about 80 % of held-out true values says how sure it is as it
should: the search explores where the spread is wide and trusts it where it is narrow. Fewer (an
overconfident model) and the search stops exploring too early; many more (an underconfident one) and it
explores where it already knows. The interval is read off each architecture's own decoded samples, so
nothing here assumes a shape for the distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import norm

from nasrlm.priors.prior import stratified_normal

#: The central mass whose coverage is checked, and the band of coverages that counts as calibrated.
CENTRAL_MASS = 0.8
CALIBRATED_BAND = (0.70, 0.90)


def central_coverage(samples: np.ndarray, truth: np.ndarray, mass: float = CENTRAL_MASS) -> np.ndarray:
    """Per objective, the share of rows whose true value lies inside the central ``mass`` of its samples.

    ``samples`` is (rows, samples, objectives) as :meth:`~nasrlm.rlm.predictor.RLMPredictor.sample` returns
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


#: Folds of the cross-fitting that calibrates a fit with too few validation rows (``RLMPredictor.fit``).
CALIBRATION_FOLDS = 5


@dataclass(frozen=True)
class Spread:
    """How one objective's decoded samples are widened to be honest: ``m + scale * (v - m) + floor * z``.

    ``m`` is each row's median (which stays put), ``v`` its decoded samples and ``z`` standard normal
    draws. ``scale`` stretches the spread the model decodes, which says *which* architectures it is unsure
    of; ``floor`` adds a spread of its own to every row, for the rows where a model fitted on a few dozen
    labels decodes one value every time (it has learned them by heart) and is wrong all the same.
    Both are in the objective's units, or with ``log`` in its logarithm (a positive objective spanning
    decades, a latency: :func:`~nasrlm.priors.prior.spans_decades`), where a floor widens each row in
    proportion to its value and no draw falls below zero. Fitted by :func:`fit_spread` on rows the model
    did not train on.
    """

    scale: float
    floor: float
    log: bool = False

    def widen(self, samples: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``samples`` (rows, samples) widened; each row's median is exactly the decoded one."""
        samples = np.asarray(samples, dtype=np.float64)
        median = np.median(samples, axis=1, keepdims=True)
        into, back = spread_scale(self.log)
        centre = into(median)
        z = stratified_normal(*samples.shape, rng)
        widened = centre + self.scale * (into(samples) - centre) + self.floor * z
        widened = back(widened - (np.median(widened, axis=1, keepdims=True) - centre))
        # the middle order statistics set to the median exactly: float rounding would otherwise break ties
        # between architectures the model predicts alike, and a ranking would move
        count = samples.shape[1]
        middle = np.argsort(widened, axis=1)[:, [(count - 1) // 2, count // 2]]
        np.put_along_axis(widened, middle, median, axis=1)
        return widened

    def stretched(self, factor: float) -> Spread:
        """This spread for a model whose own spread is ``1 / factor`` of the one it was fitted on."""
        return replace(self, scale=self.scale * factor)

    def to_dict(self) -> dict[str, float | bool]:
        return {"scale": self.scale, "floor": self.floor, "log": self.log}

    @classmethod
    def from_dict(cls, data: dict) -> Spread:
        spread = cls(float(data["scale"]), float(data["floor"]), bool(data.get("log", False)))
        if not (spread.scale >= 0 and spread.floor >= 0):
            raise ValueError(f"a spread's scale and floor must be >= 0, got {data}")
        return spread


def spread_scale(log: bool) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """A spread's scale and its inverse: logs (a decoded zero read as the least positive number) or none."""
    if log:
        return (lambda v: np.log(np.maximum(v, np.finfo(np.float64).tiny))), np.exp
    return (lambda v: v), (lambda v: v)


def fit_spread(samples: np.ndarray, truth: np.ndarray, mass: float = CENTRAL_MASS, *, log: bool = False
               ) -> Spread:
    """The :class:`Spread` under which ``truth`` (rows,) falls inside the central ``mass`` of the widened
    ``samples`` (rows, samples) as often as it should, on these rows; with ``log``, one in logs (every
    known truth must then be positive).

    Two steps. The *shape* (how much of the spread is the model's own, how much a floor) maximises the
    normal likelihood of the errors ``truth - median`` with variance ``floor² + scale² s²`` (``s``: a row's
    decoded spread), over a grid of ratios. The *size* then scales both so that exactly ``mass`` of the
    rows' errors fall inside their widened central interval: the likelihood alone is led by the many small
    errors, and the coverage is what the search relies on. Rows with a NaN truth are left out.
    """
    samples = np.asarray(samples, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if samples.ndim != 2 or truth.shape != (samples.shape[0],):
        raise ValueError(f"samples (rows, samples) and truth (rows,) disagree: {samples.shape} and "
                         f"{truth.shape}")
    known = ~np.isnan(truth)
    if known.sum() < 2:
        raise ValueError(f"a spread is fitted on at least two rows with a known truth, got {known.sum()}")
    samples, truth = samples[known], truth[known]
    if log and truth.min() <= 0:
        raise ValueError(f"a spread in logs needs positive truths, got {truth.min()}")
    into, _ = spread_scale(log)
    samples, truth = into(samples), into(truth)
    tail = (1 - mass) / 2
    z = float(norm.ppf(1 - tail))
    low, median, high = np.quantile(samples, [tail, 0.5, 1 - tail], axis=1)
    error = truth - median
    own = (high - low) / (2 * z)  # each row's decoded standard deviation, blind to a rare wild digit
    typical = float(np.sqrt(np.mean(error**2))) or 1.0
    best, shape = np.inf, (1.0, 0.0)
    for share in np.linspace(0.0, 1.0, 21):  # the floor's share of a typical row's spread
        floor = share * typical
        for scale in np.r_[0.0, np.geomspace(0.1, 30.0, 40)]:
            variance = floor**2 + (scale * own) ** 2
            if np.any(variance <= 0):
                continue
            nll = float(np.sum(np.log(variance) + error**2 / variance))
            if nll < best:
                best, shape = nll, (scale, floor)
    scale, floor = shape
    needed = np.abs(error) / (z * np.sqrt(floor**2 + (scale * own) ** 2))  # the size each row asks for
    # the finite-sample rule of split conformal prediction: covers ``mass`` of new rows, not just these
    level = min(1.0, np.ceil((len(needed) + 1) * mass) / len(needed))
    size = float(np.quantile(needed, level, method="higher"))
    return Spread(scale=float(scale * size), floor=float(floor * size), log=log)
