import numpy as np
import pytest

from nasrlm.rlm.calibration import Spread, central_coverage, fit_spread, is_calibrated


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


def _overconfident(rng: np.random.Generator, rows: int, narrow: float) -> tuple[np.ndarray, np.ndarray]:
    """Samples whose spread is ``narrow`` times the truth's, which differs from row to row."""
    centre = rng.normal(size=rows)
    width = rng.uniform(0.5, 2.0, size=rows)  # some rows are surer than others, and rightly so
    samples = centre[:, None] + narrow * width[:, None] * rng.normal(size=(rows, 32))
    truth = centre + width * rng.normal(size=rows)
    return samples, truth


def test_a_fitted_spread_makes_an_overconfident_model_honest_on_new_rows():
    rng = np.random.default_rng(2)
    samples, truth = _overconfident(rng, 400, narrow=0.2)
    spread = fit_spread(samples, truth)
    assert spread.scale > 2  # the decoded spread stretched, not replaced by one width for all
    new_samples, new_truth = _overconfident(rng, 4000, narrow=0.2)
    before = central_coverage(new_samples[..., None], new_truth[:, None])[0]
    after = central_coverage(spread.widen(new_samples, rng)[..., None], new_truth[:, None])[0]
    assert before < 0.4 and 0.72 < after < 0.88


def test_rows_decoded_as_one_value_get_a_floor_and_keep_their_median():
    rng = np.random.default_rng(3)
    centre = rng.normal(size=600)
    samples = np.repeat(centre[:, None], 32, axis=1)  # learned by heart: one value every time
    truth = centre + rng.normal(size=600)
    spread = fit_spread(samples[:300], truth[:300])
    assert spread.floor > 0.5
    widened = spread.widen(samples[300:], rng)
    np.testing.assert_array_equal(np.median(widened, axis=1), centre[300:])  # the prediction stays, exactly
    coverage = central_coverage(widened[..., None], truth[300:, None])[0]
    assert 0.7 < coverage < 0.9


def test_a_latency_spanning_decades_is_widened_in_logs_and_never_below_zero():
    rng = np.random.default_rng(4)
    centre = np.exp(rng.uniform(np.log(0.5), np.log(40.0), size=600))  # ms: fast cells beside slow ones
    samples = np.repeat(centre[:, None], 32, axis=1)  # decoded as one value: the floor does the widening
    truth = centre * np.exp(0.3 * rng.normal(size=600))  # errors in proportion to the latency
    linear, log = fit_spread(samples[:300], truth[:300]), fit_spread(samples[:300], truth[:300], log=True)
    assert log.log and not linear.log
    for spread in (linear, log):
        widened = spread.widen(samples[300:], rng)
        np.testing.assert_array_equal(np.median(widened, axis=1), centre[300:])
        assert 0.7 < central_coverage(widened[..., None], truth[300:, None])[0] < 0.9
    assert (linear.widen(samples[300:], rng) < 0).any()  # one floor in ms for all: the fast cells go below 0
    widened = log.widen(samples[300:], rng)
    assert (widened > 0).all()
    fast, slow = np.argmin(centre[300:]), np.argmax(centre[300:])
    assert np.ptp(widened[fast]) < 0.1 * np.ptp(widened[slow])  # each row widened in proportion to its value
    with pytest.raises(ValueError, match="positive truths"):
        fit_spread(samples[:3], np.array([1.0, 0.0, 2.0]), log=True)


def test_spreads_are_checked_where_they_enter():
    with pytest.raises(ValueError, match="at least two rows"):
        fit_spread(np.zeros((3, 8)), np.array([1.0, np.nan, np.nan]))
    with pytest.raises(ValueError, match="disagree"):
        fit_spread(np.zeros((3, 8)), np.zeros(4))
    with pytest.raises(ValueError, match=">= 0"):
        Spread.from_dict({"scale": -1.0, "floor": 0.0})
    assert Spread.from_dict(Spread(2.0, 0.5).to_dict()) == Spread(2.0, 0.5)
    assert Spread.from_dict(Spread(2.0, 0.5, log=True).to_dict()) == Spread(2.0, 0.5, log=True)
    assert Spread.from_dict({"scale": 2.0, "floor": 0.5}) == Spread(2.0, 0.5)  # saved before spreads in logs
