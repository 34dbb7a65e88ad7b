"""A worker stopped by ctrl-C: the trial it was running is pruned and marked :data:`INTERRUPTED_ATTR`, so that
a resumed run evaluates its architecture again and counts it neither as failed nor as a repeat, and waits for
no heartbeat of it to go stale."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from nasrlm.search.workers._liveness import rdb_backend

#: User attribute of a trial stopped by ctrl-C (it is pruned: neither a failure nor an evaluation).
INTERRUPTED_ATTR = "interrupted"

_MARK_ATTEMPTS = 3  # tries to mark a trial ctrl-C stopped, the last through a storage of its own


@dataclass(frozen=True)
class Asked:
    """What an ask may turn into a running trial: a new one, numbered from ``newest`` (the study's count
    before it), or one of the ``waiting`` (enqueued) trials, which it takes from the queue."""

    newest: int
    waiting: frozenset[int]

    @classmethod
    def before(cls, study: optuna.Study) -> Asked:
        """Read just before ``study.ask()``."""
        trials = study.get_trials(deepcopy=False)
        return cls(len(trials), frozenset(t._trial_id for t in trials if t.state == TrialState.WAITING))

    def took(self, trial: optuna.trial.FrozenTrial) -> bool:
        return trial.number >= self.newest or trial._trial_id in self.waiting


def mark_interrupted(study: optuna.Study, trial: optuna.Trial | None, asked: Asked,
                     log: Callable[[str], None]) -> None:
    """Mark the trial that ctrl-C stopped as such and prune it: a resumed run evaluates its architecture,
    and neither counts it as a failure. ``trial`` is ``None`` where ctrl-C stopped the ask, which may have
    made a trial run already: then the running trials the ask may have taken (``asked``) are marked. With
    several workers on the study, one another worker took in that instant is among them: that worker, told
    so at its tell, goes on to its next trial, and the architecture is evaluated again.

    A ctrl-C inside a database call can leave a write half done, its connection (and with it SQLite's write
    lock) held by the frames of the interrupt's traceback: the caller calls this once it has let the
    traceback go, and the reference cycles through its frames are collected first. It can also leave this
    thread's database session unusable (a connection still checked out), so a try that fails drops the
    session and tries again, the last time with the study's connections closed, through a storage of its
    own. A trial left running all the same is said through ``log``: a resumed run waits for its heartbeat
    to go stale.
    """
    gc.collect()
    error: Exception | None = None
    for attempt in range(1, _MARK_ATTEMPTS + 1):
        last = attempt == _MARK_ATTEMPTS
        storage = None
        try:
            storage = _own_storage(study) if last else study._storage
            if trial is not None:
                stopped = [storage.get_trial(trial._trial_id)]
            else:
                stopped = [t for t in storage.get_all_trials(study._study_id, deepcopy=False,
                                                             states=(TrialState.RUNNING,)) if asked.took(t)]
            for t in stopped:
                if not t.state.is_finished():  # nothing where the tell got through
                    storage.set_trial_user_attr(t._trial_id, INTERRUPTED_ATTR, True)
                    storage.set_trial_state_values(t._trial_id, TrialState.PRUNED)
            return
        except Exception as e:
            error = e
            _drop_connections(study, everything=attempt == _MARK_ATTEMPTS - 1)
            if not last:
                time.sleep(0.1)
        finally:
            if last and isinstance(storage, optuna.storages.RDBStorage):
                storage.engine.dispose()
    number = trial.number if trial is not None else f"#{asked.newest} or an enqueued one"
    cause = (error.__cause__ or error) if error is not None else None  # Optuna's says "during the commit"
    log(f"warning: trial {number}, stopped by ctrl-C, is still marked running ({cause}); a resumed run "
        f"waits for its heartbeat to go stale")


def _drop_connections(study: optuna.Study, everything: bool) -> None:
    """Drop this thread's database session; with ``everything``, close the study's pooled connections too."""
    backend = rdb_backend(study)
    if backend is None:
        return
    with suppress(Exception):
        backend.scoped_session.remove()
    if everything:
        with suppress(Exception):
            backend.engine.dispose()


def _own_storage(study: optuna.Study) -> optuna.storages.BaseStorage:
    """A storage on the study's database with a connection of its own (the study's where it has none)."""
    backend = rdb_backend(study)
    if backend is None:
        return study._storage
    return optuna.storages.RDBStorage(backend.url, engine_kwargs=dict(backend.engine_kwargs),
                                      skip_compatibility_check=True, skip_table_creation=True)
