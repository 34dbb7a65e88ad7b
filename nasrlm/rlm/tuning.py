"""A predictor on the architectures of a search space, named by id: fine-tuning it on labelled ones
(:func:`fine_tune`, ``nasrlm train``'s recipe) and predicting others (:func:`sample_archs`,
:func:`predict_archs`). Each architecture's text, free labels and graph labels come through the label cache
(:mod:`nasrlm.free_labels`), so that a prior's inputs are computed, never asked of the user
(:func:`known_labels`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from nasrlm.free_labels import (
    ALL_FREE_OBJECTIVES,
    FREE_LABEL_NAMES,
    FREE_OBJECTIVES,
    free_labels,
    texts_and_free_labels,
)
from nasrlm.priors.feature_prior import DEFAULT_PRIOR, check_prior_name
from nasrlm.priors.transfer import TRANSFER_LABEL
from nasrlm.rlm.augment import EQUIVALENT_READINGS, equivalent_readings, shared_by_equivalents
from nasrlm.rlm.calibration import CALIBRATION_FOLDS
from nasrlm.rlm.prediction import Prediction, summaries
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.recipes import READ_LATENCIES, TrainConfig, fine_tune_recipe
from nasrlm.rlm.training import TrainReport
from search_spaces import SearchSpace


def fine_tune(predictor: RLMPredictor, space: SearchSpace, arch_ids: Sequence[str], values: np.ndarray,
              names: Sequence[str], config: TrainConfig | None = None, *, prior: str | None = DEFAULT_PRIOR,
              inputs: Mapping[str, np.ndarray] | None = None,
              prior_mode: str | None = None, refit_normalizers: bool | Collection[str] = True,
              derived_from: Sequence[int] | None = None, progress: bool = False,
              calibration_folds: int = CALIBRATION_FOLDS, read_latencies: int = READ_LATENCIES
              ) -> TrainReport:
    """Train ``predictor`` on labelled architectures of ``space`` (``values``: columns ``names``).

    With its defaults it does what ``nasrlm train`` does with a base: an ``auto`` prior blended with the
    language model, which learns each objective from the text alone with its encoder frozen, by the recipe
    :func:`~nasrlm.rlm.recipes.fine_tune_recipe` names (``config=None``). ``prior_mode`` (``None``:
    ``"blend"`` with a feature prior, else ``"residual"``) and ``prior`` (one of
    :data:`~nasrlm.priors.feature_prior.PRIOR_KINDS`; ``None`` for none) are the fit's. With a residual prior,
    the free labels the model has tags for (and ``names`` does not hold) are decoded first, and the prior
    reads them, and the graph labels (:data:`~nasrlm.free_labels.GRAPH_OBJECTIVES`) for any prior but the
    line; blended, the model decodes no free label and the prior reads them beside the graph labels. A base's
    transfer forest, fitted on the source space most like this one, is one more input
    (:mod:`nasrlm.priors.transfer`). The spread is calibrated by ``calibration_folds`` cross-fits where the
    validation rows are too few.

    ``inputs`` (name: one value per architecture of ``arch_ids``) are columns known for every architecture,
    such as the latencies of devices already measured: a feature prior then reads them alone, in place of
    the free and graph labels and the transfer forest, and :func:`sample_archs` needs them of every
    architecture it predicts. Beside 19 measured devices, the 52 graph labels cost the prior's ranking of a
    new device from 20 measurements (experiments/README.md, "Who carries the prediction").

    Where ``names`` holds a latency the model has never decoded (a new device), the model first reads
    ``read_latencies`` of the latencies of ``space`` it does decode (:func:`latencies_to_read`); 0: none.
    """
    check_prior_name(prior)  # before the texts and labels are read
    names, lm = list(names), predictor.lm
    measured = _measured(inputs, len(arch_ids), names, prior)
    if prior_mode is None:
        prior_mode = "residual" if prior in (None, "line") else "blend"
    free = [k for k, o in enumerate(FREE_OBJECTIVES)
            if prior and prior_mode != "blend" and o.name not in names and o.name in lm.objectives
            and not measured]
    if prior == "line" and not free:
        raise ValueError("prior: the free labels are among the objectives trained, nothing is left to "
                         "predict from them")
    if config is None:
        recipe = fine_tune_recipe(alone=prior is None, blend=prior_mode == "blend")
        config = recipe.config(len(arch_ids), progress=progress)
    graph = prior not in (None, "line") and not measured
    texts, labels = texts_and_free_labels(space, arch_ids, graph=graph, progress=progress)
    free_names = [FREE_OBJECTIVES[k].name for k in free]
    read = dict(measured) or {o.name: labels[:, k] for k, o in enumerate(ALL_FREE_OBJECTIVES)
                              if graph and o.name not in free_names and o.name not in names}
    if graph and predictor.transfer is not None:  # from the source space most like this one, kept
        predictor.transfer = predictor.transfer.for_space(space)
        read[TRANSFER_LABEL] = predictor.transfer.predict(labels)
    values = np.asarray(values, dtype=np.float64).reshape(len(texts), -1)
    table = np.hstack([labels[:, free], values])
    # the line prior's free labels are given first, which a reading cannot precede (fit)
    reads = () if free_names else latencies_to_read(predictor, texts, values, names, read_latencies)
    predictor.spaces = tuple(sorted({*predictor.spaces, space.name}))
    return predictor.fit(texts, table, [*free_names, *names], config, refit_normalizers=refit_normalizers,
                         prior=prior, prior_from=tuple(free_names), prior_inputs=read,
                         prior_mode=prior_mode, derived_from=derived_from,
                         calibration_folds=calibration_folds, reads=reads)


def _measured(inputs: Mapping[str, np.ndarray] | None, rows: int, names: Sequence[str], prior: str | None
              ) -> dict[str, np.ndarray]:
    """:func:`fine_tune`'s ``inputs`` as float columns of ``rows`` values, checked."""
    measured = {name: np.asarray(column, dtype=np.float64).ravel() for name, column in (inputs or {}).items()}
    if measured and prior in (None, "line"):
        raise ValueError(f"inputs are read by a feature prior, not by prior={prior!r}")
    trained = [name for name in measured if name in names]
    if trained:
        raise ValueError(f"inputs {trained} are also columns to learn: a column is one or the other")
    for name, column in measured.items():
        if len(column) != rows:
            raise ValueError(f"inputs[{name!r}] has {len(column)} values for {rows} architectures")
        if not np.isfinite(column).all():
            raise ValueError(f"inputs[{name!r}] must be known (finite) for every architecture")
    return measured


def latencies_to_read(predictor: RLMPredictor, texts: Sequence[str], values: np.ndarray, names: Sequence[str],
                      k: int) -> tuple[str, ...]:
    """What :func:`fine_tune` reads first where ``names`` holds a latency the model has never decoded (a new
    device): of the latencies of its space it does decode (``space_columns`` in ms), the ``k`` whose greedy
    reading ranks ``values`` (columns ``names``) best in the new ones (``LanguageModel.choose_reads``; six or
    all of them rank no better and decode slower: experiments/README.md, "Who carries the prediction").
    None where there is no new latency, or ``k`` is 0."""
    names, lm = list(names), predictor.lm
    latency = {n for n, o in lm.objectives.items() if o.unit == "ms"}
    new = [j for j, n in enumerate(names) if n in latency and n not in lm.normalizers]
    known = [c for c in predictor.space_columns() if c in latency and c not in names]
    if not k or not new or not known:
        return ()
    return lm.choose_reads(texts, np.asarray(values)[:, new], known, k)


def known_labels(predictor: RLMPredictor, space: SearchSpace, arch_ids: Sequence[str],
                 inputs: Mapping[str, np.ndarray] | None = None) -> dict[str, dict[str, np.ndarray]]:
    """The labels the predictor's prior reads, computed from each architecture's graph or taken from
    ``inputs`` (the columns :func:`fine_tune` was given, one value per architecture of ``arch_ids``), as the
    keyword arguments of :meth:`RLMPredictor.sample`: ``{"given": decoded ones, "features": the others}``.
    Empty without a prior.
    """
    if predictor.prior_part is None:
        return {}
    read, inputs = predictor.prior_part.inputs, dict(inputs or {})
    names = [o.name for o in ALL_FREE_OBJECTIVES]
    unknown = [f for f in measured_inputs(predictor) if f not in inputs]
    if unknown:
        raise ValueError(f"this model's prior reads {unknown}, which are not free labels: give their "
                         "values of every architecture as inputs")
    graph = any(f not in FREE_LABEL_NAMES and f not in inputs for f in read)
    labels = free_labels(space, arch_ids, graph=graph)
    columns = {f: np.asarray(inputs[f], dtype=np.float64) if f in inputs
               else predictor.transfer.predict(labels) if f == TRANSFER_LABEL else labels[:, names.index(f)]
               for f in read}
    decoded = set(predictor.lm.decode_order)
    return {"given": {f: v for f, v in columns.items() if f in decoded},
            "features": {f: v for f, v in columns.items() if f not in decoded}}


def measured_inputs(predictor: RLMPredictor) -> tuple[str, ...]:
    """The columns the predictor's prior reads that no architecture's graph says (:func:`fine_tune`'s
    ``inputs``): :func:`sample_archs` needs their values."""
    if predictor.prior_part is None:
        return ()
    computed = {*(o.name for o in ALL_FREE_OBJECTIVES), *([TRANSFER_LABEL] if predictor.transfer else [])}
    return tuple(f for f in predictor.prior_part.inputs if f not in computed)


def sample_archs(predictor: RLMPredictor, space: SearchSpace, arch_ids: Sequence[str],
                 objectives: Sequence[str] | None = None, *, equivalents: int = EQUIVALENT_READINGS,
                 num_samples: int = 64, seed: int = 0, progress: bool = False,
                 inputs: Mapping[str, np.ndarray] | None = None, **options: Any) -> np.ndarray:
    """:meth:`RLMPredictor.sample` for architectures of ``space`` named by id, shape (len(arch_ids),
    num_samples, len(objectives)): their texts, and the labels a prior reads (:func:`known_labels`), come
    through the label cache; a prior fitted on ``inputs`` (:func:`fine_tune`) reads them of these
    architectures (one value each), and each is then read through its own text only (an equivalent
    architecture's inputs are not known: :func:`measured_inputs`).

    Each objective that equivalent architectures share (an accuracy:
    :func:`~nasrlm.rlm.augment.shared_by_equivalents`) is read through up to ``equivalents`` texts of the
    architecture's equivalence class, the same for every member
    (:func:`~nasrlm.rlm.augment.equivalent_readings`), ``num_samples`` divided among them (at least 2 each),
    and pooled around their median (:meth:`~nasrlm.rlm.augment.EquivalentReadings.pooled`): the text keeps
    operations whose result is never used, which the model does not see through (experiments/README.md, "Who
    carries the prediction"). Equivalent architectures asked in one call so get the same samples. The other
    objectives are read through the architecture's own text (their samples then no longer pair with the
    accuracy's draw by draw); ``equivalents`` of 1 or less reads everything so. ``options`` go to
    :meth:`RLMPredictor.sample`, except the per-text ones, which are computed here.
    """
    objectives = tuple(objectives or predictor.predicts)
    metadata = predictor.lm.objectives
    untrained = [o for o in objectives if o not in metadata]
    if untrained:
        raise ValueError(f"objective(s) {untrained} were never trained; trained: "
                         f"{predictor.lm.trained_objectives}")
    per_text = sorted({"given", "features", "residual_spread"} & set(options))
    if per_text:
        raise ValueError(f"sample_archs computes what it reads of each architecture itself: pass "
                         f"{', '.join(per_text)} to sample() with the texts instead")
    ids = list(arch_ids)
    shared = [k for k, name in enumerate(objectives) if shared_by_equivalents(metadata[name])]
    k = min(equivalents, num_samples // 2) if shared and not measured_inputs(predictor) else 1

    def draws(of: list[str], n: int) -> np.ndarray:  # with inputs, of is ids (trivial readings)
        texts = texts_and_free_labels(space, of, progress=progress)[0]
        return predictor.sample(texts, objectives, num_samples=n, seed=seed, progress=progress,
                                **known_labels(predictor, space, of, inputs), **options)

    readings = equivalent_readings(space, ids, k, seed=seed)
    return readings.pooled(ids, draws, num_samples, shared, len(objectives))


def predict_archs(predictor: RLMPredictor, space: SearchSpace, arch_ids: Sequence[str],
                  objectives: Sequence[str] | None = None, **options: Any) -> list[dict[str, Prediction]]:
    """:meth:`RLMPredictor.predict` for architectures of ``space`` named by id (see :func:`sample_archs`)."""
    objectives = tuple(objectives or predictor.predicts)
    samples = sample_archs(predictor, space, arch_ids, objectives, **options)
    return summaries(samples, objectives, predictor.lm.objectives)
