"""Which architectures to label when only a few can be: spread them out over what is known of all.

Measuring a new device costs one run per architecture, so which twenty are measured matters as much
as the model fitted to them. A regression on the latencies of devices already measured (HELP's
"source devices") is best conditioned when the measured architectures cover the range of those
latencies, not when they cluster where random draws fall most often. Farthest-first traversal
(Gonzalez, 1985) picks each next architecture as far as possible from every one picked so far:
cheap, deterministic given its first pick, and a 2-approximation of the k-centre cover.
"""

from __future__ import annotations

import numpy as np

__all__ = ["farthest_first"]


def farthest_first(x: np.ndarray, k: int, *, seed: int = 0, standardize: bool = True) -> np.ndarray:
    """Indices of ``k`` distinct rows of ``x`` (n, f), each as far (Euclidean) from the rows before it
    as possible; the first is drawn at random with ``seed``.

    ``standardize`` scales every column to unit variance first, so that no column weighs more for its
    unit (pass logs of latencies: a ratio then counts the same on a fast and on a slow device).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or not len(x):
        raise ValueError(f"x must be a non-empty (n, f) array, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("x must be finite: fill or drop rows with unknown values first")
    if not 1 <= k <= len(x):
        raise ValueError(f"k must be between 1 and the {len(x)} rows, got {k}")
    if standardize:
        spread = x.std(axis=0)
        x = (x - x.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    chosen = [int(np.random.default_rng(seed).integers(len(x)))]
    distance = np.linalg.norm(x - x[chosen[0]], axis=1)
    for _ in range(k - 1):
        chosen.append(int(np.argmax(distance)))
        distance = np.minimum(distance, np.linalg.norm(x - x[chosen[-1]], axis=1))
    return np.array(chosen)
