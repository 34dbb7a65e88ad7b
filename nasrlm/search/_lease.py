"""One fit at a time per study: a lease that workers sharing a study take before refitting the model.

When several workers share a study, a worker that finds no proposal waiting would refit the model at
once; without a lease they all find the queue empty together and all refit on the same trials, each on
a share of the same cores, and each enqueues its own batch. With the lease, the first takes it and
refits, and the others wait (:meth:`RLMSampler.awaiting_proposals`) for the proposals it enqueues for
them. Optuna's storages have no atomic compare-and-set on study attributes, so two workers may both
take a free lease at the same instant: they then both refit, as without a lease, which is harmless.

A lease is a study system attribute naming its holder, the holder's running trial and a deadline that
the holder pushes back while it fits (:meth:`FitLease.holding`). It stops holding when the holder
releases it, when that trial is no longer running, or at the deadline: a worker killed mid-fit stops
pushing it back, so the others stop waiting within ``seconds`` on any storage. Deadlines are wall-clock
times: workers on several machines need clocks in step to within a few seconds (as NTP keeps them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from nasrlm.search._liveness import repeating

#: The study system attribute that holds the lease (``None`` when free).
LEASE_ATTR = "nasrlm:fit_lease"


@dataclass(frozen=True)
class FitLease:
    """A study's fit lease, as one worker sees it: ``owner`` is this worker's name for itself."""

    study: optuna.Study
    owner: str

    def take(self, trial_id: int, seconds: float) -> None:
        """Hold the lease for the fit that ``trial_id`` waits on, for at most ``seconds``."""
        self.study._storage.set_study_system_attr(
            self.study._study_id, LEASE_ATTR,
            {"owner": self.owner, "trial": trial_id, "until": time.time() + seconds})

    @contextmanager
    def holding(self, trial_id: int, seconds: float) -> Iterator[None]:
        """Hold the lease while the block runs, its deadline ``seconds`` ahead and pushed back every
        third of that; released at the end. A push that fails (the database away for a moment) is
        tried again at the next one."""
        self.take(trial_id, seconds)
        try:
            with repeating(lambda: self.take(trial_id, seconds), seconds / 3, f"nasrlm-fit-lease-{trial_id}"):
                yield
        finally:
            self.release()

    def release(self) -> None:
        """Free the lease, if this worker holds it."""
        if self._lease().get("owner") == self.owner:
            self.study._storage.set_study_system_attr(self.study._study_id, LEASE_ATTR, None)

    def held_elsewhere(self) -> bool:
        """Whether another worker holds the lease: it is fitting, and will enqueue proposals."""
        lease = self._lease()
        if not lease or lease.get("owner") == self.owner or time.time() > lease.get("until", 0.0):
            return False
        try:
            trial = self.study._storage.get_trial(int(lease["trial"]))
        except KeyError:  # a trial of another study, or deleted: no fit waits on it
            return False
        return trial.state == TrialState.RUNNING

    def _lease(self) -> dict:
        lease = self.study._storage.get_study_system_attrs(self.study._study_id).get(LEASE_ATTR)
        return lease if isinstance(lease, dict) else {}
