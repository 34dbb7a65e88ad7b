"""The prior beside the language model, as a fitted value (:class:`PriorPart`): fitting it
(:func:`prior_matrix`, :meth:`PriorPart.fit`), weighing the model's part on held-out rows
(:meth:`PriorPart.weighed`), the truths its spread is calibrated on (:func:`out_of_sample_truth`), and adding
the prior back to what the model decodes (:func:`add_prior`, :func:`blended`).

Two ways to stand beside it (:data:`PRIOR_MODES`): ``"residual"``, the model learns only what the prior
leaves unexplained, and its decoded residual is added to the prior's mean; ``"blend"``, the model learns
each objective itself, and its prediction, read as a residual of the prior, is weighed the same way:
weight 1 is the model alone, 0 the prior alone.

What it samples, it samples through a function it is given (:data:`Sample`, ``RLMPredictor.sample``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from nasrlm.priors.feature_prior import FeaturePrior, check_prior_name
from nasrlm.priors.inputs import InputRoles
from nasrlm.priors.prior import FreeLabelPrior, ScoresPrior, ranked_share, residual_weight, stratified_normal

#: How a model stands beside its prior (module docstring).
PRIOR_MODES = ("residual", "blend")
#: The share of a residual kept when there were too few validation rows to weigh it: none. Fine-tuned
#: on 20 measurements of an unseen device, the residual pulled a ridge prior's ranking down (see
#: experiments/README.md, "Transfer from a pre-trained base model"); it must prove itself first.
UNVALIDATED_RESIDUAL_WEIGHT = 0.0
#: How the prior's part samples the predictor it stands in: ``RLMPredictor.sample``'s signature,
#: ``(texts, objectives, **options) -> (texts, samples, objectives)``.
Sample = Callable[..., np.ndarray]


@dataclass(frozen=True)
class PriorPart:
    """A fitted prior beside the language model: the labels it reads (:attr:`inputs`, those the model decodes
    first), the objectives it predicts, how the model stands beside it (:data:`PRIOR_MODES`), the share of the
    model's part that held-out rows supported (:attr:`weights`) and the prior's own error (:attr:`errors`)."""

    prior: ScoresPrior  # FreeLabelPrior or FeaturePrior
    inputs: tuple[str, ...]
    objectives: tuple[str, ...]
    mode: str = "residual"
    #: per objective, the share of the model's residual (blended: of the way its prediction departs from the
    #: prior's) that sampling keeps by default (see :func:`~nasrlm.priors.prior.residual_weight`)
    weights: Mapping[str, float] = field(default_factory=dict)
    #: per objective, the root-mean-square residual of the fit's training rows in normal scores: the
    #: prior's error on architectures it did not see (out of bag for a feature prior; in sample for the
    #: line prior, which has two parameters)
    errors: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def fit(cls, values: np.ndarray, objectives: tuple[str, ...], prior_from: tuple[str, ...],
            prior_inputs: Mapping[str, np.ndarray], *, kind: str, reference: np.ndarray | None, mode: str,
            original: np.ndarray, signed: Collection[str] = (), costs: Collection[str] = ()
            ) -> tuple[PriorPart, np.ndarray, np.ndarray]:
        """The prior of ``RLMPredictor.fit`` fitted on the ``original`` rows, what the model learns beside it
        (``values`` with the prior's objectives as residuals, or as they are blended) and the prior's inputs
        of every row (:func:`prior_matrix`)."""
        inputs = (*prior_from, *prior_inputs)
        x = prior_matrix(values, objectives, prior_from, dict(prior_inputs))
        prior, predicted, residuals = fit_prior(x, values, objectives, prior_from, kind, reference, original,
                                                InputRoles.of(inputs), signed=signed, costs=costs)
        rows = residuals[original][:, [objectives.index(name) for name in predicted]]
        errors = {name: float(np.sqrt(np.nanmean(rows[:, j] ** 2))) for j, name in enumerate(predicted)}
        return cls(prior, inputs, predicted, mode, {}, errors), residuals, x

    def learned(self, values: np.ndarray, residuals: np.ndarray) -> np.ndarray:
        """What the model learns of rows of ``values`` whose residuals of the prior are ``residuals``."""
        return values if self.mode == "blend" else residuals

    def weighed(self, sample: Sample, texts: Sequence[str], x: np.ndarray, raw: np.ndarray,
                residuals: np.ndarray, objectives: tuple[str, ...], rows: Sequence[int] | None,
                held_out: Mapping[str, float] | None = None) -> PriorPart:
        """This part with the model's :attr:`weights`: measured on the validation ``rows`` where there are
        enough (``sample`` draws from the fitted model), else those the cross-fits measured (``held_out``),
        else :data:`UNVALIDATED_RESIDUAL_WEIGHT`."""
        if rows is not None:
            weights = (blend_weights(self, sample, texts, x, raw, residuals, objectives, rows)
                       if self.mode == "blend" else
                       validated_weights(self, sample, texts, x, residuals, objectives, rows))
        elif held_out is not None:
            weights = dict(held_out)
        else:
            weights = dict.fromkeys(self.objectives, UNVALIDATED_RESIDUAL_WEIGHT)
        return replace(self, weights=weights)


def check_prior(prior: str | None, mode: str, prior_from: Sequence[str], inputs: Sequence[str]) -> None:
    """What ``RLMPredictor.fit`` refuses of ``prior`` and ``prior_mode``."""
    check_prior_name(prior)
    if (prior is None) != (not inputs):
        raise ValueError("prior_from and prior_inputs are what a prior reads: give a prior and its inputs, "
                         f"or neither (prior={prior!r}, inputs {list(inputs)})")
    if mode not in PRIOR_MODES:
        raise ValueError(f"prior_mode {mode!r}: expected one of {', '.join(PRIOR_MODES)}")
    if mode == "blend" and (prior_from or not inputs or prior == "line"):
        raise ValueError("prior_mode='blend' needs a feature prior (a prior but 'line') whose inputs "
                         "are all prior_inputs: the model decodes none of them")


def prior_matrix(values: np.ndarray, objectives: tuple[str, ...], prior_from: tuple[str, ...],
                  prior_inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The prior's inputs, (n, len(prior_from) + len(prior_inputs)), checked."""
    absent = [f for f in prior_from if f not in objectives]
    if absent:
        raise ValueError(f"prior_from: {absent} are not among the objectives trained "
                         f"({list(objectives)})")
    trained = [f for f in prior_inputs if f in objectives]
    if trained:
        raise ValueError(f"prior_inputs: {trained} are objectives trained; name them in prior_from")
    columns = [values[:, objectives.index(f)] for f in prior_from]
    for name, column in prior_inputs.items():
        column = np.asarray(column, dtype=np.float64).ravel()
        if len(column) != len(values):
            raise ValueError(f"prior_inputs[{name!r}] has {len(column)} values for {len(values)} rows")
        columns.append(column)
    x = np.column_stack(columns)
    if not np.isfinite(x).all():
        names = [*prior_from, *prior_inputs]
        bad = [names[j] for j in np.flatnonzero(~np.isfinite(x).all(axis=0))]
        raise ValueError(f"the prior's inputs {bad} must be known for every row")
    return x


def fit_prior(x: np.ndarray, values: np.ndarray, objectives: tuple[str, ...],
               prior_from: tuple[str, ...], kind: str, reference: np.ndarray | None, original: np.ndarray,
               roles: InputRoles, signed: Collection[str] = (), costs: Collection[str] = ()
               ) -> tuple[ScoresPrior, tuple[str, ...], np.ndarray]:
    """The prior (fitted on the ``original`` rows), the objectives it predicts, and ``values`` with
    those as residuals: for a feature prior, the training rows' out-of-sample residuals.
    ``roles``: what each input is to a feature prior (:class:`~nasrlm.priors.inputs.InputRoles`);
    ``signed``: objectives that may take either sign, never read in logs (a constraint's value:
    :meth:`~nasrlm.priors.prior.NormalScores.fit`); ``costs``: objectives lower the better, which may be
    sums over what the device computes."""
    rest = [k for k in range(len(objectives)) if objectives[k] not in prior_from]
    either_sign = [objectives[k] in signed for k in rest]
    if not rest:
        raise ValueError("prior_from names every objective: nothing is left to predict from them")
    values = values.copy()
    if kind == "line":
        reference = x[original] if reference is None else np.asarray(reference, dtype=np.float64)
        if reference.ndim != 2 or reference.shape[1] != x.shape[1] or not len(reference):
            raise ValueError(f"prior_reference must be rows of the prior's {x.shape[1]} inputs, "
                             f"got shape {reference.shape}")
        prior = FreeLabelPrior.fit(x[original], values[original][:, rest], reference, signed=either_sign)
        values[:, rest] = prior.residuals(x, values[:, rest])
    else:
        if reference is not None:
            raise ValueError("prior_reference applies to the line prior (prior='line') only")
        prior, held_out = FeaturePrior.fit(x[original], values[original][:, rest], kind=kind,
                                           **roles.keywords(), signed=either_sign,
                                           costs=[objectives[k] in costs for k in rest])
        residuals = prior.residuals(x, values[:, rest])
        residuals[original] += prior.mean(x[original]) - held_out
        values[:, rest] = residuals
    return prior, tuple(objectives[k] for k in rest), values


def validated_weights(part: PriorPart, sample: Sample, texts: Sequence[str], x: np.ndarray,
                      values: np.ndarray, objectives: tuple[str, ...], rows: Sequence[int]
                      ) -> dict[str, float]:
    """Residual weight per prior objective from the model's median residual on held-out ``rows``
    (``x``: the prior's inputs; ``values`` holds the residuals the model was trained on)."""
    given = {f: values[rows, objectives.index(f)] for f in part.inputs if f in objectives}
    features = {f: x[rows, j] for j, f in enumerate(part.inputs)}
    predicted = sample([texts[i] for i in rows], part.objectives, num_samples=16, given=given,
                       features=features, residual_weight=dict.fromkeys(part.objectives, 1.0))
    median = part.prior.residuals(x[rows], np.median(predicted, axis=1))
    return {name: residual_weight(median[:, j], values[rows, objectives.index(name)])
            for j, name in enumerate(part.objectives)}


def out_of_sample_truth(prior: ScoresPrior, x: np.ndarray, values: np.ndarray, raw: np.ndarray,
                        objectives: tuple[str, ...], predicted: tuple[str, ...], rows: np.ndarray
                        ) -> np.ndarray:
    """``raw[rows]`` with each of the prior's objectives moved to where the prior, fitted on these rows too,
    would put a true value as far off as the prior out of sample is: its own mean plus the out-of-sample
    residual in ``values`` (what :func:`fit_prior` leaves there).

    A spread calibrated on rows the prior was fitted on compares the samples with truths the prior has
    learned by heart, and comes out too narrow for new rows; against these truths, each row's error is
    the one a row the prior never saw would have.
    """
    truth = np.array(raw[rows], dtype=np.float64)
    columns = [objectives.index(name) for name in predicted]
    residuals = values[rows][:, columns]
    known = ~np.isnan(residuals)
    moved = prior.values(x[rows], np.where(known, residuals, 0.0))
    truth[:, columns] = np.where(known, moved, np.nan)
    return truth


def blend_weights(part: PriorPart, sample: Sample, texts: Sequence[str], x: np.ndarray, raw: np.ndarray,
                  residuals: np.ndarray, objectives: tuple[str, ...], rows: Sequence[int]
                  ) -> dict[str, float]:
    """The model's weight per prior objective in ``"blend"`` mode: the share whose blend of its median
    prediction of the held-out ``rows`` with the prior's out-of-sample prediction of them ranks their values
    best (:func:`~nasrlm.priors.prior.ranked_share`, on the scale of :func:`departures`; ``raw``: the
    values; ``residuals``: the out-of-sample residuals :func:`fit_prior` left, whose prior saw these rows
    too)."""
    prior, names = part.prior, part.objectives
    features = {f: x[rows, j] for j, f in enumerate(part.inputs)}
    draws = sample([texts[i] for i in rows], names, num_samples=16, features=features,
                   residual_weight=dict.fromkeys(names, 1.0))
    columns = [objectives.index(name) for name in names]
    truth = raw[rows][:, columns]
    out_of_sample = prior.scores(truth) - residuals[rows][:, columns]  # the prior's scores of these rows
    center = prior.values(x[rows], out_of_sample - prior.mean(x[rows]))
    predicted = departures(prior, names, center, np.median(draws, axis=1, keepdims=True), names)[:, 0]
    actual = departures(prior, names, center, truth[:, None, :], names)[:, 0]
    scaled = on_departure_scale(prior, center)
    return {name: ranked_share(scaled[:, j], predicted[:, j], actual[:, j]) for j, name in enumerate(names)}


def departures(prior: ScoresPrior, prior_objectives: tuple[str, ...], center: np.ndarray, out: np.ndarray,
               objectives: tuple[str, ...]) -> np.ndarray:
    """(n, samples, len(prior_objectives)): how far the values in ``out`` (texts, samples, ``objectives``)
    lie from the prior's ``center`` (n, len(prior_objectives)), in logs where the prior's training values
    were all positive (latencies, accuracies), else in values; 0 for an objective not in ``objectives``.

    The scale ``"blend"`` mode weighs the model on: the prior's normal scores, an empirical CDF of a few
    dozen values, squeeze every prediction between two far-apart training values into one short step
    (a third of NB201's cells beside one of 20 measured latencies), and any weight below 1 then let the
    prior's mean reorder them."""
    block = np.zeros((*out.shape[:2], len(prior_objectives)))
    for j, name in enumerate(prior_objectives):
        if name in objectives:
            scale, _ = _scale(prior, j)
            block[..., j] = scale(out[..., objectives.index(name)]) - scale(center[:, None, j])
    return block


def on_departure_scale(prior: ScoresPrior, values: np.ndarray) -> np.ndarray:
    """``values`` (n, the prior's objectives) on :func:`departures`' scale: what a blend's share is chosen
    on (:func:`~nasrlm.priors.prior.ranked_share`)."""
    return np.stack([_scale(prior, j)[0](values[:, j]) for j in range(values.shape[1])], axis=1)


def _scale(prior: ScoresPrior, j: int) -> tuple[Callable[[np.ndarray], np.ndarray],
                                                Callable[[np.ndarray], np.ndarray]]:
    """:func:`departures`' scale of the prior's objective ``j`` and its inverse: log or none."""
    if prior.objectives[j].knots[0] > 0:
        tiny = 1e-6 * prior.objectives[j].knots[0]  # a ridge prior can map a far-off row below zero
        return (lambda v: np.log(np.maximum(v, tiny))), np.exp
    return (lambda v: np.asarray(v, dtype=np.float64)), (lambda v: v)


def blended(prior: ScoresPrior, prior_objectives: tuple[str, ...], x: np.ndarray, out: np.ndarray,
            objectives: tuple[str, ...], weights: Mapping[str, float]) -> None:
    """A ``"blend"`` model's decoded values in ``out`` (texts, samples, ``objectives``) moved, in place,
    toward the prior's prediction: each text's samples of each prior objective move together, on the
    scale of :func:`departures`, until their median lies its weight's share (``weights``; 1 where absent)
    of the way from the prior's mean to the model's median: 0, the prior's mean; 1, the model alone."""
    center = prior.values(x, np.zeros((len(x), len(prior_objectives))))
    for j, name in enumerate(prior_objectives):
        if name not in objectives:
            continue
        k = objectives.index(name)
        scale, back = _scale(prior, j)
        median = np.median(out[..., k], axis=1, keepdims=True)  # of the values: exact for even counts
        shift = (weights.get(name, 1.0) - 1.0) * (scale(median) - scale(center[:, None, j]))
        out[..., k] = back(scale(out[..., k]) + shift)


def residual_block(out: np.ndarray, prior_objectives: tuple[str, ...], objectives: tuple[str, ...]
                   ) -> np.ndarray:
    """(n, samples, len(prior_objectives)) residual samples; objectives not asked for stay 0."""
    block = np.zeros((*out.shape[:2], len(prior_objectives)))
    for j, name in enumerate(prior_objectives):
        if name in objectives:
            block[..., j] = out[..., objectives.index(name)]
    return block


def add_prior(part: PriorPart | None, out: np.ndarray, objectives: tuple[str, ...],
              inputs: Mapping[str, np.ndarray], residual: Sequence[int], *,
              residual_weight: dict[str, float] | None, residual_spread: dict[str, float] | None,
              seed: int) -> None:
    """The prior's part of :meth:`RLMPredictor.sample <nasrlm.rlm.predictor.RLMPredictor.sample>`, which
    says what ``residual_weight`` and ``residual_spread`` do: what the model decoded in ``out`` (texts,
    samples, ``objectives``; columns ``residual`` of them, the prior's) becomes values, in place: decoded
    residuals with the prior's mean added back, or a blended model's values moved toward the prior's
    (:func:`blended`). ``inputs``: the prior's inputs, by name. Refuses options for objectives that are
    not the prior's in this call, prior or none, and ``residual_spread`` for a blended model."""
    predicted = part.objectives if part is not None else ()
    for option, named in (("residual_weight", residual_weight), ("residual_spread", residual_spread)):
        unknown = [o for o in named or {} if o not in predicted or o not in objectives]
        if unknown:
            raise ValueError(f"{option} for {unknown}: not residual objectives of this call "
                             f"(residual objectives: {list(predicted)})")
    if residual_spread and part is not None and part.mode == "blend":
        raise ValueError("residual_spread applies to a model that learns the prior's residual, not to a "
                         "blended one")
    if not residual or part is None:
        return
    x = np.stack([np.asarray(inputs[f], dtype=np.float64).reshape(len(out)) for f in part.inputs], axis=1)
    weights = {**part.weights, **(residual_weight or {})}
    if part.mode == "blend":
        blended(part.prior, part.objectives, x, out, objectives, weights)
        return
    block = residual_block(out, part.objectives, objectives)
    for name, weight in weights.items():
        if name not in objectives or weight == 1.0:
            continue
        j = part.objectives.index(name)
        median = np.median(block[..., j], axis=1, keepdims=True)
        block[..., j] += (weight - 1.0) * median
    if residual_spread:
        rng = np.random.default_rng(seed)  # the median stays put: see stratified_normal
        for name, spread in residual_spread.items():
            j = part.objectives.index(name)
            spread = np.asarray(spread, dtype=np.float64).reshape(-1, 1)  # one for all, or per text
            if len(spread) not in (1, len(out)):
                raise ValueError(f"residual_spread for {name!r}: one number or one per text "
                                 f"({len(out)}), got {len(spread)}")
            median = np.median(block[..., j], axis=1, keepdims=True)
            block[..., j] = median + spread * stratified_normal(len(out), out.shape[1], rng)
    values = part.prior.values(x, block)
    for k in residual:
        out[..., k] = values[..., part.objectives.index(objectives[k])]
