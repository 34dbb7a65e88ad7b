"""Which scored candidates to propose: greedy expected hypervolume improvement, a pure function."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nasrlm.metrics import expected_hypervolume_improvement


def greedy_ehvi(samples: np.ndarray, observed: np.ndarray, reference: np.ndarray, maximize: Sequence[bool],
                count: int, rng: np.random.Generator) -> list[int]:
    """Indices of ``count`` candidates picked one by one for their expected hypervolume improvement.

    ``samples`` (candidates, samples, objectives) are draws of each candidate's objectives. After each
    pick its median is believed (added to ``observed``), so the next pick improves on the front that
    would then exist rather than repeating the first one's bet. Because the improvement is averaged over
    the samples, an uncertain candidate that might land beyond the front outranks a confident one just
    behind it. When no candidate is expected to improve anything, one is picked at random.
    """
    medians = np.median(samples, axis=1)
    alive = np.ones(len(samples), dtype=bool)
    picked: list[int] = []
    for _ in range(min(count, len(samples))):
        ehvi = expected_hypervolume_improvement(samples[alive], observed, reference, maximize)
        if np.any(ehvi > 0):
            pick = int(np.flatnonzero(alive)[int(np.argmax(ehvi))])
        else:
            pick = int(rng.choice(np.flatnonzero(alive)))
        picked.append(pick)
        alive[pick] = False
        observed = np.vstack([observed, medians[pick]])
    return picked
