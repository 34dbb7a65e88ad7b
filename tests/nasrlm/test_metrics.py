"""Every metric against a brute-force definition on small random data, plus edge cases and directions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nasrlm.metrics import (
    expected_hypervolume_improvement,
    hypervolume,
    hypervolume_history,
    median_reference,
    pareto_mask,
    pareto_recall,
    to_minimization,
)


def brute_pareto(values: np.ndarray, maximize: list[bool]) -> np.ndarray:
    loss = np.where(maximize, -values, values)
    mask = np.zeros(len(loss), dtype=bool)
    for i, p in enumerate(loss):
        if np.isnan(p).any():
            continue
        mask[i] = not any(
            np.all(q <= p) and np.any(q < p) for j, q in enumerate(loss) if j != i and not np.isnan(q).any()
        )
    return mask


def brute_hypervolume(values: np.ndarray, reference: np.ndarray, maximize: list[bool]) -> float:
    """Inclusion–exclusion over all subsets of the points strictly better than the reference."""
    loss = np.where(maximize, -values, values)
    ref = np.where(maximize, -reference, reference)
    pts = [p for p in loss if np.all(p < ref)]
    total = 0.0
    for size in range(1, len(pts) + 1):
        for subset in itertools.combinations(pts, size):
            corner = np.max(subset, axis=0)
            total += (-1) ** (size + 1) * float(np.prod(ref - corner))
    return total


def voxel_hypervolume(points: np.ndarray, ref: int) -> int:
    """Number of unit cells [a, a+1) × … below ``ref`` that some integer point weakly dominates (minimise)."""
    grid = np.stack(np.meshgrid(*[np.arange(ref)] * points.shape[1], indexing="ij"), axis=-1).reshape(
        -1, points.shape[1])
    covered = np.zeros(len(grid), dtype=bool)
    for p in points:
        covered |= np.all(grid >= p, axis=1)
    return int(covered.sum())


@pytest.mark.parametrize("m", [2, 3, 5])
def test_pareto_mask_matches_brute_force_with_ties_and_duplicates(m: int) -> None:
    rng = np.random.default_rng(m)
    for trial in range(30):
        values = rng.integers(0, 5, size=(rng.integers(1, 25), m)).astype(float)
        maximize = list(rng.random(m) < 0.5)
        np.testing.assert_array_equal(pareto_mask(values, maximize), brute_pareto(values, maximize),
                                      err_msg=f"trial {trial}")


@pytest.mark.parametrize("m", [2, 4])
def test_pareto_mask_across_blocks_matches_brute_force(m: int) -> None:
    rng = np.random.default_rng(10 + m)
    values = rng.normal(size=(1500, m))
    values = np.vstack([values, values[:40]])  # duplicates far apart in evaluation order
    maximize = [True] + [False] * (m - 1)
    loss = to_minimization(values, maximize)
    le = np.all(loss[None, :, :] <= loss[:, None, :], axis=2)
    lt = np.any(loss[None, :, :] < loss[:, None, :], axis=2)
    expected = ~np.any(le & lt, axis=1)
    np.testing.assert_array_equal(pareto_mask(values, maximize), expected)


def test_pareto_mask_keeps_duplicates_and_drops_nan_rows() -> None:
    values = np.array([[1.0, 5.0], [1.0, 5.0], [2.0, 2.0], [np.nan, 0.0], [3.0, 3.0], [0.0, np.nan]])
    expected = [True, True, True, False, False, False]
    np.testing.assert_array_equal(pareto_mask(values, [False, False]), expected)
    assert not pareto_mask(np.full((3, 3), np.nan), [False] * 3).any()
    assert pareto_mask(np.empty((0, 2)), [False, False]).shape == (0,)


def test_pareto_mask_follows_directions() -> None:
    # acc (maximise) vs latency (minimise): (90, 5) dominates (80, 6); (70, 1) is fast enough to stay.
    values = np.array([[90.0, 5.0], [80.0, 6.0], [70.0, 1.0]])
    np.testing.assert_array_equal(pareto_mask(values, [True, False]), [True, False, True])
    np.testing.assert_array_equal(pareto_mask(values, [False, True]), [False, True, True])
    np.testing.assert_array_equal(pareto_mask(values, [False, False]), [False, False, True])


def test_pareto_mask_rejects_wrong_shapes() -> None:
    with pytest.raises(ValueError, match="maximize has 3"):
        pareto_mask(np.zeros((4, 2)), [True, False, False])
    with pytest.raises(ValueError, match="2-D"):
        pareto_mask(np.zeros(4), [True])


def test_to_minimization_copies_and_negates_maximised_columns() -> None:
    values = np.array([[1.0, 2.0], [3.0, 4.0]])
    out = to_minimization(values, [True, False])
    np.testing.assert_array_equal(out, [[-1.0, 2.0], [-3.0, 4.0]])
    assert values[0, 0] == 1.0


@pytest.mark.parametrize("m", [2, 3, 4])
def test_hypervolume_matches_inclusion_exclusion(m: int) -> None:
    rng = np.random.default_rng(100 + m)
    for _ in range(40):
        values = rng.uniform(0, 10, size=(rng.integers(0, 7), m))
        maximize = list(rng.random(m) < 0.5)
        reference = rng.uniform(2, 8, size=m)
        assert hypervolume(values, reference, maximize) == pytest.approx(
            brute_hypervolume(values, reference, maximize), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("m", [2, 3])
def test_hypervolume_equals_voxel_count_on_integer_grid(m: int) -> None:
    rng = np.random.default_rng(7 * m)
    for _ in range(20):
        points = rng.integers(0, 6, size=(rng.integers(1, 12), m)).astype(float)
        assert hypervolume(points, [6.0] * m, [False] * m) == pytest.approx(voxel_hypervolume(points, 6))


def test_single_objective_hypervolume_is_the_distance_to_the_reference() -> None:
    assert hypervolume([[1.0], [3.0], [9.0]], [5.0], [False]) == pytest.approx(4.0)
    assert hypervolume([[80.0], [75.0]], [70.0], [True]) == pytest.approx(10.0)
    got = expected_hypervolume_improvement(np.array([[[0.0], [4.0]]]), [[1.0]], [5.0], [False])
    np.testing.assert_allclose(got, [0.5])


def test_hypervolume_direction_of_reference() -> None:
    # Accuracy 80 against reference 70 (maximise), latency 2 against reference 5 (minimise): box 10 × 3.
    assert hypervolume([[80.0, 2.0]], [70.0, 5.0], [True, False]) == pytest.approx(30.0)
    # The same point is worse than the reference if accuracy were minimised.
    assert hypervolume([[80.0, 2.0]], [70.0, 5.0], [False, False]) == 0.0
    values = np.array([[80.0, 2.0, 0.5], [75.0, 1.0, 0.9]])
    flipped = values * np.array([-1.0, 1.0, -1.0])
    assert hypervolume(values, [70.0, 5.0, 0.1], [True, False, True]) == pytest.approx(
        hypervolume(flipped, [-70.0, 5.0, -0.1], [False, False, False]))


@pytest.mark.parametrize("m", [2, 3])
def test_hypervolume_edge_cases(m: int) -> None:
    ref = np.full(m, 1.0)
    assert hypervolume(np.empty((0, m)), ref, [False] * m) == 0.0
    # On or beyond the reference in some objective: nothing.
    worse = np.array([[1.0] + [0.0] * (m - 1), [2.0] * m, [0.5] * (m - 1) + [1.0]])
    assert hypervolume(worse, ref, [False] * m) == 0.0
    point = np.full((1, m), 0.5)
    one = hypervolume(point, ref, [False] * m)
    assert one == pytest.approx(0.5 ** m)
    assert hypervolume(np.vstack([point, point, point]), ref, [False] * m) == pytest.approx(one)
    with_nan = np.vstack([point, np.full((1, m), np.nan), [[np.nan] + [0.0] * (m - 1)]])
    assert hypervolume(with_nan, ref, [False] * m) == pytest.approx(one)
    with pytest.raises(ValueError, match="reference has"):
        hypervolume(point, np.ones(m + 1), [False] * m)
    with pytest.raises(ValueError, match="finite"):
        hypervolume(point, np.full(m, np.inf), [False] * m)


@pytest.mark.parametrize("m", [2, 3, 4])
def test_hypervolume_history_equals_prefix_hypervolumes(m: int) -> None:
    rng = np.random.default_rng(200 + m)
    values = rng.integers(0, 8, size=(60, m)).astype(float)
    values[rng.random(60) < 0.1] = np.nan
    maximize = [True] + [False] * (m - 1)
    reference = np.array([2.0] + [6.0] * (m - 1))
    history = hypervolume_history(values, reference, maximize)
    expected = [hypervolume(values[: i + 1], reference, maximize) for i in range(len(values))]
    np.testing.assert_allclose(history, expected, rtol=1e-12, atol=1e-12)
    assert np.all(np.diff(history) >= 0)
    assert history[-1] > 0


def test_hypervolume_history_empty_and_all_worse() -> None:
    assert hypervolume_history(np.empty((0, 2)), [0.0, 0.0], [False, False]).shape == (0,)
    np.testing.assert_array_equal(hypervolume_history([[1.0, 1.0], [0.0, 2.0]], [0.0, 0.0], [False, False]),
                                  [0.0, 0.0])


def per_sample_ehvi(samples: np.ndarray, observed: np.ndarray, reference: np.ndarray,
                    maximize: list[bool]) -> np.ndarray:
    base = hypervolume(observed, reference, maximize)
    return np.array([
        np.mean([hypervolume(np.vstack([observed, s[None, :]]), reference, maximize) - base for s in cand])
        for cand in samples
    ])


@pytest.mark.parametrize("m", [2, 3])
def test_ehvi_matches_per_sample_loop(m: int) -> None:
    rng = np.random.default_rng(300 + m)
    for integer in (False, True):  # integers give ties with the front
        observed = rng.uniform(0, 10, size=(8, m))
        samples = rng.uniform(0, 10, size=(25, 6, m))
        if integer:
            observed, samples = np.round(observed), np.round(samples)
        observed[0] = np.nan
        samples[0, 0] = np.nan
        maximize = [True] + [False] * (m - 1)
        reference = np.array([3.0] + [7.0] * (m - 1))
        got = expected_hypervolume_improvement(samples, observed, reference, maximize)
        assert got.shape == (25,)
        np.testing.assert_allclose(got, per_sample_ehvi(samples, observed, reference, maximize),
                                   rtol=1e-9, atol=1e-9)
        assert np.any(got > 0) and np.any(got == 0)


@pytest.mark.parametrize("m", [2, 3])
def test_ehvi_without_observations_is_the_mean_box(m: int) -> None:
    samples = np.array([[[0.5] * m, [2.0] * m], [[1.5] * m, [0.0] * m]])  # minimise, reference 1
    got = expected_hypervolume_improvement(samples, np.empty((0, m)), np.ones(m), [False] * m)
    np.testing.assert_allclose(got, [0.5 * 0.5 ** m, 0.5])


def test_ehvi_of_a_point_on_the_front_is_zero_and_shapes_are_checked() -> None:
    observed = np.array([[90.0, 5.0], [80.0, 1.0]])
    samples = observed[:, None, :]
    np.testing.assert_array_equal(
        expected_hypervolume_improvement(samples, observed, [50.0, 20.0], [True, False]), [0.0, 0.0])
    assert expected_hypervolume_improvement(np.empty((0, 4, 2)), observed, [50.0, 20.0],
                                            [True, False]).shape == (0,)
    with pytest.raises(ValueError, match="n_candidates, n_samples, m"):
        expected_hypervolume_improvement(observed, observed, [50.0, 20.0], [True, False])
    with pytest.raises(ValueError, match="maximize has 2"):
        expected_hypervolume_improvement(np.zeros((2, 3, 3)), observed, [50.0, 20.0], [True, False])
    with pytest.raises(ValueError, match="observed have 3 objectives"):
        expected_hypervolume_improvement(samples, np.zeros((2, 3)), [50.0, 20.0], [True, False])
    with pytest.raises(ValueError, match="at least one draw"):
        expected_hypervolume_improvement(np.zeros((2, 0, 2)), observed, [50.0, 20.0], [True, False])


def test_pareto_recall() -> None:
    assert pareto_recall([1, 2, 7, 9], {1, 2, 3, 4}) == pytest.approx(0.5)
    assert pareto_recall([], [5]) == 0.0
    assert pareto_recall(["a", "a", "b"], ["a", "b"]) == 1.0
    with pytest.raises(ValueError, match="empty true front"):
        pareto_recall([1], [])


def test_median_reference() -> None:
    values = np.array([[1.0, 10.0], [3.0, np.nan], [2.0, 30.0], [np.nan, 20.0]])
    np.testing.assert_array_equal(median_reference(values), [2.0, 20.0])
    with pytest.raises(ValueError, match="only NaN"):
        median_reference(np.array([[1.0, np.nan], [2.0, np.nan]]))
    with pytest.raises(ValueError, match="non-empty"):
        median_reference(np.empty((0, 2)))


def test_the_3d_hypervolume_is_optunas_summed_without_blas() -> None:
    # Optuna's 3-D case multiplies through BLAS, whose kernels add in a processor's own order; ours sums
    # the same cells with numpy's pairwise sums (nasrlm.numerics): the same volume, ties and repeats included
    from optuna._hypervolume import compute_hypervolume

    from nasrlm.metrics import hypervolume

    rng = np.random.default_rng(0)
    for trial in range(60):
        points = rng.random((int(rng.integers(1, 30)), 3))
        if trial % 3 == 0:
            points = np.round(points, 1)  # ties in every coordinate
        reference = np.full(3, 1.1)
        expected = compute_hypervolume(points, reference)
        assert hypervolume(points, reference, [False] * 3) == pytest.approx(expected, rel=1e-12, abs=1e-15)
