"""Which scored candidates to propose: greedy expected hypervolume improvement, a pure function."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nasrlm.metrics import expected_hypervolume_improvement

#: Share of a candidate's draws that must meet the constraints for it to compete on its improvement first:
#: below, a candidate predicted far more accurate than anything feasible wins on its few feasible draws, each
#: as accurate as the others, which a network that fast is not. At half, a class the model wrongly believes
#: too slow is never tried: under fpga's 20th percentile two seeds traced (1.44, 1.77 points short @50) kept
#: to cells of 1x1 convolutions and never evaluated a single-3x3 cell, 0.4 ms under the limit, where the best
#: lie (experiments/README.md, "Under a latency budget").
MIN_FEASIBLE_SHARE = 0.25


def greedy_ehvi(samples: np.ndarray, observed: np.ndarray, reference: np.ndarray, maximize: Sequence[bool],
                count: int, rng: np.random.Generator, feasible: np.ndarray | None = None,
                violation: np.ndarray | None = None, min_feasible_share: float = MIN_FEASIBLE_SHARE,
                classes: np.ndarray | None = None) -> list[int]:
    """Indices of ``count`` candidates picked one by one for their expected hypervolume improvement.

    ``samples`` (candidates, samples, objectives) are draws of each candidate's objectives. After each
    pick its median is believed (added to ``observed``), so the next pick improves on the front that
    would then exist rather than repeating the first one's bet. Because the improvement is averaged over
    the samples, an uncertain candidate that might land beyond the front outranks a confident one just
    behind it. When no candidate is expected to improve anything, one is picked at random.

    ``feasible`` (candidates, samples), with constraints: whether each draw meets them all, drawn jointly
    with its objectives. A draw that does not improves nothing: averaged over every draw, the improvement
    becomes that of the front of feasible trials (``observed``; the caller's ``reference`` says what a
    first feasible trial must beat) times the chance of feasibility, as one model of both sees it.
    Candidates whose draws meet the constraints at least ``min_feasible_share`` of the time compete
    first; the others, long shots, only when none of those is expected to improve anything; where no
    candidate is, the likeliest to be feasible is picked (a network that meets a limit few do, however
    poor, rather than none), the nearest the limit among equally likely ones (``violation``,
    (candidates,): its median draw's excess), so that a limit below every draw is still approached, and
    among equally near ones the one whose draws, the constraints ignored, improve the front most (at random
    only where none does): under pixel3's 5th percentile the first picks of a study tied at one median
    excess in fives, and a random one among them spent the trial on a poor network. A pick is believed as
    :func:`believed` says.

    ``classes`` (candidates,): each candidate's equivalence class (architectures that compute the same
    function, so share an accuracy): one pick per class, whose evaluation tells the accuracy of all (fewer
    than ``count`` where fewer classes are scored). Under pixel3's 5th percentile a round picked five cells
    whose output ignores their input, all at chance.
    """
    chance = feasible.mean(axis=1) if feasible is not None else np.ones(len(samples))
    violation = np.zeros(len(samples)) if violation is None else violation
    unconstrained = samples
    if feasible is not None:
        samples = np.where(feasible[..., None], samples, np.nan)
    trusted, medians = believed(samples, feasible)
    alive = np.ones(len(samples), dtype=bool)
    likely = chance >= min_feasible_share
    picked: list[int] = []
    for _ in range(min(count, len(samples))):
        if not alive.any():  # every class picked: fewer proposals than asked
            break
        pick = None
        for competing in (alive & likely, alive & ~likely):  # the long shots when no likely one improves
            ehvi = expected_hypervolume_improvement(samples[competing], observed, reference, maximize)
            if np.any(ehvi > 0):
                pick = int(np.flatnonzero(competing)[int(np.argmax(ehvi))])
                break
        if pick is None:
            likeliest = np.flatnonzero(alive & (chance == chance[alive].max()))
            likeliest = likeliest[violation[likeliest] == violation[likeliest].min()]
            ehvi = (expected_hypervolume_improvement(unconstrained[likeliest], observed, reference, maximize)
                    if feasible is not None else np.zeros(len(likeliest)))  # unconstrained: none improves
            pick = int(likeliest[int(np.argmax(ehvi))]) if np.any(ehvi > 0) else int(rng.choice(likeliest))
        picked.append(pick)
        alive[pick] = False
        if classes is not None:
            alive[classes == classes[pick]] = False
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
