"""Per-objective monotone maps between labels and the range [1, 10) the decoder writes in.

Ranking quality is what the predictions are for, so each objective is mapped through the empirical
CDF of its training labels (after a log for positive, heavy-tailed quantities such as latency):
every digit then carries the same share of the ranking, and chance-level outliers (NB201's 10 %
cells) cannot squeeze the rest into one digit. Mapping into [1, 10) keeps the exponent token fixed,
so the decoder's first digit is the coarse rank, the next ones refine it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nasrlm.priors.prior import spans_decades

LOW, HIGH = 1.0, 9.999  # the decoder's range: d.ddd × 10^0


@dataclass(frozen=True)
class Normalizer:
    """Piecewise-linear empirical CDF of training labels, scaled into [LOW, HIGH]."""

    knots: tuple[float, ...]  # distinct label values (log-space if ``log``), increasing
    levels: tuple[float, ...]  # CDF level of each knot, increasing, in [0, 1]
    log: bool = False

    @classmethod
    def fit(cls, values: np.ndarray, *, log: bool | None = None, max_knots: int = 257,
            headroom: float = 0.0) -> Normalizer:
        """Fit on the known (non-NaN) values; ``log=None`` takes logs when all values are positive
        and span more than a factor of 10.

        ``headroom`` > 0 reserves that share of the range at each end for values up to half the
        observed span beyond the extremes, so a model can predict past the best label seen so far
        (what a search needs; without it every prediction is clamped to the training range).
        """
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size == 0:
            raise ValueError("cannot fit a normalizer without any known value")
        if log is None:
            log = spans_decades(v)
        if log and v.min() <= 0:
            raise ValueError("log normalisation needs positive values")
        x = np.log(v) if log else v
        qs = np.linspace(0.0, 1.0, min(max_knots, max(2, v.size)))
        xs = np.quantile(x, qs)
        knots, inverse = np.unique(xs, return_inverse=True)
        levels = np.bincount(inverse, weights=qs) / np.bincount(inverse)
        if knots.size == 1:  # a constant objective: map everything to the middle
            knots, levels = np.array([knots[0] - 1.0, knots[0] + 1.0]), np.array([0.0, 1.0])
        if headroom > 0:
            if not headroom < 0.5:
                raise ValueError(f"headroom must be in [0, 0.5), got {headroom}")
            reach = 0.5 * (knots[-1] - knots[0])
            knots = np.concatenate([[knots[0] - reach], knots, [knots[-1] + reach]])
            levels = np.concatenate([[0.0], headroom + (1 - 2 * headroom) * levels, [1.0]])
        return cls(tuple(map(float, knots)), tuple(map(float, levels)), log)

    def forward(self, values: np.ndarray) -> np.ndarray:
        """Labels → [LOW, HIGH] (NaN stays NaN; values outside the training range are clamped)."""
        v = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.log(v) if self.log else v
        z = np.interp(x, self.knots, self.levels)
        return np.where(np.isnan(v), np.nan, LOW + (HIGH - LOW) * z)

    def inverse(self, scaled: np.ndarray) -> np.ndarray:
        """[LOW, HIGH] → labels (monotone; clamped to the training range)."""
        z = (np.clip(np.asarray(scaled, dtype=np.float64), LOW, HIGH) - LOW) / (HIGH - LOW)
        x = np.interp(z, self.levels, self.knots)
        return np.exp(x) if self.log else x

    def to_dict(self) -> dict:
        return {"knots": list(self.knots), "levels": list(self.levels), "log": self.log}

    @classmethod
    def from_dict(cls, d: dict) -> Normalizer:
        return cls(tuple(d["knots"]), tuple(d["levels"]), bool(d["log"]))
