import numpy as np
import pytest

from nasrlm.calibration import central_coverage, is_calibrated


def test_samples_from_the_true_distribution_cover_about_their_mass():
    rng = np.random.default_rng(0)
    rows, draws = 4000, 64
    centre = rng.normal(size=(rows, 1))
    samples = centre[:, :, None] + rng.normal(size=(rows, draws, 1))
    truth = centre + rng.normal(size=(rows, 1))  # drawn from the same distribution as the samples
    coverage = central_coverage(samples, truth)
    assert coverage.shape == (1,)
    assert 0.76 < coverage[0] < 0.84  # a 64-sample interval is a little narrow: about 0.78 expected
    assert is_calibrated(coverage[0])


def test_an_overconfident_and_an_underconfident_model_are_told_apart():
    rng = np.random.default_rng(1)
    truth = rng.normal(size=(2000, 2))
    noise = rng.normal(size=(2000, 64, 2))
    narrow = truth[:, None, :] + rng.normal(size=(2000, 1, 2)) + 0.1 * noise  # right centre spread, too sure
    wide = truth[:, None, :] + 5.0 * noise
    assert (central_coverage(narrow, truth) < 0.2).all()
    assert (central_coverage(wide, truth) > 0.95).all()
    assert not is_calibrated(0.5) and not is_calibrated(0.99)


def test_interval_ends_count_and_nan_truths_are_left_out():
    samples = np.array([[[1.0], [1.0], [1.0]], [[2.0], [3.0], [4.0]], [[0.0], [0.0], [0.0]]])
    truth = np.array([[1.0], [9.0], [np.nan]])  # a point mass holds its own value; 9 is outside 2-4
    assert central_coverage(samples, truth)[0] == pytest.approx(0.5)
    assert np.isnan(central_coverage(samples[2:], truth[2:])[0])  # no known truth: undefined


def test_shapes_that_disagree_are_refused():
    with pytest.raises(ValueError, match="disagree"):
        central_coverage(np.zeros((3, 4, 2)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="mass"):
        central_coverage(np.zeros((3, 4, 1)), np.zeros((3, 1)), mass=1.0)
