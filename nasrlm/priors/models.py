"""One objective's models for the feature prior: a forest, a ridge, a line through one input, a trend forest
(a line plus a forest) and a sum forest (a constraint's value as a sum over node counts plus a forest).

Each is an immutable value fitted by a ``fit`` class method and read by ``predict``;
:class:`~nasrlm.priors.feature_prior.FeaturePrior` chooses among them per objective. The forest is kept as
flat arrays (no pickle) and evaluated with numpy; scikit-learn only grows its trees.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from nasrlm.numerics import kernel_independent, kernel_independent_vector
from nasrlm.priors.gaussian_process import GaussianProcess
from nasrlm.priors.prior import NormalScores

#: Trees per forest, and the fewest rows a leaf holds.
TREES = 200
MIN_LEAF = 1
#: Ridge penalties tried (on centred inputs), chosen by exact leave-one-out error.
ALPHAS = np.logspace(-3, 4, 15)
#: Up to this many rows ``auto`` judges a ridge, a Gaussian process and a line by nested leave-one-out
#: predictions (``feature_prior._judged_by``); above, choosing their settings on the same rows biases their
#: ranking little. At 50, on 64 records of NDS' DARTS file a ridge on a hundred labels looked best on three
#: splits of five and the prior ranked the rest at τ 0.43 on the mean, the nested choice at 0.79
#: (experiments/README.md, "NDS ImageNet files from few records"); NB201's choices from 64 and 100 labels
#: are the same either way.
NESTED_ROWS = 100


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

    def rounded(self) -> Ridge:
        """The same ridge with the same numbers on every processor: its SVD's last bits are BLAS's, and a
        coefficient on a direction the rows do not span is noise (:mod:`nasrlm.numerics`)."""
        return replace(self, centre=kernel_independent(self.centre),
                       coef=kernel_independent_vector(self.coef),
                       intercept=float(kernel_independent(self.intercept)))

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
        input chosen again without the row (nested, as ``feature_prior._judged_by`` judges a ridge: on 16 rows
        the best of a hundred inputs is often best by chance), above that the line's own."""
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
    """A cost (a latency, a constraint's value) as a sum over the counts a device adds up (a ridge on them,
    in the value's own units, read in its normal scores) plus a forest on what the sum leaves, from the
    other inputs.

    A latency adds up its nodes' times, which a line through one input cannot: fitted on trials whose 3x3
    convolutions all came beside other operations, a line through the convolutions took their excess for
    the convolution's and put NB201's one-convolution cells over fpga's limit, where a sum of the counts
    is exact (experiments/README.md, "Under a latency budget"); from 20 trials it ranks NB201's eyeriss,
    gold_6226 and 1080ti_1 latencies at τ 0.96 / 0.89 / 0.86 where the trend forest ranks them at 0.61 /
    0.70 / 0.64 ("Warm start").
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
        ridge = ridge.rounded()  # stored and read by the search: the same on every processor
        trend = kernel_independent(scores.forward(ridge.predict(x[:, summed])))
        forest, out_of_bag = Forest.fit(x[:, ~summed], scores.forward(values) - trend, seed)
        return cls(summed, ridge, scores, forest), scores.forward(held_out) + out_of_bag

    def trend(self, x: np.ndarray) -> np.ndarray:
        return kernel_independent(self.scores.forward(self.ridge.predict(x[:, self.summed])))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.trend(x) + self.forest.predict(x[:, ~self.summed])


#: One objective's model.
Model = Line | Forest | Ridge | TrendForest | GaussianProcess | SumForest
