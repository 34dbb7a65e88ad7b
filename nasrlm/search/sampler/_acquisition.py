"""Which scored candidates to propose: greedy expected hypervolume improvement, a pure function."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nasrlm.metrics import expected_hypervolume_improvement


def greedy_ehvi(samples: np.ndarray, observed: np.ndarray, reference: np.ndarray, maximize: Sequence[bool],
                count: int, rng: np.random.Generator, feasible: np.ndarray | None = None) -> list[int]:
    """Indices of ``count`` candidates picked one by one for their expected hypervolume improvement.

    ``samples`` (candidates, samples, objectives) are draws of each candidate's objectives. After each
    pick its median is believed (added to ``observed``), so the next pick improves on the front that
    would then exist rather than repeating the first one's bet. Because the improvement is averaged over
    the samples, an uncertain candidate that might land beyond the front outranks a confident one just
    behind it. When no candidate is expected to improve anything, one is picked at random.

    ``feasible`` (candidates, samples), with constraints: whether each draw meets them all, drawn jointly
    with its objectives. A draw that does not improves nothing: averaged over every draw, the improvement
    becomes that of the front of feasible trials (``observed``) times the chance of feasibility, as one
    model of both sees it. A pick is believed as :func:`believed` says; where nothing is expected to
    improve, the likeliest to be feasible is picked. While no trial is feasible (``observed`` empty), every
    pick is the likeliest to be feasible: a limit that few networks meet is found first, then improved on
    (as Optuna's GP sampler does, which maximises the probability of feasibility alone until then).
    """
    if feasible is not None and not len(observed):
        chance = feasible.mean(axis=1)
        order = rng.permutation(len(samples))  # ties in a random order
        return [int(k) for k in order[np.argsort(-chance[order], kind="stable")][:count]]
    if feasible is not None:
        samples = np.where(feasible[..., None], samples, np.nan)
    trusted, medians = believed(samples, feasible)
    chance = feasible.mean(axis=1) if feasible is not None else np.ones(len(samples))
    alive = np.ones(len(samples), dtype=bool)
    picked: list[int] = []
    for _ in range(min(count, len(samples))):
        ehvi = expected_hypervolume_improvement(samples[alive], observed, reference, maximize)
        if np.any(ehvi > 0):
            pick = int(np.flatnonzero(alive)[int(np.argmax(ehvi))])
        else:
            likeliest = np.flatnonzero(alive & (chance == chance[alive].max()))
            pick = int(rng.choice(likeliest))
        picked.append(pick)
        alive[pick] = False
        if trusted[pick]:
            observed = np.vstack([observed, medians[pick]])
    return picked


def believed(samples: np.ndarray, feasible: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate (``samples``: candidates, samples, objectives), whether it is believed on the front
    before it is evaluated (a proposal picked, a trial still running), and where: without constraints every
    one, at its median; with them (``feasible``: candidates, samples), one whose draws meet them at least
    half the time, at the median of those draws (elsewhere NaN)."""
    if feasible is None:
        return np.ones(len(samples), dtype=bool), np.median(samples, axis=1)
    trusted = feasible.mean(axis=1) >= 0.5
    medians = np.full((len(samples), samples.shape[2]), np.nan)
    for k in np.flatnonzero(trusted):
        medians[k] = np.median(samples[k][feasible[k]], axis=0)
    return trusted, medians
