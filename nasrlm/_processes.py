"""Whether this process may fork workers of its own, and how many cores it may use: the one answer the
modules that describe or hash architectures in forked processes share."""

from __future__ import annotations

import multiprocessing
import os


def can_fork_workers() -> bool:
    """Whether forked worker processes can be started here: fork exists on this platform, and this
    process is not daemonic (a ``multiprocessing.Pool`` worker, a daemon worker), which may have no
    children."""
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
