"""The RLMSampler's bookkeeping for workers sharing a study: who refits, how many workers there are, and
the proposals waiting in the study for them (a worker alone keeps them for its own next trials, and puts
them in the study once it sees another worker's trial running, or when asked to).

One :class:`Workers` per sampler keeps what this worker has seen: the proposals it handed out (their
trials may not be stored yet), and how many trials ran at each recent ask (the worker count). The fit
lease itself lives in the study (:mod:`~nasrlm.search.workers._lease`), and so do the waiting proposals:
enqueued trials (``study.enqueue_trial``) that any worker's next trial takes. The few calls this needs
into Optuna's private parts (a trial's storage id, an enqueued trial's system attribute, the storage
itself) are at the end of this module, in one place.
"""

from __future__ import annotations

import os
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from optuna.exceptions import UpdateFinishedTrialError
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from nasrlm.search.sampler._arch_cache import SpaceMismatchError
from nasrlm.search.sampler._study import PREDICTED_USER_ATTR, completed
from nasrlm.search.workers import FitLease, beating

#: Seconds a fit lease outlives its holder: the holder pushes its deadline back while it fits, so
#: workers waiting on a worker killed mid-fit stop waiting this long after
#: (see :mod:`~nasrlm.search.workers._lease`).
LEASE_SECONDS = 60.0
#: Seconds a claim made before asking for a trial holds the lease until the fit takes it over: the
#: others wait no longer than this when the trial asked for turns out not to refit (a retry came first).
CLAIM_SECONDS = 5.0
#: Recent asks over which the workers of a study are counted (the most trials running at any of them):
#: a trial left running by a killed worker stops counting once it is failed.
WORKER_COUNT_WINDOW = 20

_ACTIVE = (TrialState.RUNNING, TrialState.WAITING)
#: A proposal's parameters and the model's unweighted median prediction for it, by the name of each quantity
#: it learns (``None``: not needed).
Proposal = tuple[dict[str, Any], dict[str, float] | None]


class Workers:
    """What one sampler knows of the workers of its studies; ``arch_id_of`` names a proposal's
    architecture."""

    def __init__(self, arch_id_of: Callable[[dict[str, Any]], str]) -> None:
        self._arch_id_of = arch_id_of
        # per study: proposals whose trials may not be stored yet, each with the number of its trial
        self._handed_out: dict[str, dict[str, int]] = {}
        self._running: dict[str, deque[int]] = {}  # per study: trials running at each recent ask
        # per study: proposals kept for this worker's own next trials while it is the study's only worker
        # (enqueued, they would outlive an optimize(n_trials=N) as WAITING trials)
        self._kept: dict[str, deque[Proposal]] = {}
        self._name = uuid.uuid4().hex  # with the process id, this worker's name in a fit lease

    def lease(self, study: Study) -> FitLease:
        return FitLease(study, f"{self._name}:{os.getpid()}")  # a forked worker is a worker of its own

    def another_will_propose(self, study: Study, lease: FitLease, *, has_model: bool) -> bool:
        """Whether another worker is refitting, or, this worker having no trained model and other
        workers running, one that has a model finished a fit lately and will refit sooner than this one
        could pre-train its own (alone, this worker resumes a study a finished worker fitted)."""
        if lease.held_elsewhere():
            return True
        return (not has_model and self.worker_count(study) > 1
                and lease.fitted_elsewhere_within(LEASE_SECONDS))

    def awaiting(self, study: Study, *, has_model: bool, n_startup_trials: int) -> bool:
        """:meth:`RLMSampler.awaiting_proposals <nasrlm.search.RLMSampler.awaiting_proposals>`."""
        if self.queue_length(study):
            return False
        lease = self.lease(study)
        if self.another_will_propose(study, lease, has_model=has_model):
            return True
        if self.worker_count(study) < 2 or len(completed(study)) < n_startup_trials:
            return False  # alone, or the next trial is a random start-up one
        return not lease.claim(None, CLAIM_SECONDS)

    @contextmanager
    def refitting(self, study: Study, trial: FrozenTrial, lease: FitLease) -> Iterator[None]:
        """Hold ``lease`` while the block refits for ``trial``, and keep the trial beating meanwhile (a
        refit outlasts the study's stale-trial limit)."""
        with lease.holding(_trial_id(trial), LEASE_SECONDS), beating(study, _trial_id(trial)):
            yield

    def count_workers(self, study: Study) -> None:
        """Note how many trials of ``study`` run now (see :meth:`worker_count`)."""
        running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
        self._running.setdefault(study.study_name, deque(maxlen=WORKER_COUNT_WINDOW)).append(running)

    def worker_count(self, study: Study) -> int:
        """Workers of ``study``: the most trials seen running at once over the last
        :data:`WORKER_COUNT_WINDOW` asks (each fit proposes for each)."""
        return max([1, *self._running.get(study.study_name, ())])

    def queue_length(self, study: Study) -> int:
        """Proposals waiting for a worker to take them: in ``study``, or kept for this worker's own trials."""
        waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
        return waiting + len(self._kept.get(study.study_name, ()))

    def next_kept(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        """The next proposal kept for this worker, handed to ``trial`` as an enqueued one would be (its
        prediction a user attribute of the trial); ``None`` when none is kept."""
        kept = self._kept.get(study.study_name)
        if not kept:
            return None
        params, predicted = kept.popleft()
        self.note_handed_out(study, trial, params)
        if predicted is not None:
            try:
                _set_user_attr(study, trial, PREDICTED_USER_ATTR, predicted)
            except UpdateFinishedTrialError:  # taken for dead (by another worker): all wait in the study
                del self._handed_out[study.study_name][self._arch_id_of(params)]
                kept.appendleft((params, predicted))
                self.share_kept(study)
                raise
        return params

    def share_kept(self, study: Study) -> None:
        """Enqueue the proposals kept for this worker in ``study``, for whichever worker asks next: once
        another worker shows up, and when a run ends (a resumed run takes them first). Each leaves the queue
        once it is in the study: a storage that fails midway keeps the rest."""
        kept = self._kept.get(study.study_name, deque())
        while kept:
            self._enqueue(study, [kept[0]])
            kept.popleft()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "_name"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy, or a pickle loaded, is a worker of its own in a fit lease."""
        vars(self).update(state, _name=uuid.uuid4().hex)

    def wanted(self, study: Study, proposals_per_fit: int) -> int:
        """Proposals one fit makes: ``proposals_per_fit`` for each worker, less those waiting (at least 1)."""
        return max(1, proposals_per_fit * self.worker_count(study) - self.queue_length(study))

    def evaluated_and_pending(self, study: Study, skip: int | None = None) -> tuple[set[str], list[str]]:
        """Ids of the completed trials, and of those still running or waiting (other workers, or handed
        out by this sampler to a trial not stored yet), trial number ``skip`` aside: neither is ever
        proposed again. A failed or pruned trial's architecture may be proposed again."""
        evaluated: set[str] = set()
        running: set[str] = set()
        handed_out = self._handed_out.setdefault(study.study_name, {})
        ended: set[int] = set()  # trials that ended before they stored a parameter (taken for dead)
        for t in study.get_trials(deepcopy=False):
            if t.state.is_finished() and not t.params:
                ended.add(t.number)
            params = t.params or _fixed_params(t)  # an enqueued trial has fixed ones only
            if t.number == skip or not params:
                continue
            try:
                arch_id = self._arch_id_of(params)
            except SpaceMismatchError:
                if t.state == TrialState.COMPLETE:
                    raise
                continue  # a running trial that has not suggested every parameter yet, or a failed one
            if t.state == TrialState.COMPLETE:
                evaluated.add(arch_id)
            elif t.state in _ACTIVE:
                running.add(arch_id)
            else:
                handed_out.pop(arch_id, None)
        for arch_id in [a for a, number in handed_out.items() if a in evaluated or number in ended]:
            del handed_out[arch_id]  # stored, or never evaluated: free to be proposed again
        running.update(self._arch_id_of(params) for params, _ in self._kept.get(study.study_name, ()))
        pending = dict.fromkeys([*sorted(running), *sorted(handed_out)])
        return evaluated, [i for i in pending if i not in evaluated]

    def note_handed_out(self, study: Study, trial: FrozenTrial, params: dict[str, Any]) -> None:
        """Count ``params``, handed to ``trial``, as pending until that trial is stored or ends without
        them (see :meth:`evaluated_and_pending`)."""
        self._handed_out.setdefault(study.study_name, {})[self._arch_id_of(params)] = trial.number

    def hand_out(self, study: Study, trial: FrozenTrial, proposals: Sequence[Proposal]) -> dict[str, Any]:
        """The first proposal's parameters for ``trial``; the others wait in the study for whichever
        worker asks next, or, alone, are kept for this worker's next trials (:meth:`next_kept`). Each keeps
        the model's prediction as a user attribute."""
        if not proposals:
            return {}
        (params, predicted), rest = proposals[0], proposals[1:]
        self.note_handed_out(study, trial, params)
        if self.worker_count(study) > 1:  # first: they wait for the others even if this trial was failed
            self._enqueue(study, rest)
        else:  # alone: kept for this worker's next trials, which take them in order as from the queue
            self._kept[study.study_name] = deque(rest)
        if predicted is not None:  # kept with the trial: a resumed search still weighs by it
            try:
                _set_user_attr(study, trial, PREDICTED_USER_ATTR, predicted)
            except UpdateFinishedTrialError:  # taken for dead meanwhile (by another worker, so there is one):
                del self._handed_out[study.study_name][self._arch_id_of(params)]  # the proposals wait for it
                self.share_kept(study)
                self._enqueue(study, [(params, predicted)])
                raise
        return params  # a candidate's parameters are the search space's already (see _candidates)

    @staticmethod
    def _enqueue(study: Study, proposals: Sequence[Proposal]) -> None:
        """Leave ``proposals`` waiting in the study, each with the model's prediction."""
        for params, predicted in proposals:
            attrs = None if predicted is None else {PREDICTED_USER_ATTR: predicted}
            study.enqueue_trial(params, user_attrs=attrs)


# --- Optuna's private parts -------------------------------------------------------------------------
#: System attribute of an enqueued trial (``study.enqueue_trial``, a retry) holding its parameters.
_FIXED = "fixed_params"


def is_enqueued(trial: FrozenTrial) -> bool:
    """Whether ``trial`` was enqueued (a proposal waiting, or a retry): its parameters are set."""
    return _FIXED in trial.system_attrs


def _fixed_params(trial: FrozenTrial) -> dict[str, Any] | None:
    return trial.system_attrs.get(_FIXED)


def _trial_id(trial: FrozenTrial) -> int:
    return trial._trial_id


def _set_user_attr(study: Study, trial: FrozenTrial, key: str, value: Any) -> None:
    """Set a user attribute of a trial Optuna is sampling (a ``FrozenTrial`` has no setter that stores)."""
    study._storage.set_trial_user_attr(trial._trial_id, key, value)
