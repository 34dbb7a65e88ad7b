"""Which scored candidates to propose: greedy expected hypervolume improvement, and the reference point
it is measured from; pure functions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nasrlm.metrics import expected_hypervolume_improvement, median_reference

#: Bootstrap resamples of the start-up trials whose medians make ``reference="bootstrap"``'s points.
BOOTSTRAP_REFERENCES = 16


def startup_references(startup: np.ndarray, kind: str, seed: int) -> np.ndarray:
    """Reference points (r, m) the improvement is averaged over, from the start-up trials' values (n, m).

    ``"startup"``: one, their median per objective (a typical architecture of the space, the convention
    hypervolume is reported with). ``"bootstrap"``: the medians of :data:`BOOTSTRAP_REFERENCES`
    resamples of them: ten trials place the space's median only roughly, and one too strict in an
    objective gives nothing beyond it any value, so the improvement is averaged over where it may lie.
    """
    if kind == "startup":
        return median_reference(startup)[None, :]
    draws = np.random.default_rng(seed).integers(0, len(startup), size=(BOOTSTRAP_REFERENCES, len(startup)))
    return np.stack([median_reference(startup[d]) for d in draws])


def greedy_ehvi(samples: np.ndarray, observed: np.ndarray, references: np.ndarray, maximize: Sequence[bool],
                count: int, rng: np.random.Generator) -> list[int]:
    """Indices of ``count`` candidates picked one by one for their expected hypervolume improvement,
    averaged over the reference points ``references`` (r, m) (one: ``(1, m)`` or ``(m,)``).

    ``samples`` (candidates, samples, objectives) are draws of each candidate's objectives. After each
    pick its median is believed (added to ``observed``), so the next pick improves on the front that
    would then exist rather than repeating the first one's bet. Because the improvement is averaged over
    the samples, an uncertain candidate that might land beyond the front outranks a confident one just
    behind it. When no candidate is expected to improve anything, one is picked at random.
    """
    medians = np.median(samples, axis=1)
    alive = np.ones(len(samples), dtype=bool)
    picked: list[int] = []
    references = np.atleast_2d(np.asarray(references, dtype=float))
    for _ in range(min(count, len(samples))):
        ehvi = np.mean([expected_hypervolume_improvement(samples[alive], observed, r, maximize)
                        for r in references], axis=0)
        if np.any(ehvi > 0):
            pick = int(np.flatnonzero(alive)[int(np.argmax(ehvi))])
        else:
            pick = int(rng.choice(np.flatnonzero(alive)))
        picked.append(pick)
        alive[pick] = False
        observed = np.vstack([observed, medians[pick]])
    return picked
