"""Multi-objective metrics for the Pareto search: fronts, exact hypervolume, its history and EHVI.

The search compares itself with the true front of a fully tabulated space (15,625 architectures in
NB201), so everything here must be exact and fast at that size. Objectives keep their own direction
(``maximize[i]`` is True when higher is better); every function converts to minimisation internally,
reference points included, so callers never negate anything themselves. Rows holding a NaN are treated
as "not evaluated": never on a front and contributing no hypervolume.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

__all__ = [
    "expected_hypervolume_improvement",
    "hypervolume",
    "hypervolume_history",
    "median_reference",
    "pareto_mask",
    "pareto_recall",
    "to_minimization",
]

# Rows compared at once in the n-D dominance checks: bounds the (block, front, m) boolean temporaries.
_BLOCK = 512


def _as_values(values: np.ndarray | Sequence[Sequence[float]], maximize: Sequence[bool], *,
               name: str = "values") -> np.ndarray:
    """``values`` as a float (n, m) array, checked against ``maximize``'s length."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, len(maximize))
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, m) array, got shape {arr.shape}")
    if arr.shape[1] != len(maximize):
        raise ValueError(f"{name} have {arr.shape[1]} objectives but maximize has {len(maximize)} entries")
    if arr.shape[1] == 0:
        raise ValueError("at least one objective is needed")
    return arr


def _reference_min(reference: np.ndarray | Sequence[float], maximize: Sequence[bool]) -> np.ndarray:
    """The reference point in minimisation form, checked to be finite and of the right length."""
    ref = np.asarray(reference, dtype=float).reshape(-1)
    if ref.shape[0] != len(maximize):
        raise ValueError(f"reference has {ref.shape[0]} entries but there are {len(maximize)} objectives")
    if not np.all(np.isfinite(ref)):
        raise ValueError(f"reference must be finite, got {ref.tolist()}")
    return np.where(np.asarray(maximize, dtype=bool), -ref, ref)


def to_minimization(values: np.ndarray | Sequence[Sequence[float]], maximize: Sequence[bool]) -> np.ndarray:
    """A copy of ``values`` with maximised columns negated, so that lower is better everywhere."""
    arr = _as_values(values, maximize).copy()
    arr[:, np.asarray(maximize, dtype=bool)] *= -1.0
    return arr


def _pareto_mask_2d(loss: np.ndarray) -> np.ndarray:
    """Non-dominated rows of finite-or-inf 2-D losses by one lexicographic sweep, O(n log n)."""
    n = loss.shape[0]
    order = np.lexsort((loss[:, 1], loss[:, 0]))  # by x, then y
    x, y = loss[order, 0], loss[order, 1]
    new_x = np.empty(n, dtype=bool)
    new_x[0] = True
    new_x[1:] = x[1:] != x[:-1]
    group_start = np.maximum.accumulate(np.where(new_x, np.arange(n), 0))
    # Dominated by a point with strictly smaller x and y' <= y ...
    prefix_min = np.minimum.accumulate(y)
    best_before = np.full(n, np.inf)
    has_before = group_start > 0
    best_before[has_before] = prefix_min[group_start[has_before] - 1]
    dominated = best_before <= y
    # ... or by a point with the same x and strictly smaller y (the group's first one, sorted by y).
    dominated |= y[group_start] < y
    mask = np.empty(n, dtype=bool)
    mask[order] = ~dominated
    return mask


def _weakly_dominated(candidates: np.ndarray, front: np.ndarray, *, skip_self: bool = False) -> np.ndarray:
    """For each candidate row: is some ``front`` row at least as good in every objective?

    Compares one objective at a time on 2-D boolean blocks (much faster in NumPy than reducing a 3-D
    array over a short last axis). With ``skip_self`` the two arrays are the same rows and each row's
    comparison with itself is ignored.
    """
    out = np.zeros(candidates.shape[0], dtype=bool)
    if front.shape[0] == 0:
        return out
    step = max(1, (_BLOCK * 256) // front.shape[0])
    for start in range(0, candidates.shape[0], step):
        c = candidates[start:start + step]
        le = front[None, :, 0] <= c[:, None, 0]
        for d in range(1, front.shape[1]):
            le &= front[None, :, d] <= c[:, None, d]
        if skip_self:
            rows = np.arange(c.shape[0])
            le[rows, start + rows] = False
        out[start:start + step] = le.any(axis=1)
    return out


def _pareto_mask_nd(loss: np.ndarray) -> np.ndarray:
    """Non-dominated rows for any m: unique rows in lexicographic order, in blocks, each block checked
    against the front found so far.

    Among unique rows, weak dominance by another row is strict dominance, and in lexicographic order a
    dominating row always comes first; as every dominated row is dominated by some non-dominated one,
    comparing with the front so far (plus the block's own rows) suffices: O(n · front size · m).
    Duplicates share their unique row's verdict.
    """
    uniq, inverse = np.unique(loss, axis=0, return_inverse=True)  # lexicographically sorted
    n = uniq.shape[0]
    keep = np.zeros(n, dtype=bool)
    front = uniq[:0]
    for start in range(0, n, _BLOCK):
        block = uniq[start:start + _BLOCK]
        ok = ~_weakly_dominated(block, front)
        idx = np.flatnonzero(ok)
        ok[idx] = ~_weakly_dominated(block[idx], block[idx], skip_self=True)
        keep[start:start + _BLOCK] = ok
        front = np.concatenate([front, block[ok]])
    return keep[inverse.reshape(-1)]


def pareto_mask(values: np.ndarray | Sequence[Sequence[float]], maximize: Sequence[bool]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``values`` (n, m).

    A row is dominated when another is at least as good in every objective and strictly better in one;
    exact duplicates of a non-dominated row therefore all stay on the front (the search must be able to
    report every architecture that reaches it). Rows with a NaN are never on the front and dominate
    nothing.
    """
    loss = to_minimization(values, maximize)
    mask = np.zeros(loss.shape[0], dtype=bool)
    valid = ~np.isnan(loss).any(axis=1)
    if not valid.any():
        return mask
    sub = loss[valid]
    mask[valid] = _pareto_mask_2d(sub) if sub.shape[1] == 2 else _pareto_mask_nd(sub)
    return mask


def _optuna_hypervolume() -> Callable[..., float]:
    """Optuna's exact WFG hypervolume (private API, hence imported here with a clear failure)."""
    try:
        from optuna._hypervolume import compute_hypervolume
    except ImportError as exc:  # pragma: no cover - depends on the installed Optuna
        raise ImportError(
            "nasrlm.metrics needs optuna._hypervolume.compute_hypervolume for hypervolumes of 3 or more "
            "objectives; this Optuna version no longer has it (it is private API: pin optuna or port WFG)"
        ) from exc
    return compute_hypervolume


def _hv_2d(loss: np.ndarray, ref: np.ndarray) -> float:
    """Exact 2-D hypervolume of any points (dominated ones included) by a sweep over x. Summed without BLAS,
    as every hypervolume here: a search decides on them, and BLAS adds in an order of the processor's
    (:mod:`nasrlm.numerics`)."""
    order = np.lexsort((loss[:, 1], loss[:, 0]))
    x = loss[order, 0]
    y_best = np.minimum.accumulate(loss[order, 1])
    widths = np.diff(np.append(x, ref[0]))
    return float(np.sum(widths * (ref[1] - y_best)))


def _hv_3d(loss: np.ndarray, ref: np.ndarray) -> float:
    """Exact 3-D hypervolume of any points: over the grid of their sorted x and y, each cell's height is the
    best z of the points at or left of and below it (two cumulative maxima), as Optuna's WFG computes it
    in 3-D, but summed without BLAS (see :func:`_hv_2d`)."""
    n = loss.shape[0]
    x_order, y_order = np.argsort(loss[:, 0], kind="stable"), np.argsort(loss[:, 1], kind="stable")
    x_rank = np.empty(n, dtype=np.intp)
    x_rank[x_order] = np.arange(n)
    height = np.zeros((n, n))  # [x rank, y rank]: ref z less the best z reached there
    height[x_rank[y_order], np.arange(n)] = ref[2] - loss[y_order, 2]
    height = np.maximum.accumulate(np.maximum.accumulate(height, axis=0), axis=1)
    x, y = loss[x_order, 0], loss[y_order, 1]
    dx, dy = np.append(x[1:], ref[0]) - x, np.append(y[1:], ref[1]) - y
    return float(np.sum(np.sum(height * dy, axis=1) * dx))


def _hv_min(loss: np.ndarray, ref: np.ndarray, *, assume_pareto: bool = False) -> float:
    """Exact hypervolume of minimisation points that all satisfy ``loss <= ref`` (none NaN)."""
    if loss.shape[0] == 0:
        return 0.0
    m = loss.shape[1]
    if m == 1:
        return float(ref[0] - loss[:, 0].min())
    if m == 2:
        return _hv_2d(loss, ref)
    if m == 3:  # Optuna's 3-D case goes through BLAS (its dimensions beyond do not)
        return _hv_3d(loss, ref)
    return float(_optuna_hypervolume()(loss, ref, assume_pareto=assume_pareto))


def _strictly_better(loss: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Rows strictly better than the reference in every objective (False for NaN rows)."""
    return np.all(loss < ref, axis=-1)


def hypervolume(values: np.ndarray | Sequence[Sequence[float]], reference: np.ndarray | Sequence[float],
                maximize: Sequence[bool]) -> float:
    """Exact hypervolume dominated by ``values`` (n, m) and bounded by ``reference``.

    ``reference`` is given in the objectives' own directions (a reference accuracy of 70 with
    ``maximize=True`` counts only points with accuracy > 70). Points not strictly better than the
    reference in every objective, and NaN rows, contribute nothing; no points gives 0.0. 2-D uses a
    sort sweep; 3-D and more use Optuna's WFG implementation.
    """
    loss = to_minimization(values, maximize)
    ref = _reference_min(reference, maximize)
    return _hv_min(loss[_strictly_better(loss, ref)], ref)


def _improvement_2d(front: np.ndarray, points: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Exact hypervolume each of ``points`` (p, 2) would add to a 2-D ``front``, in closed form.

    ``front`` must be mutually non-dominated, unique and strictly better than ``ref``, sorted by x
    (so y strictly decreases). Coordinates are shifted so that the reference is the origin, which keeps
    the cancellation error relative to the box, not to the objectives' magnitude. With the front's
    staircase h(x) (the best y reached at or left of x; the reference's y left of the first point), the
    gain of p is the integral over [p_x, ref_x] of max(0, h(x) - p_y); h is a step function, so the
    integral is a prefix-sum difference between two ``searchsorted`` positions.
    """
    px = points[:, 0] - ref[0]
    py = points[:, 1] - ref[1]
    xs = front[:, 0] - ref[0]
    ys = front[:, 1] - ref[1]
    # Segment j (j = -1 .. k-1) spans [x_j, x_{j+1}) at height H_j; x_k = 0 (the reference), H_{-1} = 0.
    seg_end = np.append(xs, 0.0)            # seg_end[j + 1] = end of segment j
    seg_height = np.insert(ys, 0, 0.0)      # seg_height[j + 1] = H_j
    full = np.diff(seg_end) * ys            # width × height of segments 0 .. k-1
    prefix = np.concatenate([[0.0], np.cumsum(full)])
    i0 = np.searchsorted(xs, px, side="right")      # front points with x <= p_x: p lies in segment i0 - 1
    i1 = np.searchsorted(-ys, -py, side="left")     # front points with y > p_y: segments -1 .. i1 - 1 count
    ok = (i0 <= i1) & _strictly_better(points, ref)
    i0 = np.where(ok, i0, 0)
    i1 = np.where(ok, i1, 0)
    first = (seg_end[i0] - px) * seg_height[i0]      # segment i0 - 1, clipped to start at p_x
    area = first + (prefix[i1] - prefix[i0]) - py * (seg_end[i1] - px)
    gain = np.where(ok, area, 0.0)
    return np.maximum(gain, 0.0)


def _front_min(loss: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The unique non-dominated rows of ``loss`` strictly better than ``ref``, sorted lexicographically."""
    inside = loss[_strictly_better(loss, ref)]
    if inside.shape[0] == 0:
        return inside
    inside = np.unique(inside, axis=0)
    front = inside[_pareto_mask_2d(inside) if inside.shape[1] == 2 else _pareto_mask_nd(inside)]
    return front[np.lexsort(front.T[::-1])]


def _exclusive_min(front: np.ndarray, point: np.ndarray, ref: np.ndarray) -> float:
    """Exact hypervolume ``point`` adds to ``front`` (minimisation, both strictly better than ``ref``).

    WFG's identity: the point's box minus the hypervolume of the front clipped into that box. The
    clipped front is usually much smaller once its dominated rows are dropped, and no large HV(front) is
    subtracted from a slightly larger one, so the gain keeps its relative precision.
    """
    box = float(np.prod(ref - point))
    if front.shape[0] == 0:
        return box
    return max(0.0, box - _hv_min(np.maximum(front, point), ref))


def hypervolume_history(values_in_evaluation_order: np.ndarray | Sequence[Sequence[float]],
                        reference: np.ndarray | Sequence[float], maximize: Sequence[bool]) -> np.ndarray:
    """Hypervolume after each of the n evaluations (length n, non-decreasing): a search's progress curve.

    Incremental: the hypervolume only changes when a point is strictly better than the reference and not
    weakly dominated by the front so far; then the point's exact gain is added (closed form in 2-D, its
    box minus the clipped front's hypervolume otherwise). NaN rows (failed evaluations) leave it unchanged.
    """
    loss = to_minimization(values_in_evaluation_order, maximize)
    ref = _reference_min(reference, maximize)
    m = loss.shape[1]
    history = np.zeros(loss.shape[0])
    front = np.empty((0, m))
    hv = 0.0
    for i, point in enumerate(loss):
        if _strictly_better(point, ref) and not (front.shape[0] and np.all(front <= point, axis=1).any()):
            if m == 2:
                hv += float(_improvement_2d(front, point[None, :], ref)[0])
                keep = ~np.all(point <= front, axis=1)
                front = np.insert(front[keep], np.searchsorted(front[keep, 0], point[0]), point, axis=0)
            else:
                hv += _exclusive_min(front, point, ref)
                front = np.vstack([front[~np.all(point <= front, axis=1)], point])
        history[i] = hv
    return history


def expected_hypervolume_improvement(samples: np.ndarray, observed: np.ndarray | Sequence[Sequence[float]],
                                     reference: np.ndarray | Sequence[float],
                                     maximize: Sequence[bool]) -> np.ndarray:
    """Monte-Carlo EHVI: for each candidate, the mean over its predictive draws of the exact
    HV(observed ∪ {draw}) − HV(observed).

    ``samples`` is (n_candidates, n_samples, m) in the objectives' own directions; ``observed`` (k, m)
    the values evaluated so far (NaN rows ignored). A draw with a NaN, not strictly better than the
    reference, or weakly dominated by the observed front improves nothing. 2-D is fully vectorised in
    closed form; 3-D and more compute each remaining draw's exclusive volume, its box minus the
    hypervolume of the front clipped to that box (WFG's trick), so HV(observed) is never needed.
    """
    draws = np.asarray(samples, dtype=float)
    if draws.ndim != 3:
        raise ValueError(f"samples must be (n_candidates, n_samples, m), got shape {draws.shape}")
    n_cand, n_samp, m = draws.shape
    if m != len(maximize):
        raise ValueError(f"samples have {m} objectives but maximize has {len(maximize)} entries")
    ref = _reference_min(reference, maximize)
    obs = to_minimization(_as_values(observed, maximize, name="observed"), maximize)
    if n_samp == 0 and n_cand:
        raise ValueError("samples need at least one draw per candidate")
    if n_cand == 0:
        return np.zeros(0)
    front = _front_min(obs, ref)
    flat = to_minimization(draws.reshape(-1, m), maximize)
    if m == 2:
        gains = _improvement_2d(front, flat, ref)
    else:
        gains = np.zeros(flat.shape[0])
        todo = _strictly_better(flat, ref)
        todo[todo] = ~_weakly_dominated(flat[todo], front)
        for idx in np.flatnonzero(todo):
            gains[idx] = _exclusive_min(front, flat[idx], ref)
    return gains.reshape(n_cand, n_samp).mean(axis=1)


def pareto_recall(found_ids: Iterable[object], true_front_ids: Iterable[object]) -> float:
    """Fraction of the true front's ids among ``found_ids``: how much of the real front a search reached."""
    truth = set(true_front_ids)
    if not truth:
        raise ValueError("pareto_recall is undefined for an empty true front")
    return len(truth.intersection(found_ids)) / len(truth)


def median_reference(values: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """Per-column NaN-median of ``values`` (n, m): the benchmark's reference point, the median of the whole
    space, so that hypervolume measures only the better half of every objective."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ValueError(f"values must be a non-empty 2-D (n, m) array, got shape {arr.shape}")
    all_nan = np.isnan(arr).all(axis=0)
    if all_nan.any():
        raise ValueError(f"columns {np.flatnonzero(all_nan).tolist()} hold only NaN: no median")
    return np.nanmedian(arr, axis=0)
