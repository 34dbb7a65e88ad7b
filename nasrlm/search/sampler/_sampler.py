"""``RLMSampler``: an Optuna sampler that asks the regression language model where to look next.

Each proposal round it refits its surrogate (:class:`~nasrlm.search.sampler._surrogate.RLMSurrogate`) on the
completed trials, draws candidate architectures (:mod:`~nasrlm.search.sampler._candidates`), samples the
model's predictive distribution for each, and proposes the candidates with the largest *expected
hypervolume improvement* over the front found so far (:func:`~nasrlm.search.sampler.greedy_ehvi`).
Because the improvement is averaged over decoded samples, an uncertain candidate that might land
beyond the front scores above a confident one just behind it: the model's uncertainty is what drives
exploration. After ``prior_alone_after`` trials the surrogate is the model's prior alone
(:class:`~nasrlm.search.sampler._surrogate.PriorSurrogate`), which searched as well from there at a fraction
of the cost. In the ``refine`` ranges of completed trials the candidates are the front's mutants alone,
so the search refines the front it found: by default from 50 to 100 trials and again from 150 on, with
the whole space scored once more in between (refining from 50 to the end found less by 300).

The sampler works on Optuna's parameters, not on a space's internals: a candidate is a parameter dict,
and ``space.suggest(FixedTrial(params))`` turns it into the architecture whose ONNX text the model
reads. So any objective function that draws its architecture with ``space.suggest(trial)`` works,
whether it looks values up in a table, measures latency live, or trains the network.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial

from nasrlm.free_labels import DEFAULT_CACHE
from nasrlm.label_cache import LabelCache
from nasrlm.rlm.bases import SHIPPED
from nasrlm.search.sampler._arch_cache import ArchCache, SpaceMismatchError
from nasrlm.search.sampler._candidates import CandidateSettings
from nasrlm.search.sampler._coordination import Workers, is_enqueued
from nasrlm.search.sampler._numbered_draws import NumberedDraws
from nasrlm.search.sampler._proposals import ProposalSettings
from nasrlm.search.sampler._rounds import MIN_CHECKED_PROPOSALS, ProposalRounds
from nasrlm.search.sampler._space_params import SpaceParams
from nasrlm.search.sampler._startup import STARTUPS, startup_picks, startup_transfer
from nasrlm.search.sampler._study import PREDICTED_USER_ATTR, completed, front_params, objectives
from nasrlm.search.sampler._surrogate import DEFAULT_MODEL, FitSettings, PriorSurrogate, RLMSurrogate
from nasrlm.search.sampler._warm_start import EvidenceInputs, Source, WarmStart, read_source
from search_spaces import SearchSpace

_logger = logging.getLogger("nasrlm.search")

__all__ = ["MIN_CHECKED_PROPOSALS", "PREDICTED_USER_ATTR", "RLMSampler", "SpaceMismatchError"]


class RLMSampler(ProposalRounds, BaseSampler):
    """Multi-objective Bayesian-optimisation-style sampler with an RLM surrogate.

    The keywords set per study what is searched, where the model runs and how reproducibly; the recipe
    of the search is three settings objects, each field documented there and checked as it is made
    (defaults measured: experiments/README.md, "Pareto search"). By name, as on the command line:
    :func:`~nasrlm.search.sampler_keywords`.

    Args:
        space: the search space the objective draws from with ``space.suggest(trial)``.
        n_startup_trials: completed trials before the model is first trained.
        startup: how they are chosen: ``"random"``, trial ``n`` the ``n``-th random draw (see ``seed``);
            ``"transfer"``, the first at random, the others one per stratum of the candidate pool's MACs, in
            each the candidate that ``base``'s (with no base, the shipped base's) transfer forest of *another*
            space's accuracy ranks best (:mod:`~nasrlm.search.sampler._startup`), all chosen at the second
            trial (and handed out as proposals are); at random still where the study has no accuracy objective
            or the base no forest of another space.
        base: a pre-trained base model (``"shipped"``, the package's, or a directory ``nasrlm pretrain``
            wrote; ``None``: none, a model learned from scratch): every refit starts from it
            (:meth:`RLMPredictor.from_base <nasrlm.rlm.predictor.RLMPredictor.from_base>`), with its size,
            tokenizer and tags, instead of a model learned from scratch; ``fit.model`` (which must then
            keep its default) and the pre-training do not apply. Use a base that never saw the study's
            objectives on this space (``nasrlm pretrain --exclude``) when you measure how well the search
            does.
        seed: makes the whole search reproducible: same seed, same trials, on a CPU whatever its BLAS
            kernels and torch thread count (what numpy computes through BLAS is rounded before it is used,
            :mod:`nasrlm.numerics`, and the model keeps :data:`~nasrlm.search.MODEL_THREADS`), with the
            library versions of ``constraints.txt``; docs/sampler.md, "Same seed, same trials", says what
            it does not cover. Give every worker of a study the same one: a random trial draws by its number
            (:mod:`~nasrlm.search.sampler._numbered_draws`), so workers start from the trials one worker
            would, and never take the same draw twice.
        device: where the model trains and samples: ``"cpu"`` or ``"cuda"``.
        label_cache: the file of a :class:`~nasrlm.label_cache.LabelCache` keeping each architecture's
            text and labels once described (``None``: the default cache, shared by every command and
            worker on this machine; ``NASRLM_CACHE=off`` turns it off).
        independent_sampler: draws the random trials and any parameter outside the relative space
            (default: trial ``n`` takes the ``n``-th architecture of ``RandomSampler(seed)``'s stream, a
            parameter outside the space's a draw seeded by the trial's number).
        progress: show progress bars while the model trains and scores candidates.
        proposals: what predicts the candidates and how many are proposed per fit
            (:class:`~nasrlm.search.ProposalSettings`: the prior, the surrogate, the samples' spread,
            the refine ranges, ...).
        fit: how the model trains, and its size (:class:`~nasrlm.search.FitSettings`).
        candidates: how many candidates each round scores, and how the front is mutated
            (:class:`~nasrlm.search.CandidateSettings`).
        warm_start: what is known already (:mod:`~nasrlm.search.sampler._warm_start`): earlier studies
            that name their objectives (``study.set_metric_names``; any sampler, any tool), pandas
            DataFrames or CSV paths (``arch_id`` and a column per quantity, as ``nasrlm data`` writes
            them), all of this space. A column named as one of the study's objectives is known: the model
            trains on it from the first fit; any other (another device's latency, another dataset's
            accuracy) is evidence its prior reads. The start-up trials after the first are the sources'
            fronts. Only the study's own evaluations count toward its budget and front. Read at once: a
            source that cannot be read raises :class:`~nasrlm.search.sampler.WarmStartError` naming it.

    One fit proposes ``proposals_per_fit`` architectures for each worker of the study (less those still
    waiting): the first is the trial that asked, the others wait in the study (``study.enqueue_trial``) for
    the next trials of any worker, so a study of several workers may end with some still waiting (a resumed
    one takes them first); a worker alone keeps them for its own next trials (:meth:`share_proposals` enqueues
    them). Trials still running or waiting (other workers, ``n_jobs > 1``) are pending: never proposed again,
    and believed at the model's median when the next proposals are picked. The workers are counted as the most
    trials this sampler has seen running at once lately.

    Workers sharing a study refit one at a time (a lease in the study, :mod:`~nasrlm.search.workers._lease`),
    and the one with a trained model does it: when the proposals run out, the others wait for its next
    ones (:meth:`awaiting_proposals`, which :func:`~nasrlm.search.run_search` asks before each trial)
    rather than refit beside it or pre-train a model of their own. A worker whose trial finds another
    refitting (it asked just as the last proposal went) evaluates a random mutant of the front found.
    (Refitting ahead, while the others evaluate the last proposals, cost more hypervolume than it
    saved time: experiments/README.md, "Many workers".)
    """

    def __init__(self, space: SearchSpace, *, n_startup_trials: int = 10, startup: str = "random",
                 base: str | None = None,
                 seed: int | None = None, device: str = "cpu",
                 label_cache: str | os.PathLike[str] | None = None,
                 independent_sampler: BaseSampler | None = None, progress: bool = False,
                 proposals: ProposalSettings | None = None, fit: FitSettings | None = None,
                 candidates: CandidateSettings | None = None, warm_start: Sequence[Source] = ()) -> None:
        proposals, fit = proposals or ProposalSettings(), fit or FitSettings()
        if n_startup_trials < 2:
            raise ValueError("n_startup_trials must be at least 2 (the model needs two examples)")
        if startup not in STARTUPS:
            raise ValueError(f"startup {startup!r}: expected one of {', '.join(STARTUPS)}")
        if base is not None and fit.model != DEFAULT_MODEL:
            raise ValueError("give model (FitSettings) or base, not both: a base model has its own size")
        if base is not None and proposals.surrogate == "prior":
            raise ValueError("surrogate='prior' has no model: base does not apply")
        self.space = space
        self.n_startup_trials = n_startup_trials
        self.startup = startup
        self.proposal_settings = proposals
        self.fit_settings = fit
        self.candidate_settings = candidates or CandidateSettings()
        self.base = base
        self.device = device
        self.progress = progress
        self._seed = seed if seed is not None else int(np.random.SeedSequence().entropy % 2**31)
        self._rng = np.random.default_rng(self._seed)
        self._independent = independent_sampler  # None: the numbered draws
        self._draws = NumberedDraws(space, self._seed)  # draws nothing until asked
        self._lock = threading.RLock()
        graph = proposals.prior not in (None, "line") or startup == "transfer"  # the forest reads them
        cache = LabelCache(label_cache) if label_cache is not None else DEFAULT_CACHE
        self.cache = ArchCache(space, graph=graph, progress=progress, cache=cache)
        # created with the first fit: it needs the objectives
        self._surrogate: RLMSurrogate | PriorSurrogate | None = None
        self._fits = 0
        self._workers = Workers(self.arch_id_of)  # the lease, the worker count, proposals handed out
        self._params = SpaceParams(space, self._seed)  # the relative search space, random draws
        self._pool_params: list[dict[str, Any]] = []  # candidate parameters drawn once
        self._startup_asked = False  # whether it has been asked for a start-up trial it can choose
        self._warned: set[str] = set()  # architectures the space failed to build, said once
        self._said_no_space = False  # whether it warned of trials that draw none of the space's parameters
        self._constraints: tuple[str, ...] = ()  # those the trials set (trial.set_constraint), modelled too
        if isinstance(warm_start, (str, os.PathLike)) or not isinstance(warm_start, Sequence):
            warm_start = [warm_start]  # one source given alone
        self._warm_sources = tuple(read_source(s, space, self.arch_id_of) for s in warm_start)
        self._warm: WarmStart | None = None  # the sources read against the study's objectives (first fit)
        self._evidence: EvidenceInputs | None = None  # what the prior reads of the sources' other columns
        self._warm_params: dict[str, dict[str, Any]] = {}  # the sources' architectures as parameters
        self._warm_reference: np.ndarray | None = None  # the warm start's typical architecture (a round's)
        #: the residual weights the latest proposals were scored with (``None``: unweighted)
        self.last_residual_weights: dict[str, float] | None = None
        #: called after each refit with (completed trials used, seconds); the CLI's progress hook
        self.on_fit: Callable[[int, float], None] | None = None
        #: called with a line before each long step (pre-training, scoring); e.g. ``print``
        #: where progress lines go (the first fit's start, its stages, each round's scoring): the
        #: ``nasrlm.search`` logger at INFO by default; ``nasrlm search`` prints them
        self.log: Callable[[str], None] = _logger.info

    def __getstate__(self) -> dict[str, Any]:
        """What a pickle or a deep copy keeps: everything but the lock and the two hooks (:attr:`on_fit`,
        :attr:`log`), which are this process's: a sampler loaded elsewhere has its own lock and the default
        hooks, and goes on where it stood (Optuna's recipe for resuming a study with its sampler)."""
        return {k: v for k, v in vars(self).items() if k not in ("_lock", "on_fit", "log")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state, _lock=threading.RLock(), on_fit=None, log=_logger.info)
        if isinstance(self._surrogate, RLMSurrogate):  # it logs through the sampler's hook
            self._surrogate.log = self.log

    # --- optuna's sampler interface --------------------------------------------------------------
    def reseed_rng(self) -> None:
        """Optuna calls this in each worker of ``n_jobs > 1`` so that workers draw differently."""
        self._rng = np.random.default_rng()
        if self._independent is not None:  # the numbered draws need none: they go by trial number
            self._independent.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """Every parameter of the space any completed trial used (a union, so conditional spaces keep theirs;
        another is the independent sampler's, :meth:`SpaceParams.space_names`), and every one the space
        suggests for its own random architectures: a candidate that deepens a stage no trial has reached is
        then proposed whole, not completed at random by Optuna."""
        space = self._params.relative_search_space(study)
        if not space and not self._said_no_space and completed(study):
            self._said_no_space = True
            warnings.warn(f"RLMSampler: the study's trials draw no parameter of search space "
                          f"{self.space.name!r} (their objective does not call space.suggest(trial)): every "
                          "parameter is drawn by the independent sampler, and the model proposes nothing",
                          stacklevel=2)
        return space

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        """Count the workers at every trial, an enqueued one too (Optuna samples nothing for it); once there
        are others, the proposals this worker kept for itself wait in the study for all of them."""
        # a count missed while the database is away loses a heuristic; raising would lose the trial,
        # which Optuna has taken off the queue already
        with suppress(Exception):
            self._workers.count_workers(study)
            if self._workers.worker_count(study) > 1 and is_enqueued(trial):  # else: sample_relative
                with self._lock:
                    self._workers.share_kept(study)

    def share_proposals(self, study: Study) -> None:
        """Enqueue in ``study`` the proposals this sampler keeps for its own next trials (alone in a study, it
        keeps them rather than leave WAITING trials behind an ``optimize(n_trials=N)``), so that another
        process takes them first: a resumed search, another worker. ``run_search`` calls it as it ends."""
        with self._lock:
            self._workers.share_kept(study)

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space or is_enqueued(trial):  # enqueued (a retry): its parameters are set
            return {}
        with self._lock:
            kept = self._workers.next_kept(study, trial)  # the latest fit's next proposal, taken in order
            if kept is not None:
                if self._workers.worker_count(study) > 1:  # others showed up: the rest are theirs too
                    self._workers.share_kept(study)
                return kept
            complete = completed(study)
            if len(complete) < self.n_startup_trials:
                return self._startup_trial(study, trial, search_space)
            lease = self._workers.lease(study)
            # another is fitting (or fitted lately, see Workers.another_will_propose)
            if self._workers.another_will_propose(study, lease, has_model=self._surrogate is not None):
                return self._front_mutant(study, trial, complete, search_space)
            # the lease is freed once the proposals are enqueued: the workers waiting on it take them
            with self._workers.refitting(study, trial, lease):
                self._fit(study, complete, search_space)
                # read after the fit: other workers started trials meanwhile
                evaluated, pending = self._workers.evaluated_and_pending(study, skip=trial.number)
                count = self._workers.wanted(study, self.proposal_settings.proposals_per_fit)
                proposals = self._propose(study, complete, search_space, evaluated, pending, count)
            return self._workers.hand_out(study, trial, proposals)

    def awaiting_proposals(self, study: Study) -> bool:
        """Whether a worker about to ask ``study`` for a trial should wait a moment instead: no proposal
        waits in the study, and another worker will enqueue some (it is refitting, or it has a trained
        model and this one has none). A worker that asked anyway would refit on the same trials beside
        it. When this worker's next trial is the one to refit, it claims the lease first
        (:meth:`FitLease.claim`): of workers that find the queue empty together, one refits and the
        others wait for its proposals."""
        return self._workers.awaiting(study, has_model=self._surrogate is not None,
                                      n_startup_trials=self.n_startup_trials)

    def _startup_trial(self, study: Study, trial: FrozenTrial,
                       search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        """``{}`` (a random draw), or with ``startup="transfer"``, once, the first of the start-up trials
        still to run that the transfer forest picks (the others handed out as proposals are). Not at the
        study's first trial, which has no search space yet (see :class:`SpaceParams`): from its second."""
        if (self.startup == "random" and not self._warm_sources) or self._startup_asked:
            return {}
        self._startup_asked = True
        others = study.get_trials(deepcopy=False)
        count = self.n_startup_trials - sum(t.number != trial.number for t in others)
        if self._warm_sources:
            return self._warm_startup(study, trial, search_space, count)
        forests = self.base if self.base is not None else SHIPPED  # from scratch: the shipped base's forests
        transfer = startup_transfer(forests, self.space.name, objectives(study)) if count > 0 else None
        if transfer is None:
            if count > 0:
                self.log("start-up trials at random: no accuracy objective, or no transfer forest of another "
                         "space in the base")
            return {}
        self._draw_pool(search_space)
        pool = self.candidate_pool  # the buildable ones, described
        params = {self.arch_id_of(p): p for p in self._pool_params}
        labels = self.cache.labels_of(pool)
        transfer = transfer.narrowed(labels)
        picks = startup_picks(labels, transfer, count, self._rng)
        self.log(f"start-up: {len(picks)} of {len(pool):,} candidates, one per stratum of MACs, each the "
                 f"best that {transfer.sources[0].space}'s accuracy forest ranks")
        return self._workers.hand_out(study, trial, [(params[pool[k]], None) for k in picks])

    def _warm_startup(self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution],
                      count: int) -> dict[str, Any]:
        """The first of ``count`` start-up trials spread along the warm start's fronts (the others handed
        out as proposals are): the earlier study's best networks, measured first for the new objectives.
        Fewer where the fronts are smaller: the rest are random draws."""
        warm = self._warm_start(study)
        taken = {self.arch_id_of(t.params) for t in study.get_trials(deepcopy=False) if t.params}
        picks = []
        for arch_id in warm.front_ids(count):
            params = {k: v for k, v in self._warm_params[arch_id].items() if k in search_space}
            if self.arch_id_of(params) not in taken and len(picks) < count:
                picks.append((params, None))
        self.log(f"start-up: {len(picks)} of the warm start's front first")
        return self._workers.hand_out(study, trial, picks)

    def _params_of(self, arch_id: str) -> dict[str, Any]:
        return self.space.params_of(self.space.parse(arch_id))

    def _front_mutant(self, study: Study, trial: FrozenTrial, complete: Sequence[FrozenTrial],
                      search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        """A random one-parameter mutant of the front found, none taken, for a trial that found no
        proposal while another worker refits: it evaluates that instead of refitting beside it."""
        evaluated, pending = self._workers.evaluated_and_pending(study, skip=trial.number)
        candidates = self._candidates(search_space, front_params(study, complete), evaluated | set(pending),
                                      refine=True)
        if not candidates:
            return {}  # every mutant is taken: a random draw
        # by trial number: workers sharing a seed pick apart
        pick = np.random.default_rng([self._seed, trial.number]).integers(len(candidates))
        params = list(candidates.values())[int(pick)]
        self._workers.note_handed_out(study, trial, params)
        return params

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        """The trial's numbered draw's value (:class:`NumberedDraws`), or a given independent sampler's."""
        if self._independent is not None:
            return self._independent.sample_independent(study, trial, param_name, param_distribution)
        return self._draws.sample(study, trial, param_name, param_distribution)
