"""Which scored candidates to propose: greedy expected hypervolume improvement, a pure function."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nasrlm.metrics import expected_hypervolume_improvement

#: Share of a candidate's draws that must meet the constraints for it to be picked for its improvement, while
#: any candidate reaches it: below, a candidate predicted far more accurate than anything feasible wins on
#: its few feasible draws, each as accurate as the others, which a network that fast is not.
MIN_FEASIBLE_SHARE = 0.5


def greedy_ehvi(samples: np.ndarray, observed: np.ndarray, reference: np.ndarray, maximize: Sequence[bool],
                count: int, rng: np.random.Generator, feasible: np.ndarray | None = None,
                violation: np.ndarray | None = None, min_feasible_share: float = MIN_FEASIBLE_SHARE
                ) -> list[int]:
    """Indices of ``count`` candidates picked one by one for their expected hypervolume improvement.

    ``samples`` (candidates, samples, objectives) are draws of each candidate's objectives. After each
    pick its median is believed (added to ``observed``), so the next pick improves on the front that
    would then exist rather than repeating the first one's bet. Because the improvement is averaged over
    the samples, an uncertain candidate that might land beyond the front outranks a confident one just
    behind it. When no candidate is expected to improve anything, one is picked at random.

    ``feasible`` (candidates, samples), with constraints: whether each draw meets them all, drawn jointly
    with its objectives. A draw that does not improves nothing: averaged over every draw, the improvement
    becomes that of the front of feasible trials (``observed``) times the chance of feasibility, as one
    model of both sees it. Only candidates whose draws meet the constraints at least ``min_feasible_share``
    of the time compete on improvement, while any is left. A pick is believed as
    :func:`believed` says; where nothing is expected to improve, the likeliest to be feasible is picked. While
    no trial is feasible (``observed`` empty), every pick is the likeliest to be feasible: a limit that few
    networks meet is found first, then improved on (as Optuna's GP sampler does, which maximises the
    probability of feasibility alone until then). ``violation`` (candidates,): how far each is predicted to
    miss the constraints (its median draw's excess); among equally likely candidates, the nearest come
    first, so that a limit below every draw (no trial near it yet) is still approached.
    """
    chance = feasible.mean(axis=1) if feasible is not None else np.ones(len(samples))
    violation = np.zeros(len(samples)) if violation is None else violation
    if feasible is not None and not len(observed):
        order = rng.permutation(len(samples))  # ties in a random order
        return [int(k) for k in order[np.lexsort((violation[order], -chance[order]))][:count]]
    if feasible is not None:
        samples = np.where(feasible[..., None], samples, np.nan)
    trusted, medians = believed(samples, feasible)
    alive = np.ones(len(samples), dtype=bool)
    likely = chance >= min_feasible_share
    picked: list[int] = []
    for _ in range(min(count, len(samples))):
        competing = alive & likely if (alive & likely).any() else alive
        ehvi = expected_hypervolume_improvement(samples[competing], observed, reference, maximize)
        if np.any(ehvi > 0):
            pick = int(np.flatnonzero(competing)[int(np.argmax(ehvi))])
        else:
            likeliest = np.flatnonzero(alive & (chance == chance[alive].max()))
            likeliest = likeliest[violation[likeliest] == violation[likeliest].min()]
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
