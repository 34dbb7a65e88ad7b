from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau, norm

from nasrlm.priors.prior import (
    BLEND_SHARES,
    FreeLabelPrior,
    NormalScores,
    pair_orders,
    ranked_share,
    residual_weight,
    simplest_within_noise,
    spans_decades,
    stratified_normal,
)


def test_normal_scores_round_trip_and_extend_straight_beyond_the_data() -> None:
    values = np.array([3.0, 1.0, 2.0, 2.0, 10.0])
    scores = NormalScores.fit(values)
    inside = np.array([1.0, 1.5, 2.0, 7.0, 10.0])
    np.testing.assert_allclose(scores.inverse(scores.forward(inside)), inside)
    tied = (norm.ppf(0.3) + norm.ppf(0.5)) / 2  # the two 2s are the 2nd and 3rd of 5
    assert scores.forward(np.array([2.0]))[0] == pytest.approx(tied)
    beyond = scores.forward(np.array([-8.0, 0.5, 10.5, 19.0]))
    assert beyond[0] < beyond[1] < scores.scores[0] and scores.scores[-1] < beyond[2] < beyond[3]
    # back within 10 % of the range (9) of the data: 0.5 and 10.5 are, -8 and 19 approach its ends
    back = scores.inverse(beyond)
    np.testing.assert_allclose(back[1:3], [0.5, 10.5])
    assert 0.1 < back[0] < 0.19 and 10.81 < back[3] < 10.9


def test_values_beyond_the_room_keep_their_order_short_of_its_end() -> None:
    """Far predictions are not tied at the room's end (a ranking from few records lost their order there);
    straight through the first nine tenths of the room, as before."""
    scores = NormalScores.fit(np.array([1.0, 2.0, 10.0]))  # room 0.9 on either side
    far = scores.forward(np.array([10.5, 10.81, 10.9, 12.0, 100.0, 1e6]))
    back = scores.inverse(far)
    assert back[0] == pytest.approx(10.5) and back[1] == pytest.approx(10.81)  # the knee: 10 + 0.9 * 0.9
    assert back[2] == pytest.approx(10.855)  # a tenth of the room past the knee: half the last tenth
    assert np.all(np.diff(back) > 0) and back[-1] < 10.9
    assert scores.inverse(np.array([np.inf, -np.inf])).tolist() == pytest.approx([10.9, 0.1])
    low = scores.inverse(scores.forward(np.array([-5.0, -1.0, 0.5])))
    assert np.all(np.diff(low) > 0) and low[0] > 0.1 and low[-1] == pytest.approx(0.5)


def test_positive_values_over_decades_keep_their_room_in_log_space() -> None:
    latencies = np.array([0.4, 9.0, 11.0, 20.0, 36.0])  # one chance-level cell beside the rest
    scores = NormalScores.fit(latencies)
    assert scores.log and not NormalScores.fit(latencies + 100).log
    low, high = scores.inverse(np.array([-np.inf, np.inf]))
    ratio = (36.0 / 0.4) ** 0.1  # 10 % of the log range on each side
    assert low == pytest.approx(0.4 / ratio) and high == pytest.approx(36.0 * ratio)
    assert 0.4 / ratio < scores.inverse(np.array([-50.0]))[0] < 0.4
    assert NormalScores.from_dict(scores.to_dict()).log
    assert spans_decades(np.array([0.4, np.nan, 36.0])) and not spans_decades(np.array([-1.0, 36.0]))
    assert not spans_decades(np.array([np.nan]))


def test_a_signed_quantity_keeps_its_room_in_values_and_can_reach_zero() -> None:
    """A constraint's value (feasible at 0 or less) while no trial meets it: positive over decades, but
    not a latency; in logs its room would stop above zero."""
    missed = np.array([0.05, 2.25, 4.25, 8.35])
    assert NormalScores.fit(missed).inverse(np.array([-50.0]))[0] > 0
    signed = NormalScores.fit(missed, signed=True)
    assert not signed.log and signed.inverse(np.array([-np.inf]))[0] == pytest.approx(-0.1 * 8.3)
    assert signed.inverse(np.array([-50.0]))[0] < 0


def test_a_signed_quantity_has_room_past_zero_however_far_its_values_lie_from_it() -> None:
    """No trial within 1.6 of the limit yet: the room still reaches past it (by a tenth of the range) on
    either side, so a candidate can be predicted to meet it; an unsigned quantity keeps its own room."""
    missed = np.array([1.6, 3.0, 9.1])
    assert NormalScores.fit(missed, signed=True).inverse(np.array([-np.inf]))[0] == pytest.approx(-0.75)
    assert NormalScores.fit(missed, signed=True).inverse(np.array([-50.0]))[0] < 0
    assert NormalScores.fit(missed).inverse(np.array([-np.inf]))[0] == pytest.approx(1.6 - 0.75)
    met = NormalScores.fit(-missed, signed=True)
    assert met.inverse(np.array([np.inf]))[0] == pytest.approx(0.75)
    assert NormalScores.from_dict(met.to_dict()).signed  # kept in a checkpoint


def test_one_distinct_value_maps_to_itself() -> None:
    scores = NormalScores.fit(np.array([4.0, 4.0]))
    assert scores.inverse(np.array([-1.0, 2.0])).tolist() == [4.0, 4.0]
    with pytest.raises(ValueError, match="at least one"):
        NormalScores.fit(np.array([]))


def test_prior_follows_the_free_label_that_explains_the_trials() -> None:
    rng = np.random.default_rng(0)
    reference = rng.lognormal(size=(2000, 2))
    free = reference[:30]
    # objective 0 rises with free label 1; objective 1 falls with free label 0
    values = np.stack([np.log(free[:, 1]) + 0.1 * rng.normal(size=30), 5 - free[:, 0]], axis=1)
    prior = FreeLabelPrior.fit(free, values, reference)
    assert prior.label.tolist() == [1, 0] and prior.slope[0] > 0.8 and prior.slope[1] < -0.8
    residuals = prior.residuals(free, values)
    assert np.abs(residuals).max() < 0.6
    np.testing.assert_allclose(prior.values(free, residuals), values)
    # knowing nothing (zero residual), unseen architectures are ranked by their free label
    unseen = reference[1000:1200]
    guess = prior.values(unseen, np.zeros((200, 4, 2)))
    assert guess.shape == (200, 4, 2)
    assert kendalltau(guess[:, 0, 0], unseen[:, 1])[0] > 0.99
    assert kendalltau(guess[:, 0, 1], -unseen[:, 0])[0] > 0.99


def test_prior_without_any_relation_is_flat() -> None:
    free = np.ones((5, 2))
    prior = FreeLabelPrior.fit(free, np.arange(5.0)[:, None], np.random.default_rng(1).random((50, 2)))
    assert prior.slope.tolist() == [0.0]
    np.testing.assert_allclose(prior.values(free, prior.residuals(free, np.arange(5.0)[:, None])),
                               np.arange(5.0)[:, None])


def test_residual_weight_is_the_clipped_slope_of_truth_on_prediction() -> None:
    predicted = np.array([1.0, -2.0, 0.5, np.nan])
    assert residual_weight(predicted, predicted) == 1.0
    assert residual_weight(predicted, 0.5 * predicted) == pytest.approx(0.5)
    assert residual_weight(predicted, 3 * predicted) == 1.0  # never amplified
    assert residual_weight(predicted, -predicted) == 0.0  # wrong way round: the prior alone
    assert residual_weight(np.zeros(3), np.ones(3)) == 1.0  # nothing predicted, nothing to judge


def test_a_ranked_share_is_the_blend_that_ranks_the_held_out_rows_best() -> None:
    rng = np.random.default_rng(0)
    truth = rng.normal(size=40)
    centre = truth + rng.normal(size=40)  # the prior, off by noise
    exact = truth - centre  # a model that knows every truth
    assert ranked_share(centre, exact, exact) == 1.0
    assert ranked_share(centre, np.zeros(40), exact) == 0.0  # says what the prior says: ties, the smaller
    assert ranked_share(centre, -exact, exact) == 0.0  # wrong way round: the prior alone
    assert ranked_share(centre, rng.normal(size=40), exact) < 1.0  # noise ranks worse than the prior
    half = 0.5 * exact + 0.3 * rng.normal(size=40)  # a part of the way, noisily: a share between
    assert ranked_share(centre, half, exact) > 0.0
    assert ranked_share(centre[:2], exact[:2], exact[:2]) == 0.0  # two rows: nothing to judge by
    with_gap = np.r_[exact[:10], np.nan]
    assert ranked_share(np.r_[centre[:10], 0.0], with_gap, np.r_[exact[:10], 1.0]) == 1.0  # NaN skipped
    shares = {ranked_share(centre, rng.normal(size=40), exact) for _ in range(5)}
    assert shares <= set(BLEND_SHARES)


def test_stratified_normal_draws_keep_every_row_s_median_and_spread_and_shuffle_them() -> None:
    draws = stratified_normal(5, 16, np.random.default_rng(0))
    assert draws.shape == (5, 16)
    assert np.allclose(np.median(draws, axis=1), 0.0)
    expected = np.sort(norm.ppf((np.arange(16) + 0.5) / 16))
    assert np.allclose(np.sort(draws, axis=1), expected)  # the same quantiles in every row ...
    assert len({tuple(row) for row in draws}) == 5  # ... in another order
    assert np.array_equal(draws, stratified_normal(5, 16, np.random.default_rng(0)))


def test_the_simplest_prediction_within_noise_of_the_best_is_trusted() -> None:
    rng = np.random.default_rng(3)
    truth = rng.normal(size=20)
    simple = truth + rng.normal(scale=0.6, size=20)
    barely = simple + rng.normal(scale=0.05, size=20)  # about as good: within noise on 20 rows
    clearly = truth + rng.normal(scale=0.05, size=20)  # far better
    assert simplest_within_noise([simple, barely], truth) == 0
    assert simplest_within_noise([simple, clearly], truth) == 1
    assert simplest_within_noise([clearly, simple], truth) == 0  # the simplest is the best: kept
    assert simplest_within_noise([simple, clearly], truth) == simplest_within_noise([simple, clearly], truth)
    assert simplest_within_noise([simple[:2], clearly[:2]], truth[:2]) == 0  # nothing to judge by


class _Slope:
    """A line through the first input, its slope's sign from the rows it was fitted on."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.sign = np.sign(np.corrcoef(x[:, 0], y)[0, 1])

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.sign * x[:, 0]


def test_a_fixed_line_judged_left_pair_out_scores_its_own_rank_correlation() -> None:
    # leave-one-out leans each row's prediction away from its value, and on few rows with a weak trend the
    # line's τ falls below zero; left pair out, a line that keeps its direction scores exactly its τ
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 1))
    y = 0.4 * x[:, 0] + rng.normal(size=16)
    orders = pair_orders(lambda keep: _Slope(x[keep], y[keep]), x)
    assert np.array_equal(orders, -orders.T)
    assert np.array_equal(orders, np.sign(x[:, None, 0] - x[None, :, 0]))
    truth_orders = np.sign(y[:, None] - y[None, :])
    assert np.isclose((orders * truth_orders).sum() / (16 * 15), kendalltau(x[:, 0], y).statistic)


def test_pairs_and_rows_are_judged_by_the_same_rule() -> None:
    rng = np.random.default_rng(3)
    truth = rng.normal(size=20)
    simple = truth + rng.normal(scale=0.6, size=20)
    clearly = truth + rng.normal(scale=0.05, size=20)
    as_pairs = [np.sign(p[:, None] - p[None, :]) for p in (simple, clearly)]
    assert simplest_within_noise(as_pairs, truth) == simplest_within_noise([simple, clearly], truth) == 1
    assert simplest_within_noise([as_pairs[0], clearly], truth) == 1  # rows beside pairs: read as pairs
    assert simplest_within_noise([as_pairs[1], simple], truth) == 0
