"""``RLMSampler``: an Optuna sampler that asks the regression language model where to look next.

Each proposal round it (re)trains an :class:`~nasrlm.predictor.RLMPredictor` on the completed trials,
draws a few hundred to a few thousand candidate architectures, samples the model's predictive
distribution for each, and proposes the candidates with the largest *expected hypervolume improvement*
over the front found so far. Because the improvement is averaged over decoded samples, an uncertain
candidate that might land beyond the front scores above a confident one just behind it: the model's
uncertainty is what drives exploration.

The sampler works on Optuna's parameters, not on a space's internals: a candidate is a parameter dict,
and ``space.suggest(FixedTrial(params))`` turns it into the architecture whose ONNX text the model
reads. So any objective function that draws its architecture with ``space.suggest(trial)`` works,
whether it looks values up in a table, measures latency live, or trains the network.
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from nasrlm.data import Objective
from nasrlm.feature_prior import PRIOR_KINDS
from nasrlm.metrics import expected_hypervolume_improvement, median_reference, pareto_mask
from nasrlm.presets import SIZES
from nasrlm.prior import residual_weight
from search_spaces import SearchSpace

#: Network for the sampler's model: small enough to refit in seconds on two cores (the ``sampler`` size;
#: why no dropout: experiments/README.md, "Pareto search").
DEFAULT_MODEL = SIZES["sampler"]

#: Passes over the pre-training architectures. NB201, acc/pixel3 given 100 labels, d=64 model: no
#: pre-training Kendall 0.49/0.56; 3,000 archs x 3 epochs 0.55/0.63; all 15,625 x 3 epochs 0.56/0.66.
PRETRAIN_EPOCHS = 3
#: Share of the decoder's range kept at each end for objective values beyond those observed.
OBJECTIVE_HEADROOM = 0.1
#: Evaluated proposals of the model needed before its residual's weight is estimated from them.
MIN_CHECKED_PROPOSALS = 5
#: Trial system attribute holding the model's unweighted median prediction for a trial it proposed.
PREDICTED_ATTR = "nasrlm:predicted"

_ACTIVE = (TrialState.RUNNING, TrialState.WAITING)
#: A proposal's parameters and the model's unweighted median prediction for it (``None``: not needed).
_Proposal = tuple[dict[str, Any], list[float] | None]


class SpaceMismatchError(ValueError):
    """A trial's parameters do not describe an architecture of the sampler's space."""


class RLMSampler(BaseSampler):
    """Multi-objective Bayesian-optimisation-style sampler with an RLM surrogate.

    Args:
        space: the search space the objective draws from with ``space.suggest(trial)``.
        n_startup_trials: completed trials drawn at random (by ``independent_sampler``) before the
            model is first trained.
        proposals_per_fit: candidates proposed from one trained model (greedily, each one's predicted
            median added to the front before picking the next); more means fewer, cheaper refits.
        num_candidates: random candidates drawn once and scored every round (the pool; its free labels
            also pre-train the model), beside mutations of the current front. When the space's
            parameter grid is at most this large, every architecture is scored instead.
        fresh_candidates: random candidates drawn anew each round on top of the pool. A fixed pool
            caps what the search can find: on NAS-Bench-201 the front of a 2,000-draw pool holds only
            0.85-0.93 of the true front's hypervolume (acc/pixel3, seeds 0-4), 500 fresh ones per round
            lift that ceiling to 0.95 by 100 evaluations and 0.99 by 300. The search itself moved
            within its seed spread (HV ratio @300 0.685 -> 0.712, @100 0.632 -> 0.565).
        num_samples: decoded samples per candidate for the expected improvement.
        temperature: softmax temperature of those samples. Refitted on a few dozen trials the model is
            overconfident (its 50 % intervals hold 10-30 % of the truth on NB201); 2.5 calibrates
            them, but made the search worse there (HV ratio @100 0.43 against 0.64-0.71 at 1.0).
        prior: the prior the model learns the residual of (``RLMPredictor.fit``'s ``prior_kind``):
            ``"line"``, a straight line (in normal scores) through the free label that best explains
            the trials (:mod:`nasrlm.prior`); ``"forest"``, ``"trend-forest"``, ``"ridge"`` or
            ``"auto"``, a model of the free and graph labels (:mod:`nasrlm.feature_prior`; each
            candidate's graph labels are then computed too); ``None``: the model learns each
            objective whole, and ranks unseen architectures worse than the free label alone. The
            default, ``"trend-forest"``, found a better front than ``"line"`` on each of five seeds,
            and ``"forest"`` a worse one on average: a forest never predicts a candidate past the
            trials, so it rarely expects to extend the front (experiments/README.md, "Pareto search").
        weigh_residual: with the prior, scale the model's predicted residual (its median; the spread
            stays) by how well the model predicted its own evaluated proposals, in [0, 1] (see
            :meth:`residual_weights`). On NB201 the unweighted residual ranked the candidates below
            the prior alone at every round of a search (accuracy Kendall 0.41-0.48 vs 0.55-0.57),
            and the estimated weights were 0.02-0.2.
        pretrain_archs: architectures whose free labels (parameters, MACs) pre-train the model
            (:data:`PRETRAIN_EPOCHS` passes) before it sees any trial: the candidate pool first (its
            texts and free labels are needed anyway), topped up with random ones; 0 skips pre-training.
        fit_steps: optimiser steps per refit (the model is warm-started from the previous round).
        model: overrides of :class:`~nasrlm.model.RLMConfig` (default :data:`DEFAULT_MODEL`).
        base: a pre-trained base model directory (``nasrlm pretrain``): every refit starts from it
            (:meth:`RLMPredictor.from_base <nasrlm.predictor.RLMPredictor.from_base>`), with its size,
            tokenizer and tags, instead of a model learned from scratch; ``model`` and
            ``pretrain_archs`` then do not apply. Use a base that never saw the study's objectives on
            this space (``nasrlm pretrain --exclude``) when you measure how well the search does.
        device: where the model trains and samples: ``"cpu"`` or ``"cuda"``.
        seed: makes the whole search reproducible (same seed, same trials).
        independent_sampler: draws the start-up trials and any parameter outside the relative space.
        progress: show progress bars while the model trains and scores candidates.
    """

    def __init__(self, space: SearchSpace, *, n_startup_trials: int = 10, proposals_per_fit: int = 10,
                 num_candidates: int = 2000, fresh_candidates: int = 500, num_samples: int = 16,
                 temperature: float = 1.0, prior: str | None = "trend-forest", weigh_residual: bool = True,
                 pretrain_archs: int = 2000, fit_steps: int = 150,
                 model: dict[str, Any] | None = None, base: str | None = None, device: str = "cpu",
                 seed: int | None = None,
                 independent_sampler: BaseSampler | None = None, progress: bool = False) -> None:
        if n_startup_trials < 2:
            raise ValueError("n_startup_trials must be at least 2 (the model needs two examples)")
        for name, value in (("proposals_per_fit", proposals_per_fit), ("num_candidates", num_candidates),
                            ("num_samples", num_samples), ("fit_steps", fit_steps)):
            if value < 1:
                raise ValueError(f"{name} must be positive, got {value}")
        if fresh_candidates < 0:
            raise ValueError(f"fresh_candidates must be 0 or more, got {fresh_candidates}")
        self.space = space
        self.n_startup_trials = n_startup_trials
        self.proposals_per_fit = proposals_per_fit
        self.num_candidates = num_candidates
        self.fresh_candidates = fresh_candidates
        self.num_samples = num_samples
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature
        if prior is not None and prior not in PRIOR_KINDS:
            raise ValueError(f"prior {prior!r}: expected None or one of {', '.join(PRIOR_KINDS)}")
        self.prior = prior
        self.weigh_residual = weigh_residual
        self.pretrain_archs = pretrain_archs
        self.fit_steps = fit_steps
        if base is not None and model is not None:
            raise ValueError("give model or base, not both: a base model has its own size")
        self.model_options = dict(DEFAULT_MODEL if model is None else model)
        self.base = base
        self.device = device
        self._base_predictor: Any = None  # the base RLMPredictor, loaded with the first fit
        self.progress = progress
        self._seed = seed if seed is not None else int(np.random.SeedSequence().entropy % 2**31)
        self._rng = np.random.default_rng(self._seed)
        self._independent = independent_sampler or RandomSampler(seed=self._seed)
        self._lock = threading.RLock()
        self._predictor: Any = None  # RLMPredictor, created lazily (imports torch)
        self._objective_names: tuple[str, ...] = ()
        self._queue: list[_Proposal] = []
        self._rounds = 0
        self._ids: dict[tuple, str] = {}
        self._texts: dict[str, str] = {}
        self._free: dict[str, np.ndarray] = {}
        self._pool_params: list[dict[str, Any]] = []  # candidate parameters drawn once
        self._pool_ids: list[str] = []  # their distinct architectures, known once the model exists
        #: the residual weights the latest proposals were scored with (``None``: unweighted)
        self.last_residual_weights: dict[str, float] | None = None
        #: called after each refit with (completed trials used, seconds); the CLI's progress hook
        self.on_fit: Callable[[int, float], None] | None = None
        #: called with a line before each long step (pre-training, scoring); e.g. ``print``
        self.log: Callable[[str], None] = lambda line: None

    # --- optuna's sampler interface --------------------------------------------------------------
    def reseed_rng(self) -> None:
        """Optuna calls this in each worker process of ``n_jobs > 1`` so that workers draw differently."""
        self._rng = np.random.default_rng()
        self._independent.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """Every parameter any completed trial used (a union, so conditional spaces keep theirs)."""
        space: dict[str, BaseDistribution] = {}
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            for name, distribution in t.distributions.items():
                if not distribution.single():
                    space.setdefault(name, distribution)
        return space

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        with self._lock:
            complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                        if t.values is not None]
            if len(complete) < self.n_startup_trials:
                return {}
            taken = self._taken_ids(study, trial)
            for refit in (False, True):
                if refit:
                    if not self._pool_params:  # drawn once: their texts and free labels are computed once
                        self._pool_params = [_draw_params(search_space, self._rng)
                                             for _ in range(self.num_candidates)]
                    self._fit(study, complete)
                    self._queue = self._propose(study, complete, search_space, taken)
                while self._queue:
                    params, predicted = self._queue.pop(0)
                    if self.arch_id_of(params) in taken:
                        continue
                    if predicted is not None:  # kept with the trial, so a resumed search still has it
                        study._storage.set_trial_system_attr(trial._trial_id, PREDICTED_ATTR, predicted)
                    return {k: v for k, v in params.items() if k in search_space}
            return {}

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._independent.sample_independent(study, trial, param_name, param_distribution)

    # --- architectures behind parameters ---------------------------------------------------------
    def arch_id_of(self, params: dict[str, Any]) -> str:
        """The canonical id of the architecture ``space.suggest`` builds from ``params``."""
        key = tuple(sorted(params.items()))
        if key not in self._ids:
            try:
                arch = self.space.suggest(optuna.trial.FixedTrial(params))
            except ValueError as error:
                raise SpaceMismatchError(
                    f"parameters {sorted(params)} do not build an architecture of space "
                    f"{self.space.name!r} ({error}); RLMSampler needs the objective to draw its "
                    f"architecture with space.suggest(trial)") from error
            self._ids[key] = self.space.arch_id(arch)
        return self._ids[key]

    def text_of(self, arch_id: str) -> str:
        self._describe([arch_id])
        return self._texts[arch_id]

    def _describe(self, arch_ids: Sequence[str]) -> None:
        """Text and free labels of each new architecture, from one ONNX build (tracing torch is slow)."""
        from nasrlm.free_labels import texts_and_free_labels

        todo = [i for i in dict.fromkeys(arch_ids) if i not in self._free]
        if todo:
            texts, free = texts_and_free_labels(self.space, todo, graph=self._graph_prior,
                                                progress=self.progress and len(todo) > 1)
            self._texts.update(zip(todo, texts, strict=True))
            self._free.update(zip(todo, free, strict=True))

    def _taken_ids(self, study: Study, trial: FrozenTrial) -> set[str]:
        """Ids evaluated or being evaluated by other trials: never proposed again."""
        taken = set()
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, *_ACTIVE)):
            if t.number != trial.number and t.params:
                try:
                    taken.add(self.arch_id_of(t.params))
                except SpaceMismatchError:
                    if t.state == TrialState.COMPLETE:
                        raise
        return taken

    # --- the model --------------------------------------------------------------------------------
    @property
    def candidate_pool(self) -> list[str]:
        """Ids of the random candidates scored every round (drawn once; empty before the first fit)."""
        return list(self._pool_ids)

    @property
    def predictor(self) -> Any:
        """The latest trained :class:`~nasrlm.predictor.RLMPredictor` (``None`` before the first fit)."""
        return self._predictor

    def _objectives(self, study: Study) -> list[Objective]:
        names = study.metric_names or [f"objective_{k}" for k in range(len(study.directions))]
        return [Objective(name, "", "trial value", "optuna study", d == StudyDirection.MAXIMIZE)
                for name, d in zip(names, study.directions, strict=True)]

    def _create(self, study: Study) -> None:
        import torch

        from nasrlm.free_labels import FREE_OBJECTIVES
        from nasrlm.predictor import RLMPredictor
        from nasrlm.tokenizers import OnnxTokenizer
        from nasrlm.training import TrainConfig

        objectives = self._objectives(study)
        clash = {o.name for o in FREE_OBJECTIVES} & {o.name for o in objectives}
        if clash:
            raise ValueError(f"objective name(s) {sorted(clash)} clash with the free labels")
        self._objective_names = tuple(o.name for o in objectives)
        pool = self._pool_ids = list(dict.fromkeys(self.arch_id_of(p) for p in self._pool_params))
        if self.base is not None:
            self.log(f"starting from the base model {self.base}")
            self._base_predictor = RLMPredictor.from_base(self.base, objectives, space=self.space.name)
            self._predictor = copy.deepcopy(self._base_predictor).to(self.device)
            return
        self.log(f"learning the ONNX tokenizer on {len(pool):,} architectures")
        self._describe(pool)
        texts = [self.text_of(i) for i in pool]
        tokenizer = OnnxTokenizer.train(texts, seed=self._seed)
        torch.manual_seed(self._seed)  # the initial weights
        self._predictor = RLMPredictor.create(tokenizer, [*FREE_OBJECTIVES, *objectives],
                                              **self.model_options).to(self.device)
        if self.pretrain_archs:
            # many architectures seen a few times beat a few seen many times (same number of steps)
            ids = pool[: self.pretrain_archs]
            if len(ids) < self.pretrain_archs:
                extra = self.space.sample_ids(self.pretrain_archs - len(ids), seed=self._seed)
                ids = list(dict.fromkeys([*ids, *extra]))
            self.log(f"pre-training on free labels (parameters, MACs) of {len(ids):,} architectures")
            self._describe(ids)
            epochs = max(PRETRAIN_EPOCHS, math.ceil(2 * self.fit_steps / math.ceil(len(ids) / 32)))
            self._predictor.fit([self.text_of(i) for i in ids], self.free_labels_of(ids), self._free_names,
                                TrainConfig(max_epochs=epochs, validation_fraction=0.0, seed=self._seed,
                                            learning_rate=2e-3,  # the rate its search was measured with
                                            progress=self.progress))

    @property
    def _free_names(self) -> tuple[str, ...]:
        from nasrlm.free_labels import FREE_OBJECTIVES

        return tuple(o.name for o in FREE_OBJECTIVES)

    @property
    def _graph_prior(self) -> bool:
        """Whether the prior reads the graph labels (computed with the free labels, once per architecture)."""
        return self.prior not in (None, "line")

    def free_labels_of(self, arch_ids: Sequence[str]) -> np.ndarray:
        """Free labels (parameters, MACs) of ``arch_ids``, computed once per architecture."""
        return self._labels_of(arch_ids)[:, : len(self._free_names)]

    def _labels_of(self, arch_ids: Sequence[str]) -> np.ndarray:
        """Free labels, and with a graph prior the graph labels after them (rows of ``arch_ids``)."""
        from nasrlm.free_labels import ALL_FREE_OBJECTIVES

        self._describe(arch_ids)
        columns = len(ALL_FREE_OBJECTIVES) if self._graph_prior else len(self._free_names)
        return np.array([self._free[i] for i in arch_ids]).reshape(len(arch_ids), columns)

    def _graph_features(self, labels: np.ndarray) -> dict[str, np.ndarray]:
        """The graph labels a graph prior reads (not decoded), by name, from rows of :meth:`_labels_of`;
        empty for other priors."""
        from nasrlm.free_labels import ALL_FREE_OBJECTIVES

        if not self._graph_prior:
            return {}
        return {o.name: labels[:, k] for k, o in enumerate(ALL_FREE_OBJECTIVES) if k >= len(self._free_names)}

    def _fit(self, study: Study, complete: Sequence[FrozenTrial]) -> None:
        from nasrlm.training import TrainConfig

        start = time.perf_counter()
        if self._predictor is None:
            self._create(study)
        elif self._base_predictor is not None:  # every refit starts from the base, not from the latest round
            self._predictor = copy.deepcopy(self._base_predictor).to(self.device)
        rows: dict[str, Sequence[float]] = {}
        for t in complete:
            rows.setdefault(self.arch_id_of(t.params), t.values)
        ids = list(rows)
        # the free labels come first in the decode order: the model learns each objective given them
        labels = self._labels_of(ids)
        free = labels[:, : len(self._free_names)]
        targets = np.array([rows[i] for i in ids], dtype=np.float64)
        values = np.hstack([free, targets])
        batch = min(32, len(ids))
        epochs = max(1, math.ceil(self.fit_steps / math.ceil(len(ids) / batch)))
        config = TrainConfig(max_epochs=epochs, batch_size=batch, validation_fraction=0.0,
                             warmup_fraction=0.1, learning_rate=1e-3, seed=self._seed + self._rounds,
                             progress=self.progress)
        order = (*self._free_names, *self._objective_names)
        # free labels keep the scale they were pre-trained with (without pre-training, none was fitted on
        # more than the trials: refit it); objectives get room beyond the best value seen so far, or no
        # candidate could ever be predicted to extend the front. The prior's normal scores are taken
        # over the candidate pool, the population the proposals come from.
        refit = self._objective_names if (self.pretrain_archs or self._base_predictor is not None) else True
        prior: dict[str, Any] = {}
        if self.prior == "line":
            prior = {"prior_from": self._free_names, "prior_reference": self.free_labels_of(self._pool_ids),
                     "prior_kind": "line"}
        elif self.prior is not None:
            prior = {"prior_from": self._free_names, "prior_inputs": self._graph_features(labels),
                     "prior_kind": self.prior}
        self._predictor.fit([self.text_of(i) for i in ids], values, order, config,
                            refit_normalizers=refit, headroom=OBJECTIVE_HEADROOM, **prior)
        self._rounds += 1
        if self.on_fit is not None:
            self.on_fit(len(ids), time.perf_counter() - start)

    # --- proposals --------------------------------------------------------------------------------
    def _propose(self, study: Study, complete: Sequence[FrozenTrial],
                 search_space: dict[str, BaseDistribution], taken: set[str]) -> list[_Proposal]:
        """The next proposals, each with the model's unweighted median prediction (``None``: not needed)."""
        maximize = [d == StudyDirection.MAXIMIZE for d in study.directions]
        observed = np.array([t.values for t in complete], dtype=np.float64)
        front = [t.params for t, keep in zip(complete, pareto_mask(observed, maximize), strict=True) if keep]
        candidates = self._candidates(search_space, front, taken)
        if not candidates:
            return []
        ids = list(candidates)
        weights = self.last_residual_weights = self.residual_weights(complete)
        self.log(f"scoring {len(ids):,} candidates ({self.num_samples} decoded samples each)")
        samples = self.predict_samples(ids, seed=self._seed + self._rounds, residual_weight=weights)
        # measured from a typical architecture of the space, the median of the random start-up trials
        # (the convention hypervolume is reported with). A nadir would chase the front's far ends
        # (chance-level accuracy at minimal latency); the median of *all* trials tightens as the search
        # improves until, in five objectives, almost nothing is expected to beat it everywhere
        # (acquisition_probe.py, Kendall-0.55 surrogate: HV ratio @100 0.45 against 0.63 with this one)
        reference = median_reference(observed[: self.n_startup_trials])
        chosen: list[dict[str, Any]] = []
        medians = np.median(samples, axis=1)
        alive = np.ones(len(ids), dtype=bool)
        for _ in range(min(self.proposals_per_fit, len(ids))):
            ehvi = expected_hypervolume_improvement(samples[alive], observed, reference, maximize)
            if not np.any(ehvi > 0):  # the model expects nothing better: explore at random
                pick = int(self._rng.choice(np.flatnonzero(alive)))
            else:
                pick = int(np.flatnonzero(alive)[int(np.argmax(ehvi))])
            chosen.append(candidates[ids[pick]])
            alive[pick] = False
            observed = np.vstack([observed, medians[pick]])  # believe the median, then pick the next
        if not (self.weigh_residual and self._predictor.prior is not None):
            return [(params, None) for params in chosen]
        picked = [self.arch_id_of(p) for p in chosen]  # what the model says, unweighted
        raw = np.median(self.predict_samples(picked, seed=self._seed + self._rounds), axis=1)
        return [(params, [float(v) for v in row]) for params, row in zip(chosen, raw, strict=True)]

    def residual_weights(self, complete: Sequence[FrozenTrial]) -> dict[str, float] | None:
        """Per objective, how much of the model's predicted residual to keep (``None``: all of it).

        Over the evaluated trials the model proposed (their prediction is the trial's system
        attribute :data:`PREDICTED_ATTR`, so it survives a resumed study), the least-squares slope
        (through 0) of the residual that came true on the residual it predicted, both in the current
        prior's normal scores, clipped to [0, 1]. Proposals are picked for their optimistic
        predictions, so the slope also corrects that winner's curse. Until
        :data:`MIN_CHECKED_PROPOSALS` are in, 1.
        """
        prior = self._predictor.prior if self._predictor is not None else None
        if not self.weigh_residual or prior is None:
            return None
        rows: dict[str, tuple[Sequence[float], Sequence[float]]] = {}
        for t in complete:
            if PREDICTED_ATTR in t.system_attrs and len(t.system_attrs[PREDICTED_ATTR]) == len(t.values):
                rows.setdefault(self.arch_id_of(t.params), (t.values, t.system_attrs[PREDICTED_ATTR]))
        if len(rows) < MIN_CHECKED_PROPOSALS:
            return None
        ids = list(rows)
        free = self._labels_of(ids)  # the prior's inputs: free labels, then any graph labels
        actual = prior.residuals(free, np.array([rows[i][0] for i in ids], dtype=np.float64))
        predicted = prior.residuals(free, np.array([rows[i][1] for i in ids], dtype=np.float64))
        return {name: residual_weight(predicted[:, k], actual[:, k])
                for k, name in enumerate(self._predictor.prior_objectives)}

    def predict_samples(self, arch_ids: Sequence[str], *, num_samples: int | None = None, seed: int = 0,
                        residual_weight: dict[str, float] | None = None) -> np.ndarray:
        """Decoded samples (len(arch_ids), num_samples, objectives) from the latest model.

        ``residual_weight``: see :meth:`RLMPredictor.sample` and :meth:`residual_weights`.
        """
        if self._predictor is None:
            raise RuntimeError("the sampler has not trained a model yet")
        if residual_weight is None:  # the whole residual: the sampler weighs it by its own proposals
            residual_weight = dict.fromkeys(self._predictor.prior_objectives, 1.0)
        labels = self._labels_of(arch_ids)  # first: describes the new architectures in one batch
        texts = [self.text_of(i) for i in arch_ids]
        given = {name: labels[:, k] for k, name in enumerate(self._free_names)}
        return self._predictor.sample(texts, self._objective_names, given=given,
                                      features=self._graph_features(labels), batch_size=64, seed=seed,
                                      temperature=self.temperature, residual_weight=residual_weight,
                                      num_samples=num_samples or self.num_samples, progress=self.progress)

    def _candidates(self, search_space: dict[str, BaseDistribution], front: Sequence[dict[str, Any]],
                    taken: set[str]) -> dict[str, dict[str, Any]]:
        """Untried candidates by arch id: the whole grid if small, else the pool, fresh draws and mutants.

        The pool is drawn once (its free labels and texts are then computed once); the fresh candidates
        are drawn anew every round, so the search can reach beyond the pool; the mutants change one
        parameter of an architecture on the current front (every alternative of a categorical).
        """
        names = sorted(search_space)
        grid = _grid(search_space)
        draws: list[dict[str, Any]] = []
        if grid is not None and math.prod(len(v) for v in grid.values()) <= self.num_candidates:
            combos = itertools.product(*(grid[n] for n in names))
            draws = [dict(zip(names, combo, strict=True)) for combo in combos]
        else:
            draws = list(self._pool_params)
            draws += [_draw_params(search_space, self._rng) for _ in range(self.fresh_candidates)]
            for parent in front:
                for n in names:
                    alternatives = (grid[n] if grid is not None and len(grid[n]) <= 16
                                    else [_draw(search_space[n], self._rng) for _ in range(4)])
                    draws.extend({**parent, n: v} for v in alternatives if v != parent.get(n))
        out: dict[str, dict[str, Any]] = {}
        for params in draws:
            arch_id = self.arch_id_of(params)
            if arch_id not in taken:
                out.setdefault(arch_id, params)
        return out


def _grid(search_space: dict[str, BaseDistribution]) -> dict[str, list[Any]] | None:
    """All values of each parameter when every one is categorical or a small integer range."""
    grid: dict[str, list[Any]] = {}
    for name, d in search_space.items():
        if isinstance(d, CategoricalDistribution):
            grid[name] = list(d.choices)
        elif isinstance(d, IntDistribution) and not d.log and (d.high - d.low) // d.step < 1000:
            grid[name] = list(range(d.low, d.high + 1, d.step))
        else:
            return None
    return grid


def _draw_params(search_space: dict[str, BaseDistribution], rng: np.random.Generator) -> dict[str, Any]:
    """One random candidate: a uniform draw of every parameter, in name order (so a seed fixes it)."""
    return {name: _draw(d, rng) for name, d in sorted(search_space.items())}


def _draw(distribution: BaseDistribution, rng: np.random.Generator) -> Any:
    """One uniform draw from an Optuna distribution (log-uniform where it is logarithmic)."""
    if isinstance(distribution, CategoricalDistribution):
        return distribution.choices[int(rng.integers(len(distribution.choices)))]
    if isinstance(distribution, IntDistribution):
        if distribution.log:
            return int(round(math.exp(rng.uniform(math.log(distribution.low), math.log(distribution.high)))))
        return int(distribution.low + distribution.step * rng.integers((distribution.high - distribution.low)
                                                                        // distribution.step + 1))
    if isinstance(distribution, FloatDistribution):
        if distribution.log:
            return float(math.exp(rng.uniform(math.log(distribution.low), math.log(distribution.high))))
        if distribution.step is not None:
            steps = int(round((distribution.high - distribution.low) / distribution.step))
            return float(distribution.low + distribution.step * rng.integers(steps + 1))
        return float(rng.uniform(distribution.low, distribution.high))
    raise TypeError(f"RLMSampler cannot draw from {type(distribution).__name__}")
