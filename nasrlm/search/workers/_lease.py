"""One fit at a time per study: a lease that workers sharing a study take before refitting the model.

When several workers share a study, a worker that finds no proposal waiting would refit the model at
once; without a lease they all find the queue empty together and all refit on the same trials, each on
a share of the same cores, and each enqueues its own batch. With the lease, the first takes it and
refits, and the others wait (:meth:`RLMSampler.awaiting_proposals`) for the proposals it enqueues for
them. Optuna's storages have no atomic compare-and-set on study attributes, so :meth:`FitLease.claim`
writes and reads back after a moment: of workers that find the lease free together, the last to write
keeps it and the others see they lost (they would otherwise all refit on the same trials, as they
did at the end of the random start-up trials, which all workers finish together). A plain
:meth:`FitLease.take` overwrites whatever is there.

A lease is a study system attribute naming its holder, the trial its fit runs in (if any yet) and a
deadline that the holder pushes back while it fits (:meth:`FitLease.holding`). It stops holding when
the holder releases it, when that trial is no longer running, or at the deadline: a worker killed
mid-fit stops pushing it back, so the others stop waiting within ``seconds`` on any storage. Deadlines
are wall-clock times: workers on several machines need clocks in step to within a few seconds (as NTP
keeps them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from nasrlm.search.workers._liveness import repeating

#: The study system attribute that holds the lease (``None`` when free).
LEASE_ATTR = "nasrlm:fit_lease"
#: Seconds :meth:`FitLease.claim` waits before reading its claim back: far longer than the moment
#: between another worker reading the lease free and writing its own claim.
SETTLE_SECONDS = 0.5


@dataclass(frozen=True)
class FitLease:
    """A study's fit lease, as one worker sees it: ``owner`` is this worker's name for itself."""

    study: optuna.Study
    owner: str

    def take(self, trial_id: int | None, seconds: float) -> None:
        """Hold the lease for the fit that ``trial_id`` waits on (``None``: a fit about to start, held
        by its deadline alone), for at most ``seconds``."""
        self.study._storage.set_study_system_attr(
            self.study._study_id, LEASE_ATTR,
            {"owner": self.owner, "trial": trial_id, "until": time.time() + seconds})

    def claim(self, trial_id: int | None, seconds: float, settle: float = SETTLE_SECONDS) -> bool:
        """Take the lease unless another worker holds it, and say whether this worker still holds it
        ``settle`` seconds later: of several workers claiming a free lease at once, the last to write
        keeps it. (A worker held up for more than ``settle`` between finding the lease free and
        writing its claim may keep it too: two then refit side by side, which is harmless.)"""
        if self.held_elsewhere():
            return False
        self.take(trial_id, seconds)
        time.sleep(settle)
        return self._lease().get("owner") == self.owner

    @contextmanager
    def holding(self, trial_id: int, seconds: float) -> Iterator[None]:
        """Hold the lease while the block runs, its deadline ``seconds`` ahead and pushed back every
        third of that; released at the end. A push that fails (the database away for a moment) is
        tried again at the next one."""
        self.take(trial_id, seconds)
        fitted = False
        try:
            with repeating(lambda: self.take(trial_id, seconds), seconds / 3, f"nasrlm-fit-lease-{trial_id}"):
                yield
            fitted = True
        finally:
            self.release(fitted=fitted)

    def release(self, *, fitted: bool = True) -> None:
        """Free the lease, if this worker holds it; after a fit, record who fitted and when it ended
        (:meth:`fitted_elsewhere_within`)."""
        if self._lease().get("owner") == self.owner:
            record = {"owner": self.owner, "released": time.time()} if fitted else None
            self.study._storage.set_study_system_attr(self.study._study_id, LEASE_ATTR, record)

    def fitted_elsewhere_within(self, seconds: float) -> bool:
        """Whether another worker finished a fit less than ``seconds`` ago (it holds a trained model)."""
        lease = self._lease()
        elsewhere = lease.get("owner") not in (None, self.owner)
        return elsewhere and time.time() - lease.get("released", 0.0) < seconds

    def held_elsewhere(self) -> bool:
        """Whether another worker holds the lease: it is fitting, or claimed it to fit within the
        claim's (short) deadline, and will enqueue proposals."""
        lease = self._lease()
        if lease.get("owner") in (None, self.owner) or time.time() > lease.get("until", 0.0):
            return False
        if lease.get("trial") is None:  # claimed for a fit that has not started yet: the deadline holds
            return True
        try:
            trial = self.study._storage.get_trial(int(lease["trial"]))
        except KeyError:  # a trial of another study, or deleted: no fit waits on it
            return False
        return trial.state == TrialState.RUNNING

    def _lease(self) -> dict:
        lease = self.study._storage.get_study_system_attrs(self.study._study_id).get(LEASE_ATTR)
        return lease if isinstance(lease, dict) else {}
