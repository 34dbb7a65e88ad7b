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
from nasrlm.priors.models import NESTED_ROWS, Forest, Line, Model, Ridge, SumForest, TrendForest
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
#: Below this many rows a forest's out-of-bag estimate is meaningless: ridge only.
MIN_FOREST_ROWS = 8
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
class FeaturePrior(ScoresPrior):
    """Per objective, a forest (on values), a ridge (on log values where positive), a trend forest or a
    Gaussian process (on normal scores) from the inputs, read in the objective's normal scores.

    Inputs that are positive everywhere in the training rows are read as logs (latencies, MACs):
    a forest does not care, a ridge becomes a power law. Counts a latency adds up (``summed``) are read by a
    cost's :class:`SumForest` alone, as they are; every other model reads the other inputs.
    """

    objectives: list[NormalScores]
    log: np.ndarray  # (inputs,) bool
    models: list[Model]
    summed: np.ndarray | None = None  # (inputs,) bool; None: none

    @classmethod
    def fit(cls, inputs: np.ndarray, values: np.ndarray, *, kind: str, seed: int = 0,
            line_inputs: np.ndarray | None = None, free_inputs: np.ndarray | None = None,
            signed: Sequence[bool] | None = None, summed_inputs: np.ndarray | None = None,
            costs: Sequence[bool] | None = None) -> tuple[FeaturePrior, np.ndarray]:
        """From ``inputs`` (n, f; all known) and ``values`` (n, m; NaN = unknown): the prior and its
        out-of-sample mean scores for the training rows, (n, m) (NaN where the value is unknown).
        ``line_inputs``: the inputs (a mask) a line (``"auto"``'s, a ``"trend-forest"``'s) may follow; the
        forest reads them all. Default: any. ``free_inputs``: the free labels among them (parameters, MACs, a
        mask), through the best of which ``"auto"`` tries a line first, simpler than a line through any
        (from 16 records of NDS' NASNet, a line through the best of a hundred labels followed one by chance).
        ``signed`` (m,): the objectives that may take either sign (a constraint's value), never read in logs
        (:meth:`~nasrlm.priors.prior.NormalScores.fit`). ``summed_inputs`` (a mask; default: none): counts a
        latency adds up (:data:`~nasrlm.free_labels.SUMMED_LABELS`), which only a :class:`SumForest` reads:
        with ``"trend-forest"``, the model of a cost (``costs`` (m,), default none: what a device may add up
        over what it computes, lower the better: a latency, a constraint's value) where it predicts the
        training rows out of sample better than the trend forest does; the other models never see them."""
        if kind not in KINDS:
            raise ValueError(f"prior kind {kind!r}: expected one of {', '.join(KINDS)}")
        inputs, values = np.asarray(inputs, dtype=np.float64), np.asarray(values, dtype=np.float64)
        if not np.isfinite(inputs).all():
            raise ValueError("the prior's inputs must be known (finite) for every row")
        signed = [False] * values.shape[1] if signed is None else list(signed)
        costs = [False] * values.shape[1] if costs is None else list(costs)
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
                if costs[k] and np.ptp(full[known][:, summed], axis=0).any():
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
