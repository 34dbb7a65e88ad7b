"""The free-label prior: what the parameter count or the MACs alone say about each objective.

Used by :class:`~nasrlm.rlm.predictor.RLMPredictor` (``fit(..., prior_from=...)``) and by the sampler.
Refitted on a few dozen trials, the sampler's model ranked unseen NB201 cells *worse* than the free
labels it is given (experiments/README.md, "What the model knows in the loop"). So each objective is
predicted as a straight line, in normal scores, through the free label that best explains the trials so
far, and the model learns only what that line leaves unexplained. Knowing nothing, the sampler falls
back on the free label's ranking; knowing more, the model corrects it — the role a prior mean plays in a
Gaussian process.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from nasrlm.numerics import kernel_independent

#: How far beyond the observed range (as a share of it) a mapped-back value may go; the same room the
#: model's label normalisers keep (``OBJECTIVE_HEADROOM``), so a prediction can extend the front a little.
HEADROOM = 0.1
#: The share of that room a value goes straight; past it values approach the room's end without reaching
#: it, so that they keep their order (:func:`_approaching`).
SOFT_EDGE = 0.9


def _approaching(values: np.ndarray, edge: float, bound: float) -> np.ndarray:
    """``values`` past ``edge`` (the data's last value on one side) kept short of ``bound`` (its room's end)
    without ties: straight up to :data:`SOFT_EDGE` of the room, then ever closer to ``bound``, in the same
    order. A plain clip tied every value beyond the room, and a ranking read from a few records lost
    their order there (NDS' ResNeXt-A from 16 records: up to 13 of 114 tied at one bound,
    experiments/README.md, "NDS ImageNet files from few records"). Plain arithmetic, no ``exp``: the same
    numbers on every processor."""
    knee = SOFT_EDGE * (bound - edge)  # nine tenths of the room, of either sign
    if knee == 0:
        return values
    past = (values - edge - knee) / (bound - edge - knee)  # > 0: in the last tenth, in its units
    softened = edge + knee + (bound - edge - knee) * (1.0 - 1.0 / (1.0 + past))  # an infinite one: bound
    return np.where(past > 0, softened, values)


def spans_decades(values: np.ndarray) -> bool:
    """Whether the known (non-NaN) ``values`` are all positive and span more than a factor of ten: a
    latency, whose room and spread are then taken in logs (a share of its range, or a spread in its
    units, would reach below zero for its fastest architectures)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    values = values[~np.isnan(values)]
    return bool(len(values) and values.min() > 0 and values.max() / values.min() > 10)


@dataclass(frozen=True)
class NormalScores:
    """A monotone map from values to standard-normal scores (empirical CDF), straight beyond the data.

    Mapped back, values stay within :data:`HEADROOM` of the data's range on either side: a straight
    tail alone predicted 144 % accuracy and negative latencies for architectures far from the trials.
    For positive values spanning more than a factor of ten (latencies) that room is taken in log
    space: in value space, NB201's chance-level cells (0.4 ms on pixel3 beside 10-36 ms for the rest)
    stretched it below zero, and the sampler chased predicted negative latencies. A quantity of either sign
    (``signed``: a constraint's value, met at 0 or less) has room past 0 on both sides, however far its
    values lie from it: whether a network meets the limit is the question asked of it, and before any
    trial met the limit, a room short of 0 let no candidate be predicted to meet it (experiments/README.md,
    "Under a latency budget").
    """

    knots: np.ndarray  # distinct values, increasing
    scores: np.ndarray  # their normal scores (ties share the mean score)
    log: bool = False  # the headroom is a share of the log range
    signed: bool = False  # the room reaches past 0 on both sides

    @classmethod
    def fit(cls, values: np.ndarray, *, signed: bool = False) -> NormalScores:
        """From the known (non-NaN) ``values``. ``signed``: a quantity that may take either sign (a
        constraint's value, feasible at 0 or less), whose room is never taken in logs, however its values so
        far happen to spread: in log space no value could reach zero."""
        values = np.asarray(values, dtype=np.float64).ravel()
        values = np.sort(values[~np.isnan(values)])
        if len(values) == 0:
            raise ValueError("normal scores need at least one known value")
        distinct, group = np.unique(values, return_inverse=True)
        scores = norm.ppf((np.arange(len(values)) + 0.5) / len(values))
        return cls(distinct, np.bincount(group, scores) / np.bincount(group),
                   not signed and spans_decades(values), signed)

    def to_dict(self) -> dict:
        return {"knots": self.knots.tolist(), "scores": self.scores.tolist(), "log": self.log,
                "signed": self.signed}

    @classmethod
    def from_dict(cls, data: dict) -> NormalScores:
        return cls(np.asarray(data["knots"], dtype=np.float64), np.asarray(data["scores"], dtype=np.float64),
                   bool(data["log"]), bool(data.get("signed", False)))

    @property
    def _slope(self) -> float:  # scores per unit of value, for the straight tails
        if len(self.knots) < 2:
            return 0.0
        return float((self.scores[-1] - self.scores[0]) / (self.knots[-1] - self.knots[0]))

    def forward(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        low, high, slope = self.knots[0], self.knots[-1], self._slope
        out = np.interp(values, self.knots, self.scores)
        out = np.where(values < low, self.scores[0] + (values - low) * slope, out)
        return np.where(values > high, self.scores[-1] + (values - high) * slope, out)

    def inverse(self, scores: np.ndarray) -> np.ndarray:
        scores = np.asarray(scores, dtype=np.float64)
        if len(self.knots) < 2:
            return np.full_like(scores, self.knots[0])
        low, high, slope = self.scores[0], self.scores[-1], self._slope
        out = np.interp(scores, self.scores, self.knots)
        out = np.where(scores < low, self.knots[0] + (scores - low) / slope, out)
        out = np.where(scores > high, self.knots[-1] + (scores - high) / slope, out)
        if self.log:  # log and exp take SIMD paths of the processor's: the bounds rounded (nasrlm.numerics)
            low, high = np.log(self.knots[0]), np.log(self.knots[-1])
            room = HEADROOM * (high - low)
            low, high = kernel_independent([np.exp(low - room), np.exp(high + room)])
        else:
            room = HEADROOM * (self.knots[-1] - self.knots[0])
            low, high = self.knots[0] - room, self.knots[-1] + room
            if self.signed:
                low, high = min(low, -room), max(high, room)
        return _approaching(_approaching(out, self.knots[-1], high), self.knots[0], low)


class ScoresPrior(ABC):
    """A prior mean in each objective's normal scores (``objectives``); the model learns the residual.

    What :class:`~nasrlm.rlm.predictor.RLMPredictor` needs of any prior: subclasses give ``mean``.
    """

    objectives: list[NormalScores]

    @abstractmethod
    def mean(self, inputs: np.ndarray) -> np.ndarray:
        """(n, m) prior mean scores of architectures with these inputs (n, f)."""

    def scores(self, values: np.ndarray) -> np.ndarray:
        """(n, m) each objective's values in its normal scores."""
        return np.stack([s.forward(values[:, k]) for k, s in enumerate(self.objectives)], axis=1)

    def residuals(self, inputs: np.ndarray, values: np.ndarray) -> np.ndarray:
        """What the model is trained on: each objective's score minus the prior's, (n, m)."""
        return self.scores(values) - self.mean(inputs)

    def values(self, inputs: np.ndarray, residuals: np.ndarray) -> np.ndarray:
        """Objective values from residuals: (n, m) or (n, samples, m) with ``inputs`` of shape (n, f)."""
        mean = self.mean(inputs)
        if residuals.ndim == 3:
            mean = mean[:, None, :]
        z = mean + residuals
        return np.stack([s.inverse(z[..., k]) for k, s in enumerate(self.objectives)], axis=-1)


@dataclass(frozen=True)
class FreeLabelPrior(ScoresPrior):
    """Per objective: ``score(y) ≈ intercept + slope * score(free label)``; the model learns the residual."""

    objectives: list[NormalScores]
    free: list[NormalScores]  # one per free label, fitted on a large reference sample
    label: np.ndarray  # (objectives,) index of the free label each objective follows
    intercept: np.ndarray
    slope: np.ndarray

    @classmethod
    def fit(cls, free: np.ndarray, values: np.ndarray, reference_free: np.ndarray,
            signed: Sequence[bool] | None = None) -> FreeLabelPrior:
        """From the trials' ``free`` labels (n, f) and ``values`` (n, m; NaN = unknown).

        ``reference_free`` (many architectures' free labels) fixes each free label's normal scores.
        ``signed`` (m,): the objectives that may take either sign (:meth:`NormalScores.fit`).
        """
        signed = [False] * values.shape[1] if signed is None else list(signed)
        free_scores = [NormalScores.fit(reference_free[:, j]) for j in range(reference_free.shape[1])]
        z_free = np.stack([s.forward(free[:, j]) for j, s in enumerate(free_scores)], axis=1)
        objectives, labels, intercepts, slopes = [], [], [], []
        for k in range(values.shape[1]):
            known = ~np.isnan(values[:, k])
            scores = NormalScores.fit(values[:, k], signed=signed[k])
            z = scores.forward(values[known, k])
            best = (0, 0.0, 0.0, 0.0)  # (label, |correlation|, intercept, slope)
            for j in range(z_free.shape[1]):
                x = z_free[known, j]
                if np.std(x) == 0 or np.std(z) == 0:
                    continue
                r = float(kernel_independent(np.corrcoef(x, z)[0, 1]))  # BLAS: ties go to the first label
                if abs(r) > best[1]:
                    slope = float(np.cov(x, z, bias=True)[0, 1] / np.var(x))
                    best = (j, abs(r), float(z.mean() - slope * x.mean()), slope)
            objectives.append(scores)
            labels.append(best[0])
            intercepts.append(best[2])
            slopes.append(best[3])
        return cls(objectives, free_scores, np.array(labels), np.array(intercepts), np.array(slopes))

    def to_dict(self) -> dict:
        """Plain JSON-ready lists (checkpoints never pickle)."""
        return {"objectives": [s.to_dict() for s in self.objectives],
                "free": [s.to_dict() for s in self.free], "label": self.label.tolist(),
                "intercept": self.intercept.tolist(), "slope": self.slope.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> FreeLabelPrior:
        return cls([NormalScores.from_dict(s) for s in data["objectives"]],
                   [NormalScores.from_dict(s) for s in data["free"]],
                   np.asarray(data["label"], dtype=np.int64),
                   np.asarray(data["intercept"], dtype=np.float64),
                   np.asarray(data["slope"], dtype=np.float64))

    def mean(self, free: np.ndarray) -> np.ndarray:
        """(n, m) prior mean scores of architectures with these free labels."""
        z_free = np.stack([self.free[j].forward(free[:, j]) for j in self.label], axis=1)
        return self.intercept + self.slope * z_free



def stratified_normal(rows: int, num_samples: int, rng: np.random.Generator) -> np.ndarray:
    """(rows, num_samples) standard normal draws that are the stratified quantiles of the normal,
    shuffled per row: every row's median is exactly 0 and its spread exactly the normal's, so
    samples scattered by them move no prediction, only widen it."""
    quantiles = np.tile(norm.ppf((np.arange(num_samples) + 0.5) / num_samples), (rows, 1))
    return rng.permuted(quantiles, axis=1)


def residual_weight(predicted: np.ndarray, actual: np.ndarray) -> float:
    """How much of a predicted residual to keep: the least-squares slope (through 0) of the residuals
    that came true on those predicted, clipped to [0, 1]; NaN pairs are skipped, 1.0 without data.

    0 means the predictions carried no usable signal (use the prior alone), 1 that they are as large as
    they should be. Measured on examples the model did not train on, it is what the model has earned.
    """
    predicted, actual = np.asarray(predicted, dtype=np.float64), np.asarray(actual, dtype=np.float64)
    known = ~(np.isnan(predicted) | np.isnan(actual))
    p, a = predicted[known], actual[known]
    if not p @ p > 0:
        return 1.0
    return float(kernel_independent(np.clip((p @ a) / (p @ p), 0.0, 1.0)))  # dot products: BLAS


#: Resamples of held-out rows that measure how noisy a ranking's Kendall τ is (:func:`simplest_within_noise`).
BOOTSTRAPS = 200
#: The model's shares a blend chooses among (:func:`ranked_share`): 0 is the prior alone, 1 the model alone.
BLEND_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)


def simplest_within_noise(predictions: Sequence[np.ndarray], truth: np.ndarray) -> int:
    """Which of several candidates' out-of-sample predictions of the same rows to trust, the simplest first:
    the first whose Kendall τ with ``truth`` lies within one standard error of the best one's (the
    one-standard-error rule of cross-validated model selection), the error measured over :data:`BOOTSTRAPS`
    resamples of the rows (seeded: the same rows give the same choice).

    A candidate's predictions are either one per row (n,), NaN rows skipped (with fewer than three left, 0),
    or, left pair out, one order per pair of rows (n, n): the sign of row i's prediction minus row j's by a
    fit that saw neither (:func:`pair_orders`); τ is then the mean agreement of those orders with the
    truth's over the pairs, and one-per-row predictions beside them are read as their pairs' orders.

    On 20 held-out rows a τ is uncertain by about 0.15: the best of several predictions is often best by
    chance, and a choice that follows it costs more than it gains (experiments/README.md, "Who carries the
    prediction").
    """
    if any(np.ndim(p) == 2 for p in predictions):
        return _simplest_by_pairs([p if np.ndim(p) == 2 else _orders(np.asarray(p, dtype=np.float64))
                                   for p in predictions], np.asarray(truth, dtype=np.float64))
    from scipy.stats import kendalltau

    stacked = np.column_stack([np.asarray(p, dtype=np.float64) for p in predictions])
    truth = np.asarray(truth, dtype=np.float64)
    known = ~(np.isnan(stacked).any(axis=1) | np.isnan(truth))
    stacked, truth = stacked[known], truth[known]
    if len(truth) < 3:
        return 0

    def taus(rows: np.ndarray) -> np.ndarray:
        values = [kendalltau(stacked[rows, k], truth[rows]).statistic for k in range(stacked.shape[1])]
        return np.nan_to_num(np.array(values, dtype=np.float64), nan=-1.0)

    full = taus(np.arange(len(truth)))
    best = int(np.argmax(full))
    rng = np.random.default_rng(0)
    spread = np.std([taus(rng.integers(len(truth), size=len(truth)))[best] for _ in range(BOOTSTRAPS)])
    return int(np.flatnonzero(full >= full[best] - spread)[0])


def pair_orders(refit: Callable[[np.ndarray], Any], x: np.ndarray) -> np.ndarray:
    """Leave-pair-out orders (n, n): for each pair of rows i < j, ``refit(keep)`` (a model with ``predict``
    fitted on the rows of the mask ``keep``, all but i and j) orders the two, +1 where it predicts i above j,
    -1 below, 0 level; antisymmetric.

    A ranking judged by leave-one-out predictions is biased low on few rows: each row's prediction leans
    away from its own value, and on 16 records of NDS' NASNet a line through the parameter count that ranks
    them at τ 0.25 scored −0.03 so, below a ridge that ranked the rest at −0.04 (experiments/README.md, "NDS
    ImageNet files from few records"). Left pair out, a fixed line scores exactly its τ on the rows.
    """
    n = len(x)
    orders = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            keep = np.ones(n, dtype=bool)
            keep[[i, j]] = False
            first, second = kernel_independent(refit(keep).predict(x[[i, j]]))
            orders[i, j] = np.sign(first - second)
            orders[j, i] = -orders[i, j]
    return orders


def _orders(predicted: np.ndarray) -> np.ndarray:
    return np.nan_to_num(np.sign(predicted[:, None] - predicted[None, :]))


def _simplest_by_pairs(orders: list[np.ndarray], truth: np.ndarray) -> int:
    """:func:`simplest_within_noise` on leave-pair-out orders: a resample weighs each pair by how often
    both of its rows were drawn."""
    agree = [np.nan_to_num(o) * np.sign(truth[:, None] - truth[None, :]) for o in orders]  # NaN: level

    def taus(weights: np.ndarray) -> np.ndarray:
        pairs = np.outer(weights, weights)
        np.fill_diagonal(pairs, 0.0)
        total = pairs.sum()
        return np.array([(pairs * a).sum() / total if total else -1.0 for a in agree])

    full = taus(np.ones(len(truth)))
    best = int(np.argmax(full))
    rng = np.random.default_rng(0)
    spread = np.std([taus(np.bincount(rng.integers(len(truth), size=len(truth)), minlength=len(truth)))[best]
                     for _ in range(BOOTSTRAPS)])
    return int(np.flatnonzero(full >= full[best] - spread)[0])


def ranked_share(centre: np.ndarray, predicted: np.ndarray, actual: np.ndarray) -> float:
    """The model's share of a blend: of :data:`BLEND_SHARES`, the smallest whose blend ``centre + share *
    predicted`` ranks ``centre + actual`` within noise of the best (:func:`simplest_within_noise`), on
    held-out rows (``centre``: the prior's prediction; ``predicted`` and ``actual``: how far the model's and
    the true values lie from it, on one scale). NaN rows are skipped; fewer than three rows give 0 (nothing
    to judge by).

    Ranking is what a blend is asked for, and the least-squares share it replaced (the slope of ``actual``
    on ``predicted``, shrunk by its noise) let a model in that agreed with the prior's errors in size but
    ranked worse: on NB201 accuracy a Gaussian-process prior beside the model alone lost up to 0.03 of τ at
    shares of 0.28-0.48 (experiments/README.md, "Who carries the prediction"). Each share is one of the
    parts or between them, and the prior alone is kept unless the held-out rows say clearly otherwise.
    """
    centre, predicted, actual = (np.asarray(v, dtype=np.float64) for v in (centre, predicted, actual))
    blends = [kernel_independent(centre + share * predicted) for share in BLEND_SHARES]
    return BLEND_SHARES[simplest_within_noise(blends, centre + actual)]
