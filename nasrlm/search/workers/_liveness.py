"""Keeping many workers on one study alive: heartbeats, retries of killed trials, database outages.

Optuna's RDB storage already knows a trial is dead when its heartbeat stops, and can re-run it
(``RetryHeartbeatStaleTrialCallback``); this module sets that up for a search, keeps a trial beating while its
sampler thinks (Optuna starts beating only once the trial's parameters are sampled, and a model refit
can take a minute), and tells a database that went away for a moment from a real error.
"""

from __future__ import annotations

import copy
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta

import optuna
from optuna.trial import FrozenTrial, TrialState


@dataclass(frozen=True)
class WorkerSettings:
    """How workers sharing a study in a database storage watch each other."""

    heartbeat_seconds: int = 30  # how often a running trial says it is alive
    stale_after_seconds: int = 120  # silent this long, a trial counts as dead (its worker killed) and fails
    max_retries: int = 2  # times a dead trial's architecture is re-run by another worker before it is dropped
    poll_seconds: float = 1.0  # how often a worker waiting for others' last trials looks again
    outage_seconds: float = 120.0  # how long a worker waits for a database that went away before it gives up

    def __post_init__(self) -> None:
        if self.heartbeat_seconds < 1 or self.stale_after_seconds <= self.heartbeat_seconds:
            raise ValueError(f"need 1 <= heartbeat_seconds < stale_after_seconds, got "
                             f"{self.heartbeat_seconds} and {self.stale_after_seconds}")
        if self.max_retries < 0 or self.poll_seconds <= 0 or self.outage_seconds < 0:
            raise ValueError("max_retries and outage_seconds must be 0 or more, poll_seconds positive")


def rdb_storage(storage: str | optuna.storages.BaseStorage | None, settings: WorkerSettings
                ) -> str | optuna.storages.BaseStorage | None:
    """A database URL as an RDB storage with heartbeats and retries of dead trials.

    A worker killed mid-trial (``kill -9``, a lost machine) would leave its trial RUNNING forever; with
    a heartbeat, the next worker to look fails a trial silent for ``stale_after_seconds`` and enqueues
    its parameters again (at most ``max_retries`` times). Other storages are returned as they are.
    """
    if not isinstance(storage, str):
        return storage
    with warnings.catch_warnings():  # experimental since Optuna 2.9, and exactly what we need
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(
            storage, heartbeat_interval=settings.heartbeat_seconds, grace_period=settings.stale_after_seconds,
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(
                max_retry=settings.max_retries),
            engine_kwargs={"pool_pre_ping": True})


#: System attribute of a trial failed as dead (its heartbeat stale): when it was marked, in seconds since
#: the epoch. Until its retry is enqueued, the trial still holds its place in the budget (``awaiting_retry``).
STALE_ATTR = "nasrlm:stale_since"
#: Where Optuna keeps a trial's ``trial.set_constraint`` values among its system attributes (one key each): a
#: retry measures them again.
CONSTRAINTS_PREFIX = "constraints"
#: How long a trial failed as dead holds its place without a retry: the worker that failed it enqueues the
#: retry within milliseconds, unless it dies in between or the trial has used up its retries.
RETRY_GRACE_SECONDS = 10.0


def fail_stale_trials(study: optuna.Study) -> None:
    """Fail (and enqueue for a retry) the trials of dead workers, where the storage keeps heartbeats.

    Optuna's ``fail_stale_trials`` in one respect changed: each trial is marked (:data:`STALE_ATTR`)
    before it is failed, so that in the moment between its failing and its retry's enqueueing another
    worker does not take its place in the budget for a fresh draw (:func:`awaiting_retry`). Of workers
    failing one trial at once, the one whose state change lands enqueues the retry, as in Optuna.
    """
    storage = study._storage
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    if interval is None:
        return
    _adopt_silent_trials(study, interval)
    retry = storage.get_heartbeat_stale_trial_callback()
    for trial_id in storage._get_stale_trial_ids(study._study_id):
        try:
            storage.set_trial_system_attr(trial_id, STALE_ATTR, time.time())
            if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:  # another worker failed it, or its own told
            continue
        if retry is not None:
            failed = copy.deepcopy(storage.get_trial(trial_id))
            for key in [STALE_ATTR, *(k for k in failed.system_attrs if k.startswith(CONSTRAINTS_PREFIX))]:
                del failed.system_attrs[key]  # the retry inherits the system attributes: not these
            retry(study, failed)


def requeue(study: optuna.Study, trial_id: int, drop: tuple[str, ...] = ()) -> None:
    """Enqueue a running retry again as it was (same parameters, same place, same retry history; its
    user attributes but those in ``drop``), for whichever worker asks next: it is not a new failure, so
    it uses up no retry."""
    trial = study._storage.get_trial(trial_id)
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.WAITING, params=trial.params, distributions=trial.distributions,
        user_attrs={k: v for k, v in trial.user_attrs.items() if k not in drop},
        system_attrs={k: v for k, v in trial.system_attrs.items() if not k.startswith(CONSTRAINTS_PREFIX)}))


def is_retry(trial: FrozenTrial) -> bool:
    """Whether ``trial`` re-runs a dead worker's trial (Optuna's retry callback enqueued it)."""
    return "failed_trial" in trial.system_attrs


def place_of(trial: FrozenTrial) -> int:
    """The trial's place in the budget's order: its own number, or for a retry of a dead worker's trial
    the number of the trial first lost, so that the retry comes before the draws that came after it."""
    return trial.system_attrs.get("failed_trial", trial.number)


def awaiting_retry(trial: FrozenTrial, trials: list[FrozenTrial], now: float) -> bool:
    """Whether ``trial``, failed as dead, still holds its place: marked less than
    :data:`RETRY_GRACE_SECONDS` before ``now`` and no trial among ``trials`` retrying it yet."""
    since = trial.system_attrs.get(STALE_ATTR)
    if trial.state != TrialState.FAIL or since is None or now - since > RETRY_GRACE_SECONDS:
        return False
    return not any(trial.number in t.system_attrs.get("retry_history", ()) for t in trials)


def rdb_backend(study: optuna.Study) -> optuna.storages.RDBStorage | None:
    """The study's relational storage, unwrapped from the cache ``create_study`` puts around it; ``None``
    for any other storage."""
    backend = getattr(study._storage, "_backend", study._storage)
    return backend if isinstance(backend, optuna.storages.RDBStorage) else None


def _adopt_silent_trials(study: optuna.Study, interval: int) -> None:
    """Give a first heartbeat to each running trial that has not beaten in its first ``interval`` seconds.

    Optuna counts a trial as dead only once its heartbeat goes stale, so a worker killed between asking
    for its trial and its first beat would leave the trial RUNNING forever, and the others would wait
    for it forever. Beating once on its behalf lets the trial go stale like any other: a live owner
    beats on, a dead one is failed ``stale_after_seconds`` later. So every process running trials of
    the study must beat (nasrlm's workers do; Optuna's ``optimize`` does on a storage with a heartbeat).
    (Optuna has no public query for the trials without a heartbeat; this reads its heartbeat table, as
    ``RDBStorage`` itself does.)
    """
    from optuna.storages._rdb.models import TrialHeartbeatModel

    backend = rdb_backend(study)
    if backend is None:
        return
    since = datetime.now() - timedelta(seconds=interval)  # FrozenTrial times are local, like now()
    old = [t._trial_id for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
           if t.datetime_start is None or t.datetime_start < since]
    if not old:
        return
    session = backend.scoped_session()
    try:
        beating = {trial_id for (trial_id,) in session.query(TrialHeartbeatModel.trial_id)
                   .filter(TrialHeartbeatModel.trial_id.in_(old))}
    finally:
        session.close()
    for trial_id in set(old) - beating:
        study._storage.record_heartbeat(trial_id)


@contextmanager
def beating(study: optuna.Study, trial_id: int) -> Iterator[None]:
    """Keep trial ``trial_id`` alive while the block runs, where the storage keeps heartbeats.

    A beat that fails (the database is away for a moment) is tried again at the next interval, so a
    short outage does not make a live trial look dead.
    """
    storage = study._storage
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    if interval is None:
        yield
        return
    with suppress(OUTAGES):
        storage.record_heartbeat(trial_id)
    with repeating(lambda: storage.record_heartbeat(trial_id), interval, f"nasrlm-heartbeat-{trial_id}"):
        yield


@contextmanager
def repeating(action: Callable[[], object], every: float, name: str) -> Iterator[None]:
    """Call ``action`` every ``every`` seconds in a thread (``name``) while the block runs. A call
    that meets a database outage is skipped: the next one tries again."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every):
            with suppress(OUTAGES):
                action()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _outage_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the database cannot be reached right now", not "this is wrong"."""
    errors: list[type[BaseException]] = [optuna.exceptions.StorageInternalError]
    try:
        import sqlalchemy.exc
    except ImportError:
        return tuple(errors)
    return (*errors, sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)


OUTAGES = _outage_errors()


def _create_races() -> tuple[type[BaseException], ...]:
    """Exceptions of two workers creating the same tables or study at once (the loser tries again)."""
    try:
        import sqlalchemy.exc
    except ImportError:
        return ()
    return (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError)


CREATE_RACES = _create_races()
