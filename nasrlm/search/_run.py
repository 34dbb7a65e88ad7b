"""Running a search: an Optuna study whose budget counts completed objective evaluations.

The study is an ordinary Optuna study (any storage URL, resumable with ``load_if_exists``, shared by any
number of workers in a database storage), so users can open it with Optuna's own tools; each trial
records its architecture id as the user attribute ``arch_id``, and the objective names are the
study's metric names.
"""

from __future__ import annotations

import math
import random
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState
from tqdm.auto import tqdm

from nasrlm.data import Objective
from nasrlm.errors import NasrlmError
from nasrlm.metrics import pareto_mask
from nasrlm.search._evaluate import ArchEvaluator, MissingValueError
from nasrlm.search.workers import (
    CREATE_RACES,
    INTERRUPTED_ATTR,
    OUTAGES,
    Asked,
    WorkerSettings,
    awaiting_retry,
    beating,
    fail_stale_trials,
    is_retry,
    mark_interrupted,
    place_of,
    rdb_storage,
    requeue,
)
from search_spaces import SearchSpace

#: User attribute of a trial that drew an architecture the study had evaluated already (it is pruned,
#: not evaluated again, and does not count toward the budget).
DUPLICATE_ATTR = "duplicate_of"
#: Repeated architectures per evaluation of the budget after which a search gives up (a space smaller
#: than the budget, or a sampler that keeps drawing what it has).
MAX_REPEATS_PER_EVALUATION = 10
#: User attribute of a trial that found the budget filled by other workers' trials (it is pruned).
SURPLUS_ATTR = "surplus"
#: User attribute of a trial whose evaluation raised: what it raised.
ERROR_ATTR = "error"
#: Prefix of the study user attributes that hold each run's [start, end] (Unix seconds): the study's
#: search time is the length of their union, resumed runs added and workers' overlaps counted once.
RUN_ATTR_PREFIX = "run_"
#: Study user attribute that holds the constraints a study searches under, by name (``["pixel3<=10"]``): a
#: study resumed under others is refused, as under other objectives.
CONSTRAINTS_ATTR = "constraints"
#: Tries at opening the study before an error there is final (see :func:`_open_study`).
_OPEN_ATTEMPTS = 6
#: How often, at most, a worker waiting for another worker's proposals looks again (seconds).
PROPOSAL_POLL_SECONDS = 0.25


@dataclass
class SearchResult:
    """The completed evaluations of one study, in evaluation order."""

    sampler: str  # a label: "rlm", "random", ...
    objectives: list[Objective]
    arch_ids: list[str]
    values: np.ndarray  # (evaluations, objectives), in the objectives' units
    study_name: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    #: the constraints searched under, by name (``pixel3<=10``), and each evaluation's value of each
    #: (evaluations, constraints): met at 0 or less, as ``trial.constraints`` holds them
    constraints: list[str] = field(default_factory=list)
    limits: np.ndarray | None = None

    @property
    def maximize(self) -> list[bool]:
        return [o.higher_is_better for o in self.objectives]

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.objectives]

    @property
    def feasible(self) -> np.ndarray:
        """(evaluations,) whether each meets every constraint (all of them, without constraints)."""
        if self.limits is None or not self.limits.size:
            return np.ones(len(self.arch_ids), dtype=bool)
        return (self.limits <= 0).all(axis=1)

    @property
    def front(self) -> np.ndarray:
        """Indices of the non-dominated evaluations among those that meet the constraints."""
        feasible = np.flatnonzero(self.feasible)
        return feasible[pareto_mask(self.values[feasible], self.maximize)]

    @classmethod
    def from_study(cls, study: optuna.Study, objectives: list[Objective], sampler: str,
                   constraints: list[str] | None = None) -> SearchResult:
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        values = np.array([t.values for t in trials], dtype=np.float64).reshape(len(trials), len(objectives))
        names = list(constraints or [])
        limits = np.array([[t.constraints.get(n, np.nan) for n in names] for t in trials],
                          dtype=np.float64).reshape(len(trials), len(names))
        ids = [t.user_attrs.get("arch_id", f"trial {t.number}") for t in trials]  # another tool's: none
        return cls(sampler, objectives, ids, values, study.study_name, constraints=names, limits=limits)


class EvaluationError(RuntimeError):
    """Evaluating an architecture raised: its trial fails, the search goes on."""


class SearchStopped(NasrlmError, RuntimeError):
    """Too many trials failed or repeated for the budget to be reached; ``result`` holds the evaluations
    that were completed (a partial report can be written from it)."""

    def __init__(self, message: str, result: SearchResult | None = None) -> None:
        super().__init__(message)
        self.result = result


def run_search(space: SearchSpace, evaluator: ArchEvaluator, sampler: optuna.samplers.BaseSampler, *,
               budget: int, label: str = "", storage: str | None = None, study_name: str = "nasrlm",
               progress: bool = True, max_failures: int | None = None,
               workers: WorkerSettings | None = None, enqueue: Sequence[dict[str, Any]] = (),
               log: Callable[[str], None] = lambda line: None) -> SearchResult:
    """Search until the study holds ``budget`` completed evaluations (resuming an existing study).

    Any number of processes, on any number of machines, may run this on one study in a database
    storage: together they complete exactly ``budget`` evaluations. A trial only evaluates while the
    completed trials and the running trials numbered before it leave room in the budget; otherwise it
    waits for them, and is pruned (user attribute :data:`SURPLUS_ATTR`) when they fill the budget. A
    worker killed mid-trial leaves a trial whose heartbeat stops: another worker fails it and re-runs
    its architecture (how soon: ``workers``, default :class:`WorkerSettings`'s). A database that goes
    away for a moment makes the worker wait, up to ``workers.outage_seconds``. A sampler with an
    ``awaiting_proposals(study)`` method (:class:`RLMSampler`) is asked before each trial: while it says
    another worker is about to enqueue proposals, this one waits for them instead of asking.

    Architectures missing from a table fail their trial (:class:`MissingValueError`) and do not count,
    and so do those whose evaluation raises (a space that cannot build one, a measurement that breaks:
    one warning line through ``log`` names the architecture and the error, kept in the trial's user
    attribute :data:`ERROR_ATTR`); after ``max_failures`` (default: ``budget``) failed trials the search
    stops with a :class:`SearchStopped` error. A trial
    that draws an architecture another trial of the study has evaluated or is evaluating is pruned,
    with the id in its user attribute :data:`DUPLICATE_ATTR`, and does not count either: a resumed
    study whose sampler replays its random stream, or two workers that draw the same cell, never
    evaluate it twice.

    ``enqueue``: parameters of trials to evaluate first in a new study (one without trials), as an Optuna user
    warm-starts a sampler that reads no earlier study (``study.enqueue_trial``; see
    :func:`~nasrlm.search.earlier_front`).
    """
    if budget < 1:
        raise ValueError(f"budget must be positive, got {budget}")
    workers = workers or WorkerSettings()
    study = _open_study(storage, study_name, sampler, evaluator, workers, log)
    if enqueue and not study.get_trials(deepcopy=False):
        for params in enqueue:
            study.enqueue_trial(params, skip_if_exists=True)

    def objective(trial: optuna.Trial) -> list[float]:
        arch_id = space.arch_id(space.suggest(trial))
        trial.set_user_attr("arch_id", arch_id)  # set before looking, so of two twins one sees the other
        trials = _trials_now(study)
        twin = _twin(trials, trial.number, arch_id)
        if twin is not None:  # a resumed random stream replays its draws, two workers draw alike, ...
            trial.set_user_attr(DUPLICATE_ATTR, arch_id)
            raise optuna.TrialPruned(f"architecture {arch_id} is evaluated by trial {twin} of this study")
        while (room := _room(trials, trial.number, budget)) is None or room <= 0:
            if room is None:
                trial.set_user_attr(SURPLUS_ATTR, True)
                raise optuna.TrialPruned(f"the budget of {budget} evaluations is spent")
            if _room(trials, trial.number, budget, waiting=False) > 0:  # a retry waits for this place:
                # give it up, so that this worker (maybe the only one free) asks for the retry; a retry
                # giving way to an earlier one waits in the queue again, behind it (marked surplus first,
                # so that its copy, asked at once by another worker, does not take it for a twin)
                trial.set_user_attr(SURPLUS_ATTR, True)
                if any(t.number == trial.number and is_retry(t) for t in trials):
                    requeue(study, trial._trial_id, drop=(SURPLUS_ATTR,))
                raise optuna.TrialPruned("its place in the budget goes to the retry of a dead worker's trial")
            fail_stale_trials(study)
            time.sleep(workers.poll_seconds)
            trials = _trials_now(study)
        try:
            values, limits = evaluator.measure(arch_id)
        except MissingValueError:
            raise
        except Exception as error:  # a space that cannot build it, a broken measurement: not the search
            raise EvaluationError(f"architecture {arch_id}: {type(error).__name__}: {error}") from error
        unknown = [name for name, value in limits.items() if not np.isfinite(value)]
        if unknown:
            raise EvaluationError(f"architecture {arch_id}: no value of the constraint {unknown[0]}")
        for name, value in limits.items():  # Optuna's way: every sampler that honours constraints reads them
            trial.set_constraint(name, value)
        return values

    limit = budget if max_failures is None else max_failures
    done = _states(study)[TrialState.COMPLETE]
    if done:
        log(f"resuming study {study_name!r}: {done} of {budget} evaluations done")
    awaiting = getattr(sampler, "awaiting_proposals", None)
    poll = min(workers.poll_seconds, PROPOSAL_POLL_SECONDS)
    run_key, started = f"{RUN_ATTR_PREFIX}{uuid.uuid4().hex[:12]}", time.time()
    outage = _Outage(workers.outage_seconds, log)
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with tqdm(total=budget, desc=f"search {label or space.name}", unit="eval",
                  disable=not progress) as bar:
            while True:
                with outage:
                    states = _states(study)
                    bar.n = min(states[TrialState.COMPLETE], budget)
                    bar.refresh()
                    if (states[TrialState.COMPLETE] >= budget or states[TrialState.FAIL] > limit
                            or states[TrialState.PRUNED] > MAX_REPEATS_PER_EVALUATION * budget):
                        break
                    if states[TrialState.COMPLETE] + states[TrialState.RUNNING] >= budget:
                        fail_stale_trials(study)  # the others are finishing the budget, or are dead
                        time.sleep(workers.poll_seconds)
                        continue
                    if awaiting is not None and awaiting(study):  # another worker is refitting for us
                        fail_stale_trials(study)  # unless it died doing so
                        time.sleep(poll)
                        continue
                    _run_trial(study, objective, outage, log)
    finally:
        optuna.logging.set_verbosity(verbosity)
        with suppress(Exception):  # kept however the run ends, ctrl-C included: a resumed run adds to it
            study.set_user_attr(run_key, [started, time.time()])
        share = getattr(sampler, "share_proposals", None)
        with suppress(Exception):  # the proposals a lone worker kept: a resumed run takes them first
            if share is not None:
                share(study)
    trials = study.get_trials(deepcopy=False)
    states = Counter(t.state for t in trials)
    interrupted = sum(t.state == TrialState.PRUNED and INTERRUPTED_ATTR in t.user_attrs for t in trials)
    failed, repeated = states[TrialState.FAIL], states[TrialState.PRUNED] - interrupted
    result = SearchResult.from_study(study, evaluator.objectives, label or type(sampler).__name__,
                                     [c.name for c in evaluator.constraints])
    result.seconds = _searched_seconds(study)
    result.extra["failed_trials"] = failed
    result.extra["repeated_trials"] = repeated
    result.extra["units"] = {o.name: o.unit for o in evaluator.quantities}  # a constrained one's too
    if states[TrialState.COMPLETE] < budget:
        errors = [t.user_attrs[ERROR_ATTR] for t in trials if ERROR_ATTR in t.user_attrs]
        cause = (f"the last: {errors[-1]}" if errors else
                 "architectures missing from the table, or a space smaller than the budget?")
        raise SearchStopped(f"search stopped after {failed} failed trials and {repeated} repeated "
                            f"architectures with {states[TrialState.COMPLETE]} of {budget} evaluations done "
                            f"({cause})", result)
    return result


def _run_trial(study: optuna.Study, objective: Callable[[optuna.Trial], list[float]], outage: _Outage,
               log: Callable[[str], None]) -> None:
    """Ask for a trial, evaluate it and tell the study, the trial beating all along.

    Optuna's ``study.optimize`` does the same, but its heartbeat stops for good, and its bookkeeping
    breaks, when the database goes away for a moment; here a beat that fails is tried again, and so is
    the final tell, so a result computed during an outage is kept.
    """
    fail_stale_trials(study)  # a dead worker's trial is failed and enqueued, so this ask re-runs it
    asked = Asked.before(study)
    trial: optuna.Trial | None = None
    stopped = False
    try:  # from the ask to the tell: a ctrl-C anywhere (the sampler proposing, the beat starting, the tell)
        # leaves no trial running, which a resumed run would wait on until its heartbeat went stale
        with warnings.catch_warnings():  # "heartbeat ... is supposed to be used with Study.optimize"
            warnings.simplefilter("ignore", UserWarning)
            trial = study.ask()
        values: list[float] | None = None
        failure: str | None = None  # an evaluation error, kept with the trial as it is told
        with beating(study, trial._trial_id):
            try:
                values, state = objective(trial), TrialState.COMPLETE
            except optuna.TrialPruned:
                state = TrialState.PRUNED
            except MissingValueError:
                state = TrialState.FAIL
            except EvaluationError as error:
                log(f"warning: trial {trial.number} failed: {error}")
                failure, state = str(error), TrialState.FAIL
            except KeyboardInterrupt:  # marked interrupted below, not failed
                raise
            except optuna.exceptions.UpdateFinishedTrialError as error:  # storing an attribute of the trial
                if not _taken_for_dead(study, trial, error, log):
                    raise
                return
            except BaseException:
                with suppress(Exception):
                    study.tell(trial, state=TrialState.FAIL)
                raise
            while True:
                with outage:
                    try:
                        if failure is not None:
                            trial.set_user_attr(ERROR_ATTR, failure)
                        study.tell(trial, values, state=state)
                    except (optuna.exceptions.UpdateFinishedTrialError, ValueError) as e:
                        if not _taken_for_dead(study, trial, e, log):
                            raise
                    return
    except KeyboardInterrupt:  # the trial is marked once this block has let go of the interrupt's traceback:
        stopped = True  # its frames may hold a cursor mid-statement, and with it SQLite's write lock
    if stopped:
        mark_interrupted(study, trial, asked, log)
        raise KeyboardInterrupt


def _taken_for_dead(study: optuna.Study, trial: optuna.Trial, error: Exception,
                    log: Callable[[str], None]) -> bool:
    """Whether ``error``, met storing something of ``trial``, says another worker failed the trial as
    stale meanwhile (its beats lost in an outage, or late on a machine too busy to send them): then that
    worker re-runs it, and this one, told so through ``log``, goes on to its next trial."""
    if not study._storage.get_trial(trial._trial_id).state.is_finished():
        return False
    log(f"trial {trial.number}: {error}; another worker took it for dead and runs it again")
    return True


def _searched_seconds(study: optuna.Study) -> float:
    """How long the study's runs searched: the union of their [start, end] intervals."""
    runs = sorted(tuple(v) for k, v in study.user_attrs.items() if k.startswith(RUN_ATTR_PREFIX))
    total, reached = 0.0, -math.inf
    for begin, end in runs:
        total += max(0.0, end - max(begin, reached))
        reached = max(reached, end)
    return total


def _open_study(storage: str | None, study_name: str, sampler: optuna.samplers.BaseSampler,
                evaluator: ArchEvaluator, workers: WorkerSettings, log: Callable[[str], None]
                ) -> optuna.Study:
    """Create or load the study, checking that it optimises the evaluator's objectives.

    Workers that start together on a fresh database race to create Optuna's tables and the study; the
    losers of that race try again, up to :data:`_OPEN_ATTEMPTS` times. A database that cannot be reached
    is waited for, as during the search, up to ``workers.outage_seconds``: a worker started while the
    server restarts, or still opening when it goes away, is not lost.
    """
    outage, races = _Outage(workers.outage_seconds, log), 0
    while True:
        try:
            with outage:
                return open_study(rdb_storage(storage, workers), study_name, evaluator, sampler)
        except CREATE_RACES:
            races += 1
            if races == _OPEN_ATTEMPTS:
                raise
            time.sleep(0.2 * races + random.random() / 2)


def open_study(storage: str | optuna.storages.BaseStorage | None, study_name: str, evaluator: ArchEvaluator,
               sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study:
    """The study ``study_name`` in ``storage``, created if it is not there, optimising ``evaluator``'s
    objectives (their directions, and their names as the study's metric names); ``ValueError`` if an
    existing one optimises others. Once, quietly: :func:`run_search` retries it through races and outages."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" / per-trial lines
    try:
        study = optuna.create_study(
            storage=storage, study_name=study_name, sampler=sampler, load_if_exists=True,
            directions=["maximize" if o.higher_is_better else "minimize" for o in evaluator.objectives])
    finally:
        optuna.logging.set_verbosity(verbosity)
    constraints = [c.name for c in evaluator.constraints]
    where = getattr(storage, "url", storage)  # an RDBStorage: its URL
    if study.metric_names is None:  # the constraints first: a worker that sees the names sees them too
        study.set_user_attr(CONSTRAINTS_ATTR, constraints)
        with warnings.catch_warnings():  # experimental since Optuna 3.2, and exactly what we need
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(evaluator.names)
    elif list(study.metric_names) != evaluator.names:
        raise ValueError(f"study {study_name!r} in {where} optimises {study.metric_names}, "
                         f"not {evaluator.names}; pick another --study-name")
    elif (before := list(study.user_attrs.get(CONSTRAINTS_ATTR, []))) != constraints:
        raise ValueError(f"study {study_name!r} in {where} searches under the constraints "
                         f"{before or 'none'}, not {constraints or 'none'}; pick another --study-name")
    return study


class _Outage:
    """Swallows database outages (:data:`OUTAGES`) until they last ``seconds``, waiting between tries."""

    def __init__(self, seconds: float, log: Callable[[str], None]) -> None:
        self.seconds, self.log = seconds, log
        self.since: float | None = None

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> bool:
        now = time.monotonic()
        if kind is None:
            self.since = None
            return False
        if not issubclass(kind, OUTAGES):
            return False
        if self.since is None:
            self.since = now
            self.log(f"the study's database cannot be reached ({type(error).__name__}); waiting for it")
        if now - self.since > self.seconds:
            return False
        time.sleep(min(5.0, 0.5 + (now - self.since) / 4))
        return True


def _states(study: optuna.Study) -> Counter[TrialState]:
    """How many of the study's trials are in each state."""
    return Counter(t.state for t in study.get_trials(deepcopy=False))


def _trials_now(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The study's trials, in one query of the storage: the budget's places are read off the completed,
    running and waiting ones, and off the failed ones whose retries are still to come (:func:`_room`)."""
    return study.get_trials(deepcopy=False)


def _twin(trials: list[optuna.trial.FrozenTrial], number: int, arch_id: str) -> int | None:
    """Number of another completed or running trial among ``trials`` (:func:`_trials_now`) that holds
    ``arch_id``, if any (a running trial already found surplus never evaluates: not a twin)."""
    for t in trials:
        if (t.number != number and t.user_attrs.get("arch_id") == arch_id
                and (t.state == TrialState.COMPLETE
                     or t.state == TrialState.RUNNING and SURPLUS_ATTR not in t.user_attrs)):
            return t.number
    return None


def _room(trials: list[optuna.trial.FrozenTrial], number: int, budget: int, *, waiting: bool = True
          ) -> int | None:
    """Evaluations left to trial ``number``: the budget less the completed trials and the places held
    before its own (``None`` when the completed trials alone fill the budget).

    A place is a trial's number, or for a retry the number of the trial first lost (``place_of``): it is
    held while a trial of that place runs, a retry of it waits (unless ``waiting`` is false), or a dead
    worker's trial of it waits for its retry (``awaiting_retry``), and not once one of them completed.
    So a killed worker's architecture is re-run ahead of the draws that came after it, never replaced by
    one of them at the budget's end: a draw held back by a waiting retry alone gives its place up
    (:func:`run_search`), as the retry runs only once a worker asks for it.
    """
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    if complete >= budget:
        return None
    me = next((t for t in trials if t.number == number), None)
    mine = place_of(me) if me is not None else number
    done = {place_of(t) for t in trials if t.state == TrialState.COMPLETE}
    now = time.time()
    held = {place_of(t) for t in trials
            if t.number != number and (t.state == TrialState.RUNNING
                                      or waiting and t.state == TrialState.WAITING and is_retry(t)
                                      or awaiting_retry(t, trials, now))}
    return budget - complete - sum(place < mine for place in held - done)
