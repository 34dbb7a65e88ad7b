"""The RLMSampler's proposal rounds, and what its latest model predicts: what ``_ParzenEstimator`` and
``_sample`` are to Optuna's ``TPESampler``, here a base class of :class:`~nasrlm.search.RLMSampler`.

One round refits the surrogate on the completed trials (:meth:`ProposalRounds._fit`), draws and scores
the candidates, and picks those with the largest expected hypervolume improvement
(:meth:`ProposalRounds._propose`); the sampler decides when a round runs and hands its proposals out
(:mod:`~nasrlm.search.sampler._coordination`). The settings it reads are the sampler's public attributes, set
by ``RLMSampler.__init__`` (declared below): settings objects replaced on a sampler
(``dataclasses.replace``) apply from its next round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial

from nasrlm.metrics import median_reference
from nasrlm.search.sampler._acquisition import believed, greedy_ehvi
from nasrlm.search.sampler._arch_cache import ArchCache, SpaceMismatchError
from nasrlm.search.sampler._candidates import CandidateSettings, candidate_params
from nasrlm.search.sampler._coordination import Proposal
from nasrlm.search.sampler._proposals import ProposalSettings
from nasrlm.search.sampler._space_params import SpaceParams
from nasrlm.search.sampler._startup import is_accuracy_objective
from nasrlm.search.sampler._study import (
    PREDICTED_USER_ATTR,
    constraint_names,
    constraint_objectives,
    constraint_values,
    feasible,
    front_params,
    least_violating,
    objective_names,
    objectives,
)
from nasrlm.search.sampler._surrogate import FitSettings, PriorSurrogate, RLMSurrogate
from nasrlm.search.sampler._warm_start import EvidenceInputs, WarmSource, WarmStart

#: Evaluated proposals of the model needed before its residual's weight is estimated from them.
MIN_CHECKED_PROPOSALS = 5
#: Trials whose mutants are the candidates of a refining round while no trial meets the constraints yet:
#: those that miss them by least.
NEAREST_INFEASIBLE = 5


class ProposalRounds:
    """Proposal rounds and model queries of :class:`~nasrlm.search.RLMSampler` (its settings: there)."""

    # set by RLMSampler.__init__
    n_startup_trials: int
    proposal_settings: ProposalSettings
    fit_settings: FitSettings
    candidate_settings: CandidateSettings
    base: str | None
    device: str
    progress: bool
    cache: ArchCache
    last_residual_weights: dict[str, float] | None
    on_fit: Callable[[int, float], None] | None
    log: Callable[[str], None]
    _seed: int
    _rng: np.random.Generator
    _params: SpaceParams
    _surrogate: RLMSurrogate | PriorSurrogate | None
    _fits: int
    _pool_params: list[dict[str, Any]]
    _warned: set[str]
    _constraints: tuple[str, ...]
    _warm_sources: tuple[WarmSource, ...]
    _warm: WarmStart | None
    _evidence: EvidenceInputs | None
    _warm_params: dict[str, dict[str, Any]]
    _warm_reference: np.ndarray | None
    _params_of: Callable[[str], dict[str, Any]]

    # --- one round ---------------------------------------------------------------------------------
    def _fit(self, study: Study, complete: Sequence[FrozenTrial],
             search_space: dict[str, BaseDistribution]) -> None:
        """Refit the surrogate on the completed trials (the first time, create it and the candidate pool)."""
        start = time.perf_counter()
        names = constraint_names(complete)  # each one more column the model learns
        rows: dict[str, Sequence[float]] = {}
        for t, limits in zip(complete, constraint_values(complete, names), strict=True):
            rows.setdefault(self.arch_id_of(t.params), [*t.values, *limits])
        buildable = set(self._buildable(list(rows)))  # a table may hold values of one the space cannot build
        rows = {arch_id: values for arch_id, values in rows.items() if arch_id in buildable}
        trials = len(rows)  # what counts: the study's own evaluations
        warm = self._warm_start(study)
        if warm is not None:  # what the sources know of the objectives, where the study has not measured it
            for arch_id, values in warm.rows(objective_names(study), len(names)).items():
                rows.setdefault(arch_id, values)
        if self._surrogate is None:
            self._draw_pool(search_space)
            known = f" and {len(rows) - trials} known from the warm start" if len(rows) > trials else ""
            self.log(f"first model fit, on {trials} evaluations{known}: describing "
                     f"{len(self._pool_params):,} candidates and preparing the model (the slowest fit)")
        if names != self._constraints:
            if self._surrogate is not None:  # its columns are fixed: a new one is made
                self.log(f"the trials now set the constraints {', '.join(names) or 'none'}: a new model")
            self._surrogate, self._constraints = None, names
        values_of_constraints = constraint_objectives(names)  # either sign: never read in logs
        learned = [*objectives(study), *values_of_constraints]
        signed = [o.name for o in values_of_constraints]
        # decided before a model is made: a study resumed past prior_alone_after trains none
        p = self.proposal_settings
        prior_alone = p.surrogate == "prior" or (
            p.prior_alone_after is not None and trials >= p.prior_alone_after
            and p.prior not in (None, "line"))
        if prior_alone and not isinstance(self._surrogate, PriorSurrogate):
            if self._surrogate is not None:
                self.log(f"from {trials} evaluations on, the prior alone predicts (prior_alone_after)")
            self._surrogate = PriorSurrogate(self.cache, learned, prior=p.prior, seed=self._seed,
                                             evidence=self._evidence, signed=signed)
        elif self._surrogate is None:
            self._surrogate = RLMSurrogate(
                self.cache, learned, prior=p.prior, settings=self.fit_settings, base=self.base,
                device=self.device, seed=self._seed, progress=self.progress, log=self.log,
                evidence=self._evidence, signed=signed)
            self._surrogate.start(self.candidate_pool)
        self._surrogate.fit(list(rows), np.array(list(rows.values()), dtype=np.float64))
        self._fits += 1
        if self.on_fit is not None:
            self.on_fit(trials, time.perf_counter() - start)

    def _warm_start(self, study: Study) -> WarmStart | None:
        """The warm start's sources read against the study's objectives, once (each line of what was read
        logged), and their evidence as the prior's inputs; ``None`` without sources."""
        if not self._warm_sources:
            return None
        if self._warm is None:
            warm = WarmStart.of(self._warm_sources, objective_names(study))
            self._warm = warm.only(self._buildable(list(warm.arch_ids)))
            for line in self._warm.describe():
                self.log(line)
            self._warm_params = self._warm.params(self._params_of)
            self._evidence = EvidenceInputs(self._warm, self.cache.labels_of, self._seed, self.cache.columns)
        return self._warm

    def _propose(self, study: Study, complete: Sequence[FrozenTrial],
                 search_space: dict[str, BaseDistribution], evaluated: set[str],
                 pending: Sequence[str], count: int) -> list[Proposal]:
        """The next ``count`` proposals, each with the model's unweighted median prediction (``None``:
        not needed)."""
        p = self.proposal_settings
        maximize = [d == StudyDirection.MAXIMIZE for d in study.directions]
        m = len(maximize)
        observed = np.array([t.values for t in complete], dtype=np.float64)
        met = feasible(complete, self._constraints)  # with constraints, the front improved on is theirs
        front = (front_params(study, met) if met or not self._constraints else
                 [t.params for t in least_violating(complete, NEAREST_INFEASIBLE)])
        refine = any(start <= len(complete) and (stop is None or len(complete) < stop)
                     for start, stop in p.refine)
        candidates = self._candidates(search_space, front, evaluated | set(pending), refine=refine)
        if refine and not candidates:  # every mutant of the front is taken: look further
            refine = False
            candidates = self._candidates(search_space, front, evaluated | set(pending))
        warm = self._warm
        if warm is not None:  # what the sources measured is a candidate too, its known values as measured
            candidates.update(self._warm_candidates(search_space, evaluated | set(pending)))
        if not candidates:
            return []
        ids = list(candidates)
        weights = self.last_residual_weights = self.residual_weights(complete)
        seed = self._round_seed
        self.log(f"scoring {len(ids):,} candidates ({p.num_samples} decoded samples each)")
        samples = self.predict_samples(ids, seed=seed, residual_weight=weights)
        # measured from a typical architecture of the space, the median of the random start-up trials
        # (the convention hypervolume is reported with): a nadir would chase the front's far ends, and
        # the median of *all* trials tightens as the search improves until little can beat it
        reference = median_reference(observed[: self.n_startup_trials])
        drawn, meets = self._feasible_draws(samples, m)
        classes = self.cache.classes_of(ids)
        known = self._known_by_class(study, complete, classes)[:, None, :]
        drawn = np.where(np.isnan(known), drawn, known)  # an equivalent's accuracy, measured
        if warm is not None:
            drawn = self._as_measured(study, ids, drawn)  # no doubt where a source measured it
            reference = self._typical_reference(study, drawn, refine, seed, weights)
        if self._constraints:  # from the worst feasible trial (none yet: the worst trial): under a limit few
            # networks meet, those that do mostly lie below a typical network, which nothing feasible would
            # improve on; a network that meets it but is worse than any trial so far improves nothing
            numbers = {t.number for t in met}
            worst = observed[[t.number in numbers for t in complete]] if met else observed
            reference = np.where(maximize, worst.min(axis=0), worst.max(axis=0))
        observed = np.array([t.values for t in met], dtype=np.float64).reshape(len(met), m)
        if pending:  # believed at the model's median, as the proposals are (see believed)
            running = self.predict_samples(pending, seed=seed, residual_weight=weights)
            trusted, medians = believed(*self._feasible_draws(running, m))
            observed = np.vstack([observed, medians[trusted]])
        violation = (np.median(np.maximum(samples[..., m:], 0).sum(axis=-1), axis=1) if self._constraints
                     else None)  # how far each misses the constraints, as its median draw sees it
        picked = greedy_ehvi(drawn, observed, reference, maximize, count, self._rng, feasible=meets,
                             violation=violation, min_feasible_share=p.min_feasible_share,
                             classes=np.unique(classes, return_inverse=True)[1])
        chosen = [candidates[ids[k]] for k in picked]
        predictor = self._surrogate.predictor
        if not (p.weigh_residual and predictor is not None and predictor.prior_part is not None):
            return [(params, None) for params in chosen]
        raw = np.median(self.predict_samples([ids[k] for k in picked], seed=seed), axis=1)  # unweighted
        names = self._learned_names
        return [(params, {n: float(v) for n, v in zip(names, row, strict=True)})
                for params, row in zip(chosen, raw, strict=True)]

    def _typical_reference(self, study: Study, drawn: np.ndarray, refine: bool, seed: int,
                           weights: dict[str, float] | None) -> np.ndarray:
        """A warm start's reference point: its start-up trials are an earlier front, no typical architecture,
        so the candidates' predicted medians are, where the candidates are the random ones (``drawn``). A
        refining round's candidates are the front's mutants, whose median tightens as the front improves
        until nothing slower than the front's middle can improve it: it keeps the last random round's, or
        (a resumed study) the candidate pool's. Measured: experiments/README.md, "Warm start"."""
        if not refine:
            self._warm_reference = median_reference(np.median(drawn, axis=1))
        elif self._warm_reference is None:
            pool = self.candidate_pool
            samples, _ = self._feasible_draws(self.predict_samples(pool, seed=seed, residual_weight=weights),
                                              len(study.directions))
            samples = self._as_measured(study, pool, samples)
            self._warm_reference = median_reference(np.median(samples, axis=1))
        return self._warm_reference

    def _as_measured(self, study: Study, arch_ids: Sequence[str], drawn: np.ndarray) -> np.ndarray:
        """``drawn`` (len(arch_ids), samples, objectives) with every draw of what a warm start's source
        measured set to that value."""
        known = self._warm.known_values(arch_ids, objective_names(study))[:, None, :]
        return np.where(np.isnan(known), drawn, known)

    def _known_by_class(self, study: Study, complete: Sequence[FrozenTrial], classes: Sequence[str]
                        ) -> np.ndarray:
        """(len(classes), objectives): the accuracy the study measured for an architecture of each class (the
        mean where several), NaN where none was measured or the objective is no accuracy: equivalent
        architectures compute the same function, but their latency and size differ."""
        shared = np.array([is_accuracy_objective(o) for o in objectives(study)])
        measured: dict[str, list[Sequence[float]]] = {}
        for name, t in zip(self.cache.classes_of([self.arch_id_of(t.params) for t in complete]), complete,
                           strict=True):
            measured.setdefault(name, []).append(t.values)
        out = np.full((len(classes), len(shared)), np.nan)
        for k, name in enumerate(classes):
            if name in measured:
                out[k, shared] = np.mean(np.array(measured[name], dtype=np.float64)[:, shared], axis=0)
        return out

    def _warm_candidates(self, search_space: dict[str, BaseDistribution], taken: set[str]
                         ) -> dict[str, dict[str, Any]]:
        """The architectures the warm start's sources measured, by arch id, as the search space's parameters
        (none of ``taken``, none the space cannot propose)."""
        out = {}
        for arch_id, params in self._warm_params.items():
            params = {k: v for k, v in params.items() if k in search_space}
            if arch_id in taken:
                continue
            try:
                if self.arch_id_of(params) == arch_id:  # else it needs a parameter the search space lacks
                    out[arch_id] = params
            except SpaceMismatchError:
                continue
        return out

    def _feasible_draws(self, samples: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The model's ``samples`` (candidates, samples, ``m`` objectives then the constraints) as the
        objectives' draws and whether each draw meets every constraint (``None`` without constraints)."""
        return samples[..., :m], (samples[..., m:] <= 0).all(axis=-1) if self._constraints else None

    def _draw_pool(self, search_space: dict[str, BaseDistribution]) -> None:
        """The candidate pool's parameters, drawn once (by the first fit, or a start-up chosen from it)."""
        if not self._pool_params:
            self._pool_params = [self._params.draw(search_space, self._rng)
                                 for _ in range(self.candidate_settings.num_candidates)]

    def _candidates(self, search_space: dict[str, BaseDistribution], front: Sequence[dict[str, Any]],
                    taken: set[str], *, refine: bool = False) -> dict[str, dict[str, Any]]:
        """Candidates by arch id, each architecture once and none of ``taken`` (``refine``: the front's
        mutants alone, see :class:`CandidateSettings`)."""
        out: dict[str, dict[str, Any]] = {}
        draw = partial(self._params.draw, search_space)
        for params in candidate_params(search_space, self.candidate_settings, pool=self._pool_params,
                                       front=front, rng=self._rng, draw=draw, refine=refine):
            params = {k: v for k, v in params.items() if k in search_space}  # exactly what is proposed
            try:
                arch_id = self.arch_id_of(params)
            except SpaceMismatchError:  # needs a parameter the search space lacks: it could not be proposed
                continue
            if arch_id not in taken:
                out.setdefault(arch_id, params)
        return {arch_id: out[arch_id] for arch_id in self._buildable(list(out))}

    def _buildable(self, arch_ids: list[str]) -> list[str]:
        """Those of ``arch_ids`` the space builds; each it cannot is one warning line, once."""
        kept = self.cache.buildable(arch_ids)
        for arch_id in set(arch_ids) - set(kept) - self._warned:
            self._warned.add(arch_id)
            self.log(f"warning: the model leaves it out: {self.cache.failed[arch_id]}")
        return kept

    # --- the model --------------------------------------------------------------------------------
    @property
    def fits(self) -> int:
        """How many times this sampler has fitted its surrogate (each fit proposes ``proposals_per_fit``
        for each worker)."""
        return self._fits

    @property
    def _round_seed(self) -> int:
        return self._seed + self.fits

    @property
    def candidate_pool(self) -> list[str]:
        """Ids of the random candidates scored every round (drawn once; empty before the first fit)."""
        return self._buildable(list(dict.fromkeys(self.arch_id_of(p) for p in self._pool_params)))

    @property
    def predictor(self) -> Any:
        """The latest trained :class:`~nasrlm.rlm.predictor.RLMPredictor` (``None`` before the first fit, and
        with ``surrogate="prior"``)."""
        return self._surrogate.predictor if self._surrogate is not None else None

    def arch_id_of(self, params: dict[str, Any]) -> str:
        """The canonical id of the architecture ``space.suggest`` builds from ``params``."""
        return self.cache.arch_id_of(params)

    def free_labels_of(self, arch_ids: Sequence[str]) -> np.ndarray:
        """Free labels (parameters, MACs) of ``arch_ids``, computed once per architecture."""
        return self.cache.free_labels_of(arch_ids)

    def residual_weights(self, complete: Sequence[FrozenTrial]) -> dict[str, float] | None:
        """Per objective and constraint value, how much of the model's predicted residual to keep (``None``:
        all of it).

        Over the evaluated trials the model proposed (their prediction is the trial's user
        attribute :data:`PREDICTED_USER_ATTR`, so it survives a resumed study), the least-squares slope
        (through 0) of the residual that came true on the residual it predicted, both in the current
        prior's normal scores, clipped to [0, 1]. Proposals are picked for their optimistic
        predictions, so the slope also corrects that winner's curse. Until
        :data:`MIN_CHECKED_PROPOSALS` are in, 1.
        """
        if not self.proposal_settings.weigh_residual or self.predictor is None:
            return None  # nothing fitted yet, or no model (the prior alone): no residual to weigh
        names = self._learned_names  # the objectives, then each constraint's value, as proposals keep them
        rows: dict[str, tuple[Sequence[float], Sequence[float]]] = {}
        for t, limits in zip(complete, constraint_values(complete, self._constraints), strict=True):
            predicted = t.user_attrs.get(PREDICTED_USER_ATTR)
            if isinstance(predicted, dict) and set(predicted) == set(names):
                rows.setdefault(self.arch_id_of(t.params),
                                ([*t.values, *limits], [predicted[n] for n in names]))
        if len(rows) < MIN_CHECKED_PROPOSALS:
            return None
        actual, predicted = (np.array([r[k] for r in rows.values()], dtype=np.float64) for k in (0, 1))
        return self._surrogate.residual_weights(list(rows), actual, predicted)

    @property
    def _learned_names(self) -> list[str]:
        """What the surrogate learns and predicts, by the names it gives them: the study's objectives, then
        each constraint's value (``name#constraint``)."""
        return [o.name for o in self._surrogate.objectives]

    def predict_samples(self, arch_ids: Sequence[str], *, num_samples: int | None = None, seed: int = 0,
                        residual_weight: dict[str, float] | None = None) -> np.ndarray:
        """Decoded samples (len(arch_ids), num_samples, objectives) from the latest model.

        ``residual_weight``: see :meth:`RLMPredictor.sample` and :meth:`residual_weights`.
        """
        if self._surrogate is None:
            raise RuntimeError("the sampler has not trained a model yet")
        p = self.proposal_settings
        return self._surrogate.sample(arch_ids, num_samples=num_samples or p.num_samples, seed=seed,
                                      temperature=p.temperature, residual_weight=residual_weight,
                                      spread=p.spread_for(len(self._surrogate.objectives)
                                                          - len(self._constraints)))
