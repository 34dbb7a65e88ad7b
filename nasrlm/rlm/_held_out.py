"""How :meth:`RLMPredictor.fit <nasrlm.rlm.predictor.RLMPredictor.fit>` calibrates its spread on rows it
did not train on: its validation rows, or those of cross-fits (:func:`cross_fitted_spreads`), each fit on a
clone of the predictor as it stood before.

It samples and fits through whatever it is given that has the predictor's methods (:class:`Estimator`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from nasrlm.priors.prior import ranked_share, spans_decades
from nasrlm.rlm._residuals import PriorPart, blended, departures, on_departure_scale, prior_matrix
from nasrlm.rlm.calibration import Spread, fit_spread, spread_scale
from nasrlm.rlm.recipes import TrainConfig
from nasrlm.rlm.training import TrainReport

#: Samples per held-out row when a fit calibrates its spread
#: (:attr:`RLMPredictor.spreads <nasrlm.rlm.predictor.RLMPredictor.spreads>`).
CALIBRATION_SAMPLES = 32
#: Most trained rows whose :meth:`HeldOut.typical_width` compares one member with the pooled members
#: (:func:`first_member_spreads`): a median that more rows would barely move, at a fraction of the decoding.
WIDTH_ROWS = 200


class Estimator(Protocol):
    """What calibration asks of a predictor: to sample, to fit, and its prior's part."""

    prior_part: PriorPart | None

    def sample(self, texts: Sequence[str], objectives: Sequence[str] | None = None, **options: Any
               ) -> np.ndarray: ...

    def fit(self, texts: Sequence[str], values: np.ndarray, objectives: Sequence[str],
            config: TrainConfig | None = None, **options: Any) -> TrainReport: ...


@dataclass(frozen=True)
class HeldOut:
    """How :meth:`RLMPredictor.fit <nasrlm.rlm.predictor.RLMPredictor.fit>` samples rows it did not train
    on, to calibrate its spread: the labels its prior reads (``prior_from`` decoded first and given,
    ``prior_inputs`` as features) of those rows, and per objective whether its spread is taken in logs
    (:func:`~nasrlm.priors.prior.spans_decades` of its training values)."""

    prior_from: tuple[str, ...]
    prior_inputs: dict[str, np.ndarray]
    logs: Mapping[str, bool]

    @classmethod
    def of(cls, prior_from: tuple[str, ...], prior_inputs: dict[str, np.ndarray], values: np.ndarray,
           objectives: tuple[str, ...], signed: Collection[str] = ()) -> HeldOut:
        """From the training ``values`` (rows, ``objectives``): logs where they span decades, never for the
        ``signed`` objectives (either sign: a constraint's value)."""
        return cls(prior_from, prior_inputs, {name: name not in signed and spans_decades(values[:, k])
                                              for k, name in enumerate(objectives)})

    @property
    def inputs(self) -> tuple[str, ...]:
        """The prior's inputs (empty: no prior)."""
        return (*self.prior_from, *self.prior_inputs)

    def decoded(self, objectives: tuple[str, ...]) -> list[str]:
        return [o for o in objectives if o not in self.prior_from]

    def sample(self, predictor: Estimator, texts: Sequence[str], values: np.ndarray,
               objectives: tuple[str, ...], rows: np.ndarray, *, seed: int, model_alone: bool = False
               ) -> np.ndarray:
        """(rows, samples, decoded objectives) as decoded; ``values`` hold the given columns. With
        ``model_alone`` a blended model's prediction keeps all of its part (weight 1): the model's own."""
        given = {f: values[rows, objectives.index(f)] for f in self.prior_from}
        features = {f: np.asarray(v, dtype=np.float64)[rows] for f, v in self.prior_inputs.items()}
        decoded = self.decoded(objectives)
        predicted = predictor.prior_part.objectives if predictor.prior_part is not None else ()
        alone = [o for o in predicted if o in decoded] if model_alone else []
        return predictor.sample([texts[i] for i in rows], decoded, num_samples=CALIBRATION_SAMPLES,
                                given=given, features=features, seed=seed,
                                residual_weight=dict.fromkeys(alone, 1.0) or None)

    def fitted(self, draws: np.ndarray, truth: np.ndarray, objectives: tuple[str, ...]) -> dict[str, Spread]:
        """A spread per decoded objective with two known truths (``truth``: rows of every objective)."""
        spreads = {}
        for j, name in enumerate(self.decoded(objectives)):
            column = truth[:, objectives.index(name)]
            if np.count_nonzero(~np.isnan(column)) >= 2:
                spreads[name] = fit_spread(draws[..., j], column, log=self.logs[name])
        return spreads

    def spreads(self, predictor: Estimator, texts: Sequence[str], values: np.ndarray,
                objectives: tuple[str, ...], rows: np.ndarray, *, seed: int,
                truth: np.ndarray | None = None) -> dict[str, Spread]:
        """A spread per decoded objective from the samples of ``rows``, against ``truth`` (rows of every
        objective; by default ``values[rows]``)."""
        draws = self.sample(predictor, texts, values, objectives, rows, seed=seed)
        return self.fitted(draws, values[rows] if truth is None else truth, objectives)

    def rescaled(self, spreads: dict[str, Spread], objectives: tuple[str, ...], fitted: np.ndarray,
                 model: np.ndarray) -> dict[str, Spread]:
        """``spreads`` fitted to samples of :meth:`typical_width` ``fitted``, for a model whose own is
        ``model`` (both per decoded objective): each stretched by their ratio (1 where ``model``'s is 0)."""
        ratio = np.where(model > 0, fitted / np.where(model > 0, model, 1.0), 1.0)
        stretch = dict(zip(self.decoded(objectives), ratio.tolist(), strict=True))
        return {name: spread.stretched(stretch[name]) for name, spread in spreads.items()}

    def typical_width(self, draws: np.ndarray, objectives: tuple[str, ...]) -> np.ndarray:
        """Per decoded objective, the median over rows of the central-80 % width of ``draws`` (rows,
        samples, decoded objectives), in logs where its spread is: how sure a model is of the rows it
        trained on. A model fitted on all the rows is surer than the cross-fits on four fifths of them,
        and the stretch they fitted is corrected by the ratio."""
        scaled = np.stack([spread_scale(self.logs[name])[0](draws[..., j])
                           for j, name in enumerate(self.decoded(objectives))], axis=-1)
        low, high = np.quantile(scaled, [0.1, 0.9], axis=1)
        return np.median(high - low, axis=0)


def first_member_spreads(pool: Estimator, first: Estimator, held_out: HeldOut, texts: Sequence[str],
                         values: np.ndarray, objectives: tuple[str, ...], rows: np.ndarray,
                         trained: np.ndarray, *, seed: int, truth: np.ndarray | None = None
                         ) -> dict[str, Spread]:
    """:meth:`HeldOut.spreads` on ``rows``, the validation rows of the ``first`` of the ``pool``'s members,
    which the others trained on (:mod:`nasrlm.rlm._members`): fitted to the first member's own samples, then
    each stretched by the ratio of its :meth:`HeldOut.typical_width` to the pooled members' on rows every
    member ``trained`` on (the pool decodes wider than one member), at most :data:`WIDTH_ROWS` of them."""
    if len(trained) > WIDTH_ROWS:
        trained = np.sort(np.random.default_rng(seed).choice(trained, WIDTH_ROWS, replace=False))

    def width(predictor: Estimator) -> np.ndarray:
        draws = held_out.sample(predictor, texts, values, objectives, trained, seed=seed)
        return held_out.typical_width(draws, objectives)

    spreads = held_out.spreads(first, texts, values, objectives, rows, seed=seed, truth=truth)
    return held_out.rescaled(spreads, objectives, width(first), width(pool))


def cross_fitted_spreads(clone: Callable[[], Estimator], texts: Sequence[str], values: np.ndarray,
                         objectives: tuple[str, ...], config: TrainConfig, source: np.ndarray, folds: int,
                         held_out: HeldOut, options: dict
                         ) -> tuple[dict[str, Spread], np.ndarray, dict[str, float] | None]:
    """The spreads of :meth:`RLMPredictor.fit <nasrlm.rlm.predictor.RLMPredictor.fit>` from ``folds`` fits,
    each of a ``clone()`` of the predictor as it stands (its weights and normalisers) on the rows of the other
    folds, and the folds' mean :meth:`HeldOut.typical_width` of each decoded
    objective on their own training rows. An augmented row goes with the row it was made from.

    Blended (``options["prior_mode"] == "blend"``), also the model's weight per prior objective: the share
    whose blend of the model's median with each fold's prior ranks the held-out rows of all folds best
    (:func:`~nasrlm.priors.prior.ranked_share`, on the scale of :func:`~nasrlm.rlm._residuals.departures`);
    the spreads are then fitted to the held-out samples under those weights. Otherwise ``None``."""
    originals = np.flatnonzero(source < 0)
    fold = np.empty(len(texts), dtype=np.int64)
    fold[originals] = np.random.default_rng(config.seed).permutation(len(originals)) % folds
    fold[source >= 0] = fold[source[source >= 0]]
    # with a prior, whose residual is not weighed with this few rows, the folds' errors are the prior's
    # whatever the model learns, and the width ratio matches their spread to the final model's: the
    # decoder alone is trained, at a fraction of the time
    # one decoder a fold: the final fit's members pool a wider spread, which the width ratio takes in
    quiet = replace(config, progress=False, freeze_encoder=config.freeze_encoder or bool(held_out.inputs),
                    members=1)
    blend = options.get("prior_mode") == "blend"
    draws: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    widths: list[np.ndarray] = []
    priors: list[tuple[PriorPart, np.ndarray]] = []  # blended: each fold's prior, inputs of its held-out rows
    for k in range(folds):
        predictor = clone()  # each fold from the weights and normalisers the model has
        kept = np.flatnonzero(fold != k)
        position = np.full(len(texts), -1, dtype=np.int64)
        position[kept] = np.arange(len(kept))
        derived = np.where(source[kept] >= 0, position[np.maximum(source[kept], 0)], -1)
        predictor.fit([texts[i] for i in kept], values[kept], objectives, quiet, **options,
                      prior_from=held_out.prior_from,
                      prior_inputs={f: np.asarray(v)[kept] for f, v in held_out.prior_inputs.items()},
                      derived_from=derived if (source >= 0).any() else None, calibration_folds=0)
        test = np.flatnonzero((fold == k) & (source < 0))
        draws.append(held_out.sample(predictor, texts, values, objectives, test, seed=config.seed,
                                     model_alone=blend))
        rows.append(test)
        if blend:
            x = prior_matrix(values[test], objectives, held_out.prior_from,
                             {f: np.asarray(v)[test] for f, v in held_out.prior_inputs.items()})
            priors.append((predictor.prior_part, x))
        seen = kept[source[kept] < 0]
        widths.append(held_out.typical_width(held_out.sample(predictor, texts, values, objectives, seen,
                                                             seed=config.seed, model_alone=blend),
                                             objectives))
    shares = None
    if blend:  # the model's weights, and the held-out samples under them
        shares = _shares(priors, draws, rows, values, objectives, held_out)
        for (part, x), fold_draws in zip(priors, draws, strict=True):
            blended(part.prior, part.objectives, x, fold_draws, tuple(held_out.decoded(objectives)), shares)
    spreads = held_out.fitted(np.concatenate(draws), values[np.concatenate(rows)], objectives)
    return spreads, np.mean(widths, axis=0), shares


def _shares(priors: list[tuple[PriorPart, np.ndarray]], draws: list[np.ndarray], rows: list[np.ndarray],
            values: np.ndarray, objectives: tuple[str, ...], held_out: HeldOut) -> dict[str, float]:
    """:func:`cross_fitted_spreads`'s blend weights: per prior objective, over the folds' held-out rows."""
    decoded = tuple(held_out.decoded(objectives))
    centres, predicted, actual = [], [], []
    for (part, x), fold_draws, test in zip(priors, draws, rows, strict=True):
        prior, names = part.prior, part.objectives
        center = prior.values(x, np.zeros((len(x), len(names))))
        median = np.median(fold_draws, axis=1, keepdims=True)
        centres.append(on_departure_scale(prior, center))
        predicted.append(departures(prior, names, center, median, decoded)[:, 0])
        truth = values[test][:, [objectives.index(n) for n in names]]
        actual.append(departures(prior, names, center, truth[:, None, :], names)[:, 0])
    names = priors[0][0].objectives
    centres, predicted, actual = np.concatenate(centres), np.concatenate(predicted), np.concatenate(actual)
    return {name: ranked_share(centres[:, j], predicted[:, j], actual[:, j]) for j, name in enumerate(names)}
