"""Many workers on one study: each kept alive or given up on (heartbeats, retries of a trial whose worker
died, a database that goes away: ``_liveness``; a worker stopped by ctrl-C: ``_interrupt``), and one model
fit at a time among them (``_lease``).

It knows no sampler: :func:`~nasrlm.search.run_search` keeps its workers alive with it, and the
``RLMSampler``'s bookkeeping (``nasrlm.search.sampler._coordination``) takes its lease from it.
"""

from nasrlm.search.workers._interrupt import INTERRUPTED_ATTR, Asked, mark_interrupted
from nasrlm.search.workers._lease import LEASE_ATTR, FitLease
from nasrlm.search.workers._liveness import (
    CREATE_RACES,
    OUTAGES,
    RETRY_GRACE_SECONDS,
    STALE_ATTR,
    WorkerSettings,
    awaiting_retry,
    beating,
    fail_stale_trials,
    is_retry,
    place_of,
    rdb_backend,
    rdb_storage,
    repeating,
    requeue,
)

__all__ = [
    "CREATE_RACES",
    "INTERRUPTED_ATTR",
    "LEASE_ATTR",
    "OUTAGES",
    "RETRY_GRACE_SECONDS",
    "STALE_ATTR",
    "Asked",
    "FitLease",
    "WorkerSettings",
    "awaiting_retry",
    "beating",
    "fail_stale_trials",
    "is_retry",
    "mark_interrupted",
    "place_of",
    "rdb_backend",
    "rdb_storage",
    "repeating",
    "requeue",
]
