"""The feature prior: a line through one label, a random forest, a ridge regression or a Gaussian process on
what is known of each architecture.

With a few dozen or a few hundred labels, a model that reads labels off the ONNX graph (parameters,
MACs, the operator families along its input-to-output paths: :mod:`nasrlm.free_labels`) ranks NB201
cells far better than the RLM fine-tuned on the same labels, and on an unseen device a linear map from
the latencies of devices already measured does better still (experiments/README.md, "Transfer from a
pre-trained base model"). So :class:`~nasrlm.rlm.predictor.RLMPredictor` can start from such a prior and
learn only what it leaves unexplained, as it does with :class:`~nasrlm.priors.prior.FreeLabelPrior`.

Per objective the prior is a forest on the objective's values, a ridge regression on their logs
(where positive), or a line, a trend forest or a Gaussian process on their normal scores, and its predictions
are read in the objective's normal scores, the scale the RLM learns residuals on. ``kind="auto"`` takes
the line, the ridge, the Gaussian process or the forest, the simplest whose out-of-sample predictions of the
training rows (out-of-bag for the forest; for the others, left pair out on up to :data:`PAIR_ROWS` rows,
leave-one-out above, nested up to :data:`NESTED_ROWS`: :func:`_judged_by`) rank them within noise of the
best (:func:`~nasrlm.priors.prior.simplest_within_noise`): ranking is what
a search and a benchmark ask of it.
Those out-of-sample predictions are returned with the prior: the residuals the RLM trains on must be
those it will meet on new architectures, not the near-zero ones of a forest on its own training rows.

The fitted forest is kept as flat arrays (no pickle) and evaluated here with numpy; scikit-learn only
grows the trees. The Gaussian process is numpy throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from nasrlm.numerics import kernel_independent
from nasrlm.priors.gaussian_process import GaussianProcess
from nasrlm.priors.prior import NormalScores, ScoresPrior, pair_orders, simplest_within_noise

#: The kinds of model a feature prior fits per objective; ``auto`` picks a :class:`Line` through one input, a
#: ridge, a ``gp`` (a :class:`GaussianProcess`) or a forest per objective.
KINDS = ("auto", "forest", "ridge", "trend-forest", "gp")
#: Every prior by name, the one list the command line, ``RLMPredictor.fit(prior=...)``, ``fine_tune`` and the
#: search sampler take: the line prior of :mod:`nasrlm.priors.prior`, then these. No prior is ``None``
#: (``--prior none``).
PRIOR_KINDS = ("line", *KINDS)
#: The prior beside a fine-tuned base where none is named (``nasrlm train``, ``fine_tune``): which of the
#: forest, the ridge and the Gaussian process ranks best depends on the task (the process on NB201 and NB101
#: accuracy, the ridge on a new device beside measured ones: experiments/README.md, "Who carries the
#: prediction"), and ``auto`` finds it. The search sampler's, a recipe of its own, is
#: ``ProposalSettings.prior``.
DEFAULT_PRIOR = "auto"


def check_prior_name(prior: str | None) -> None:
    """Refuse a prior that is neither ``None`` (none) nor one of :data:`PRIOR_KINDS`."""
    if prior is not None and prior not in PRIOR_KINDS:
        raise ValueError(f"prior {prior!r}: expected None or one of {', '.join(PRIOR_KINDS)}")
#: Trees per forest, and the fewest rows a leaf holds.
TREES = 200
MIN_LEAF = 1
#: Ridge penalties tried (on centred inputs), chosen by exact leave-one-out error.
ALPHAS = np.logspace(-3, 4, 15)
#: Below this many rows a forest's out-of-bag estimate is meaningless: ridge only.
MIN_FOREST_ROWS = 8
#: Up to this many rows ``auto`` judges a ridge, a Gaussian process and a line by nested leave-one-out
#: predictions (:func:`_judged_by`); above, choosing their settings on the same rows biases their ranking
#: little. At 50, on 64 records of NDS' DARTS file a ridge on a hundred labels looked best on three splits of
#: five and the prior ranked the rest at τ 0.43 on the mean, the nested choice at 0.79 (experiments/README.md,
#: "NDS ImageNet files from few records"); NB201's choices from 64 and 100 labels are the same either way.
NESTED_ROWS = 100
#: Up to this many rows ``auto`` judges the line, the ridge and the process left pair out instead
#: (:func:`~nasrlm.priors.prior.pair_orders`): each refitted without each pair of rows, n(n-1)/2 fits. On 16
#: records of NDS' six ImageNet files the prior alone ranked the rest at τ 0.610 on the mean, 0.578 judged
#: leave-one-out (experiments/README.md, "NDS ImageNet files from few records").
PAIR_ROWS = 24


def _scores(model: Model, scores: NormalScores, x: np.ndarray) -> np.ndarray:
    """A model's prediction in the objective's normal scores, the same on every processor (a ridge's and a
    Gaussian process's go through BLAS: :mod:`nasrlm.numerics`)."""
    predicted = model.predict(x)
    if not isinstance(model, Line | TrendForest | GaussianProcess | SumForest):  # those predict scores
        predicted = scores.forward(np.exp(predicted) if isinstance(model, Ridge) and model.log_target
                                   else predicted)
    return kernel_independent(predicted)


def _model_dict(model: Model) -> dict:
    """JSON-ready metadata of one objective's model (a forest's nodes, a process's matrices: ``arrays``)."""
    if isinstance(model, GaussianProcess):
        return {"kind": "gp", **model.to_dict()}
    if isinstance(model, Line):
        return {"kind": "line", "input": model.input, "slope": model.slope, "intercept": model.intercept}
    if isinstance(model, Ridge):
        return {"kind": "ridge", **model.to_dict()}
    if isinstance(model, TrendForest):
        return {"kind": "trend-forest", "input": model.input, "slope": model.slope,
                "intercept": model.intercept}
    if isinstance(model, SumForest):
        return {"kind": "sum-forest", "summed": model.summed.tolist(), "ridge": model.ridge.to_dict(),
                "scores": model.scores.to_dict()}
    return {"kind": "forest"}


def _logged(inputs: np.ndarray, log: np.ndarray) -> np.ndarray:
    """``inputs`` with the columns marked in ``log`` as their logs (numpy's ``log`` takes SIMD paths that
    differ in the last bit from one processor to another: rounded, :mod:`nasrlm.numerics`)."""
    inputs = np.asarray(inputs, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(log, np.log(np.where(log, np.maximum(inputs, 1e-300), 1.0)), inputs)
    return kernel_independent(x)


def _error(predicted: np.ndarray, z: np.ndarray) -> float:
    """Mean squared error of out-of-sample scores, the same on every processor."""
    return float(kernel_independent(np.mean((np.asarray(predicted) - z) ** 2)))


def _line(x: np.ndarray, z: np.ndarray, eligible: np.ndarray | None, keep: np.ndarray) -> Line:
    return Line.through(x[keep], z[keep], eligible)


def _ridge(x: np.ndarray, target: np.ndarray, log_target: bool, keep: np.ndarray) -> Ridge:
    return Ridge.fit(x[keep], target[keep], log_target=log_target)[0]


def _process(x: np.ndarray, z: np.ndarray, keep: np.ndarray) -> GaussianProcess:
    return GaussianProcess.fit(x[keep], z[keep])[0]


def _judged_by(model: Model, predicted: np.ndarray, refit: Callable[[np.ndarray], Model] | None,
               x: np.ndarray, values: np.ndarray, scores: NormalScores) -> np.ndarray:
    """What ``auto`` ranks a candidate by: on 4 to :data:`PAIR_ROWS` rows, the order ``refit`` (the same
    fit on the rows of a mask: :func:`_line`, :func:`_ridge`, :func:`_process`) gives each pair of rows it
    did not see (:func:`~nasrlm.priors.prior.pair_orders`); else its out-of-sample predictions of the
    training rows ``predicted`` (normal scores), or, for a ridge or a Gaussian process of at most
    :data:`NESTED_ROWS` rows, each row's prediction by the same fit on the others, penalty or kernel chosen
    among them too (nested leave-one-out). A forest has no ``refit``: its out-of-bag predictions are its
    judge (refitting it per pair would cost minutes).

    A ridge's and a process's leave-one-out predictions come from the penalty or kernel that made them best
    (one of 15, one of 75), and on 20 rows that choice flatters them: on a new device's latency from 20
    measurements, ``auto`` on the graph labels took them over the forest and ranked at ρ 0.782 against the
    forest's 0.841, 0.829 judged nested (experiments/README.md, "Who carries the prediction")."""
    if refit is not None and 4 <= len(values) <= PAIR_ROWS:  # each pair's refit sees two rows or more
        return pair_orders(refit, x)
    if isinstance(model, Line | Forest | TrendForest) or len(values) > NESTED_ROWS:  # a line's are nested
        return predicted
    nested = np.empty(len(values))
    z = scores.forward(values)
    for i in range(len(values)):
        others = np.arange(len(values)) != i
        if isinstance(model, Ridge):
            target = np.log(values) if model.log_target else values
            ridge, _ = Ridge.fit(x[others], target[others], log_target=model.log_target)
            guess = ridge.predict(x[i : i + 1])
            nested[i] = scores.forward(np.exp(guess) if model.log_target else guess)[0]
        else:
            process, _ = GaussianProcess.fit(x[others], z[others])
            nested[i] = process.predict(x[i : i + 1])[0]
    return kernel_independent(nested)


@dataclass(frozen=True)
class Forest:
    """A regression forest as flat node arrays; children are indices into the same arrays, -1 at leaves."""

    feature: np.ndarray  # (nodes,) int: the input a node splits on
    threshold: np.ndarray  # (nodes,) float: rows with input <= threshold go left
    left: np.ndarray  # (nodes,) int
    right: np.ndarray  # (nodes,) int
    value: np.ndarray  # (nodes,) float: the mean target of the node's rows
    roots: np.ndarray  # (trees,) int

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, seed: int, *, trees: int = TREES,
            min_leaf: int = MIN_LEAF) -> tuple[Forest, np.ndarray]:
        """The forest and its out-of-bag prediction of each training row (``trees`` trees whose leaves
        hold at least ``min_leaf`` rows: larger leaves keep a forest of many rows small)."""
        from sklearn.ensemble import RandomForestRegressor

        model = RandomForestRegressor(n_estimators=trees, max_features=0.5, min_samples_leaf=min_leaf,
                                      oob_score=True, random_state=seed, n_jobs=1)
        model.fit(x.astype(np.float32), y)
        feature, threshold, left, right, value, roots = [], [], [], [], [], []
        for tree in model.estimators_:
            t, offset = tree.tree_, sum(len(f) for f in feature)
            leaf = t.children_left < 0
            feature.append(np.where(leaf, -1, t.feature))
            threshold.append(t.threshold)
            left.append(np.where(leaf, -1, t.children_left + offset))
            right.append(np.where(leaf, -1, t.children_right + offset))
            value.append(t.value[:, 0, 0])
            roots.append(offset)
        forest = cls(np.concatenate(feature).astype(np.int32), np.concatenate(threshold),
                     np.concatenate(left).astype(np.int32), np.concatenate(right).astype(np.int32),
                     np.concatenate(value).astype(np.float64), np.array(roots, dtype=np.int32))
        oob = np.asarray(model.oob_prediction_, dtype=np.float64)
        return forest, oob

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The mean over trees, (n,) for inputs (n, features)."""
        return self.predict_trees(x).mean(axis=1)

    def predict_trees(self, x: np.ndarray) -> np.ndarray:
        """Every tree's prediction, (n, trees); inputs compared in float32, as the trees were grown."""
        x = np.asarray(x, dtype=np.float32).astype(np.float64)
        nodes = np.broadcast_to(self.roots, (len(x), len(self.roots))).copy()
        rows = np.arange(len(x))[:, None]
        while True:
            inner = self.left[nodes] >= 0
            if not inner.any():
                break
            goes_left = x[rows, np.maximum(self.feature[nodes], 0)] <= self.threshold[nodes]
            nodes = np.where(inner, np.where(goes_left, self.left[nodes], self.right[nodes]), nodes)
        return self.value[nodes]

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.{name}": getattr(self, name) for name in
                ("feature", "threshold", "left", "right", "value", "roots")}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> Forest:
        return cls(*(arrays[f"{prefix}.{name}"] for name in
                     ("feature", "threshold", "left", "right", "value", "roots")))


@dataclass(frozen=True)
class Ridge:
    """``y ≈ intercept + (x - centre) @ coef``, the penalty chosen by exact leave-one-out error.

    The inputs are centred, not scaled: on logs of latencies a device whose latencies barely vary
    should weigh little (scaling them up ranked unseen devices worse from 20 rows: experiments/README.md,
    "Latency on an unseen device from 20 measurements").
    With ``log_target`` the target is the log of the objective (positive in every training row).
    """

    centre: np.ndarray
    coef: np.ndarray
    intercept: float
    alpha: float
    log_target: bool = False

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, *, log_target: bool = False) -> tuple[Ridge, np.ndarray]:
        """The ridge with the smallest leave-one-out error, and its leave-one-out predictions (of ``y``)."""
        centre, mean = x.mean(axis=0), float(y.mean())
        u, s, vt = np.linalg.svd(x - centre, full_matrices=False)
        uy = u.T @ (y - mean)
        best = None
        for alpha in ALPHAS:
            shrink = s**2 / (s**2 + alpha)
            fitted = mean + u @ (shrink * uy)
            leverage = (u**2) @ shrink + 1.0 / len(y)  # the intercept's share too
            held_out = y - (y - fitted) / np.maximum(1.0 - leverage, 1e-9)
            error = float(kernel_independent(np.mean((y - held_out) ** 2)))  # near-equal ones tie: the first
            if best is None or error < best[0]:
                coef = vt.T @ (s / (s**2 + alpha) * uy)
                best = (error, cls(centre, coef, mean, float(alpha), log_target), held_out)
        return best[1], best[2]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.intercept + (x - self.centre) @ self.coef

    def to_dict(self) -> dict:
        return {"centre": self.centre.tolist(), "coef": self.coef.tolist(), "intercept": self.intercept,
                "alpha": self.alpha, "log_target": self.log_target}

    @classmethod
    def from_dict(cls, data: dict) -> Ridge:
        return cls(np.asarray(data["centre"], dtype=np.float64), np.asarray(data["coef"], dtype=np.float64),
                   float(data["intercept"]), float(data["alpha"]), bool(data["log_target"]))


@dataclass(frozen=True)
class Line:
    """A straight line in normal scores through the one input that follows the objective best.

    The simplest prior there is: from 16 records of an NDS ImageNet file, a ridge, a Gaussian process or a
    forest on a hundred labels ranked the rest below the parameter count they read (0.46 against 0.53 on the
    mean of six files); with a line among ``auto``'s candidates, 0.59 (experiments/README.md, "NDS ImageNet
    files from few records").
    """

    input: int
    slope: float
    intercept: float

    @classmethod
    def through(cls, x: np.ndarray, z: np.ndarray, eligible: np.ndarray | None = None) -> Line:
        """The line through the input of ``x`` (a mask ``eligible`` of them; default: any) whose values
        correlate most with the scores ``z``, fitted by least squares."""
        eligible = np.ones(x.shape[1], dtype=bool) if eligible is None else eligible
        correlation = [abs(np.corrcoef(x[:, j], z)[0, 1]) if eligible[j] and np.std(x[:, j]) > 0 else 0.0
                       for j in range(x.shape[1])]
        correlation = kernel_independent(correlation)  # BLAS: inputs alike to the last bit tie: the first
        j = int(np.argmax(correlation))
        slope, intercept = np.polyfit(x[:, j], z, 1) if correlation[j] > 0 else (0.0, float(z.mean()))
        # least squares go through LAPACK: rounded, so that what follows is the same on every processor
        slope, intercept = (float(v) for v in kernel_independent([slope, intercept]))
        return cls(j, slope, intercept)

    @classmethod
    def fit(cls, x: np.ndarray, z: np.ndarray, eligible: np.ndarray | None = None) -> tuple[Line, np.ndarray]:
        """The line and each training row's leave-one-out prediction: on up to :data:`NESTED_ROWS` rows the
        input chosen again without the row (nested, as :func:`_judged_by` judges a ridge: on 16 rows the best
        of a hundred inputs is often best by chance), above that the line's own."""
        line = cls.through(x, z, eligible)
        if len(z) <= NESTED_ROWS:
            rows = np.arange(len(z))
            held_out = [cls.through(x[rows != i], z[rows != i], eligible).predict(x[i : i + 1])[0]
                        for i in rows]
            return line, kernel_independent(held_out)
        u = x[:, line.input] - x[:, line.input].mean()
        leverage = 1.0 / len(z) + u**2 / max(float(u @ u), 1e-300)
        fitted = line.predict(x)
        return line, kernel_independent(z - (z - fitted) / np.maximum(1.0 - leverage, 1e-9))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.intercept + self.slope * x[:, self.input]


@dataclass(frozen=True)
class TrendForest:
    """A :class:`Line` plus a forest on what the line leaves: the line carries predictions past the training
    rows, which a forest alone never does (a search needs candidates predicted beyond its front), the forest
    bends it.
    """

    input: int
    slope: float
    intercept: float
    forest: Forest

    @classmethod
    def fit(cls, x: np.ndarray, z: np.ndarray, seed: int, line_inputs: np.ndarray | None = None
            ) -> tuple[TrendForest, np.ndarray]:
        """From inputs ``x`` and normal scores ``z``: the model and its out-of-bag scores. The line
        follows one of the ``line_inputs`` (a mask; default: any input)."""
        line = Line.through(x, z, line_inputs)
        forest, out_of_bag = Forest.fit(x, z - line.predict(x), seed)
        return cls(line.input, line.slope, line.intercept, forest), line.predict(x) + out_of_bag

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.intercept + self.slope * x[:, self.input] + self.forest.predict(x)


@dataclass(frozen=True)
class SumForest:
    """A constraint's value as a sum over the counts a device adds up (a ridge on them, in the value's own
    units, read in its normal scores) plus a forest on what the sum leaves, from the other inputs.

    A latency adds up its nodes' times, which a line through one input cannot: fitted on trials whose 3x3
    convolutions all came beside other operations, a line through the convolutions took their excess for
    the convolution's and put NB201's one-convolution cells over fpga's limit, where a sum of the counts
    is exact (experiments/README.md, "Under a latency budget").
    """

    summed: np.ndarray  # (inputs,) bool: the columns the sum reads; the forest reads the others
    ridge: Ridge
    scores: NormalScores
    forest: Forest

    @classmethod
    def fit(cls, x: np.ndarray, values: np.ndarray, scores: NormalScores, summed: np.ndarray, seed: int
            ) -> tuple[SumForest, np.ndarray]:
        """From inputs ``x`` and the values (their ``scores``): the model and its out-of-sample scores (the
        sum's leave-one-out, the forest's out of bag)."""
        ridge, held_out = Ridge.fit(x[:, summed], values)
        trend = kernel_independent(scores.forward(ridge.predict(x[:, summed])))
        forest, out_of_bag = Forest.fit(x[:, ~summed], scores.forward(values) - trend, seed)
        return cls(summed, ridge, scores, forest), scores.forward(held_out) + out_of_bag

    def trend(self, x: np.ndarray) -> np.ndarray:
        return kernel_independent(self.scores.forward(self.ridge.predict(x[:, self.summed])))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.trend(x) + self.forest.predict(x[:, ~self.summed])


#: One objective's model.
Model = Line | Forest | Ridge | TrendForest | GaussianProcess | SumForest


@dataclass(frozen=True)
class FeaturePrior(ScoresPrior):
    """Per objective, a forest (on values), a ridge (on log values where positive), a trend forest or a
    Gaussian process (on normal scores) from the inputs, read in the objective's normal scores.

    Inputs that are positive everywhere in the training rows are read as logs (latencies, MACs):
    a forest does not care, a ridge becomes a power law. Counts a latency adds up (``summed``) are read by a
    constraint's :class:`SumForest` alone, as they are; every other model reads the other inputs.
    """

    objectives: list[NormalScores]
    log: np.ndarray  # (inputs,) bool
    models: list[Model]
    summed: np.ndarray | None = None  # (inputs,) bool; None: none

    @classmethod
    def fit(cls, inputs: np.ndarray, values: np.ndarray, *, kind: str, seed: int = 0,
            line_inputs: np.ndarray | None = None, free_inputs: np.ndarray | None = None,
            signed: Sequence[bool] | None = None, summed_inputs: np.ndarray | None = None
            ) -> tuple[FeaturePrior, np.ndarray]:
        """From ``inputs`` (n, f; all known) and ``values`` (n, m; NaN = unknown): the prior and its
        out-of-sample mean scores for the training rows, (n, m) (NaN where the value is unknown).
        ``line_inputs``: the inputs (a mask) a line (``"auto"``'s, a ``"trend-forest"``'s) may follow; the
        forest reads them all. Default: any. ``free_inputs``: the free labels among them (parameters, MACs, a
        mask), through the best of which ``"auto"`` tries a line first, simpler than a line through any
        (from 16 records of NDS' NASNet, a line through the best of a hundred labels followed one by chance).
        ``signed`` (m,): the objectives that may take either sign (a constraint's value), never read in logs
        (:meth:`~nasrlm.priors.prior.NormalScores.fit`). ``summed_inputs`` (a mask; default: none): counts a
        latency adds up (:data:`~nasrlm.free_labels.SUMMED_LABELS`), which only a :class:`SumForest` reads:
        with ``"trend-forest"``, a signed objective's model where it predicts the training rows out of sample
        better than the trend forest does; the other models never see them."""
        if kind not in KINDS:
            raise ValueError(f"prior kind {kind!r}: expected one of {', '.join(KINDS)}")
        inputs, values = np.asarray(inputs, dtype=np.float64), np.asarray(values, dtype=np.float64)
        if not np.isfinite(inputs).all():
            raise ValueError("the prior's inputs must be known (finite) for every row")
        signed = [False] * values.shape[1] if signed is None else list(signed)
        summed = np.zeros(inputs.shape[1], dtype=bool) if summed_inputs is None else \
            np.asarray(summed_inputs, dtype=bool)
        log = (inputs > 0).all(axis=0) & ~summed
        full = _logged(inputs, log)
        x = full[:, ~summed]  # what every model but a sum reads
        line_inputs = None if line_inputs is None else np.asarray(line_inputs, dtype=bool)[~summed]
        free_inputs = None if free_inputs is None else np.asarray(free_inputs, dtype=bool)[~summed]
        objectives, models = [], []
        held_out = np.full(values.shape, np.nan)
        for k in range(values.shape[1]):
            known = ~np.isnan(values[:, k])
            if known.sum() < 2:
                raise ValueError(f"the prior needs at least two known values of objective {k}")
            scores = NormalScores.fit(values[known, k], signed=signed[k])
            z = scores.forward(values[known, k])
            candidates = []
            forests = known.sum() >= MIN_FOREST_ROWS  # else a forest kind falls back to a ridge
            if kind == "auto":  # the free labels' line first (a stable sort keeps it first), then any's
                if free_inputs is not None and np.any(free_inputs):
                    free = np.asarray(free_inputs, dtype=bool)
                    candidates.append((*Line.fit(x[known], z, free), partial(_line, x[known], z, free)))
                candidates.append((*Line.fit(x[known], z, line_inputs),
                                   partial(_line, x[known], z, line_inputs)))
            if kind in ("auto", "ridge") or (kind in ("forest", "trend-forest") and not forests):
                log_target = not signed[k] and bool((values[known, k] > 0).all())
                target = np.log(values[known, k]) if log_target else values[known, k]
                ridge, held = Ridge.fit(x[known], target, log_target=log_target)
                candidates.append((ridge, scores.forward(np.exp(held) if log_target else held),
                                   partial(_ridge, x[known], target, log_target)))
            if kind in ("auto", "forest") and forests:
                forest, out_of_bag = Forest.fit(x[known], values[known, k], seed)
                candidates.append((forest, scores.forward(out_of_bag), None))
            if kind == "trend-forest" and forests:
                trend = TrendForest.fit(x[known], z, seed, line_inputs)
                if signed[k] and np.ptp(full[known][:, summed], axis=0).any():
                    total = SumForest.fit(full[known], values[known, k], scores, summed, seed)
                    if _error(total[1], z) < _error(trend[1], z):
                        trend = total
                candidates.append((*trend, None))
            if kind in ("auto", "gp"):
                candidates.append((*GaussianProcess.fit_rows(x[known], z, seed),
                                   partial(_process, x[known], z)))
            candidates = sorted(((model, kernel_independent(predicted), refit)
                                 for model, predicted, refit in candidates),
                                key=lambda c: _SIMPLEST_FIRST.index(type(c[0])))
            judged = [_judged_by(model, predicted, refit, x[known], values[known, k], scores)
                      for model, predicted, refit in candidates] if len(candidates) > 1 else []
            model, predicted, _ = candidates[simplest_within_noise(judged, z) if judged else 0]
            objectives.append(scores)
            models.append(model)
            held_out[known, k] = predicted
        return cls(objectives, log, models, summed if summed.any() else None), held_out

    def _x(self, inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The inputs as the models read them: all of them (a :class:`SumForest`'s) and all but the summed."""
        full = _logged(inputs, self.log)
        return full, full if self.summed is None else full[:, ~self.summed]

    def mean(self, inputs: np.ndarray) -> np.ndarray:
        """(n, m) prior mean scores of architectures with these inputs."""
        full, x = self._x(inputs)
        return np.stack([_scores(m, s, full if isinstance(m, SumForest) else x)
                         for s, m in zip(self.objectives, self.models, strict=True)], axis=1)

    def disagreement(self, inputs: np.ndarray) -> np.ndarray:
        """(n, m) how far the trees of each objective's forest disagree on each architecture: the
        standard deviation of their predictions, in normal scores (NaN for a ridge or a line: no trees);
        for a Gaussian process, its posterior standard deviation.

        Where the trials say little (a corner of the space they never reached) the bootstrapped trees
        split differently and disagree; it is the per-architecture uncertainty SMAC reads off a forest.
        """
        _, x = self._x(inputs)
        out = np.full((len(x), len(self.models)), np.nan)
        for k, (scores, model) in enumerate(zip(self.objectives, self.models, strict=True)):
            if isinstance(model, GaussianProcess):
                out[:, k] = model.std(x)
            elif isinstance(model, TrendForest | SumForest):  # its trees predict scores already
                out[:, k] = model.forest.predict_trees(x).std(axis=1)
            elif isinstance(model, Forest):
                out[:, k] = scores.forward(model.predict_trees(x)).std(axis=1)
        return kernel_independent(out)

    @property
    def kinds(self) -> list[str]:
        """Per objective, the model chosen: ``"line"``, ``"forest"``, ``"ridge"``, ``"trend-forest"``,
        ``"sum-forest"`` or ``"gp"``."""
        return [_KIND_OF[type(m)] for m in self.models]

    def to_dict(self) -> dict:
        """JSON-ready metadata; the forests' node arrays are in :meth:`arrays`."""
        return {"kind": "feature", "objectives": [s.to_dict() for s in self.objectives],
                "log": self.log.tolist(), "models": [_model_dict(m) for m in self.models],
                **({} if self.summed is None else {"summed": self.summed.tolist()})}

    def arrays(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for k, m in enumerate(self.models):
            if isinstance(m, GaussianProcess):
                out.update(m.arrays(f"objective{k}"))
            forest = m.forest if isinstance(m, TrendForest | SumForest) else m
            if isinstance(forest, Forest):
                out.update(forest.arrays(f"objective{k}"))
        return out

    @classmethod
    def from_dict(cls, data: dict, arrays: dict[str, np.ndarray]) -> FeaturePrior:
        models: list[Model] = []
        for k, m in enumerate(data["models"]):
            if m["kind"] == "gp":
                models.append(GaussianProcess.from_dict(m, arrays, f"objective{k}"))
            elif m["kind"] == "ridge":
                models.append(Ridge.from_dict(m))
            elif m["kind"] == "line":
                models.append(Line(int(m["input"]), float(m["slope"]), float(m["intercept"])))
            elif m["kind"] == "forest":
                models.append(Forest.from_arrays(arrays, f"objective{k}"))
            elif m["kind"] == "sum-forest":
                models.append(SumForest(np.asarray(m["summed"], dtype=bool), Ridge.from_dict(m["ridge"]),
                                        NormalScores.from_dict(m["scores"]),
                                        Forest.from_arrays(arrays, f"objective{k}")))
            else:
                models.append(TrendForest(int(m["input"]), float(m["slope"]), float(m["intercept"]),
                                          Forest.from_arrays(arrays, f"objective{k}")))
        summed = data.get("summed")
        return cls([NormalScores.from_dict(s) for s in data["objectives"]],
                   np.asarray(data["log"], dtype=bool), models,
                   None if summed is None else np.asarray(summed, dtype=bool))


_KIND_OF = {Line: "line", Forest: "forest", Ridge: "ridge", TrendForest: "trend-forest",
            GaussianProcess: "gp", SumForest: "sum-forest"}
#: ``auto``'s candidates, simplest first: the one it takes unless a more flexible one ranks the training rows
#: clearly better (:func:`~nasrlm.priors.prior.simplest_within_noise`).
_SIMPLEST_FIRST = (Line, Ridge, GaussianProcess, TrendForest, SumForest, Forest)
