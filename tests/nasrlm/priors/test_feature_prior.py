"""The feature prior: forests kept as arrays, exact leave-one-out ridge, out-of-sample residuals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from nasrlm.priors.feature_prior import KINDS, FeaturePrior
from nasrlm.priors.gaussian_process import GaussianProcess
from nasrlm.priors.models import NESTED_ROWS, Forest, Line, Ridge


def _data(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((n, 5)) + 0.1
    return x, 3 * x[:, 0] + np.sin(6 * x[:, 1]) + rng.normal(0, 0.05, n)


def test_the_forest_as_arrays_predicts_what_scikit_learn_does() -> None:
    from sklearn.ensemble import RandomForestRegressor

    from nasrlm.priors import models

    x, y = _data()
    forest, oob = Forest.fit(x, y, seed=3)
    reference = RandomForestRegressor(n_estimators=models.TREES, max_features=0.5,
                                      min_samples_leaf=models.MIN_LEAF, oob_score=True, random_state=3,
                                      n_jobs=1).fit(x.astype(np.float32), y)
    test = np.random.default_rng(1).random((40, 5))
    np.testing.assert_allclose(forest.predict(test), reference.predict(test.astype(np.float32)), atol=1e-12)
    np.testing.assert_allclose(oob, reference.oob_prediction_)


def test_the_ridge_leave_one_out_predictions_are_exact() -> None:
    x, y = _data(40)
    ridge, held_out = Ridge.fit(x, y)
    for i in (0, 17):
        keep = np.arange(len(y)) != i
        xs = x - ridge.centre  # centred as in the fit
        design = np.hstack([np.ones((keep.sum(), 1)), xs[keep]])
        penalty = ridge.alpha * np.diag([0.0, *np.ones(x.shape[1])])
        coef = np.linalg.solve(design.T @ design + penalty, design.T @ y[keep])
        assert held_out[i] == pytest.approx(coef[0] + xs[i] @ coef[1:], abs=1e-9)


def test_auto_takes_the_model_that_errs_less_out_of_sample() -> None:
    x, y = _data(200)
    x[:, 3] = np.exp(np.random.default_rng(2).normal(size=200))  # log-normal: its log is linear in scores
    noise = np.random.default_rng(5).normal(0, 0.05, 200)
    steps = np.where(x[:, 2] > 0.6, 5.0, 1.0) * np.where(x[:, 4] > 0.4, 2.0, 1.0) + noise
    values = np.column_stack([np.exp(y), x[:, 3] ** 2, steps])  # a smooth bumpy one, a power law, steps
    prior, held_out = FeaturePrior.fit(x, values, kind="auto")
    assert prior.kinds == ["gp", "ridge", "forest"]
    assert spearmanr(held_out[:, 0], values[:, 0])[0] > 0.9  # out of sample, yet informative
    # the training rows' residuals are out of sample: larger than in-sample ones for a forest
    in_sample = prior.residuals(x, values)[:, 0]
    out_of_sample = prior.objectives[0].forward(values[:, 0]) - held_out[:, 0]
    assert np.abs(out_of_sample).mean() > 1.5 * np.abs(in_sample).mean()


@pytest.mark.parametrize("kind", ["forest", "trend-forest", "ridge", "gp"])
def test_a_prior_round_trips_through_json_and_arrays_and_maps_residuals_back(kind: str) -> None:
    x, y = _data(60)
    values = np.column_stack([y + 10, np.where(np.arange(60) % 3, y * 2 + 5, np.nan)])
    prior, held_out = FeaturePrior.fit(x, values, kind=kind)
    assert prior.kinds == [kind, kind]
    assert np.isnan(held_out[::3, 1]).all() and not np.isnan(held_out[1::3, 1]).any()
    again = FeaturePrior.from_dict(json.loads(json.dumps(prior.to_dict())), prior.arrays())
    np.testing.assert_array_equal(again.mean(x), prior.mean(x))
    known = ~np.isnan(values[:, 1])
    back = prior.values(x, prior.residuals(x, values))
    np.testing.assert_allclose(back[known], values[known])


def test_the_line_leave_one_out_predictions_choose_the_input_again_on_few_rows() -> None:
    rng = np.random.default_rng(4)
    for n in (12, NESTED_ROWS + 10):
        x = rng.normal(size=(n, 6))
        z = x[:, 2] + 0.9 * x[:, 4] + rng.normal(0, 0.3, n)  # two inputs about as good
        line, held_out = Line.fit(x, z)
        for i in (0, n // 2):
            keep = np.arange(n) != i
            # nested on few rows: the input is chosen again without the row; above, the line's own
            j = Line.through(x[keep], z[keep]).input if n <= NESTED_ROWS else line.input
            slope, intercept = np.polyfit(x[keep, j], z[keep], 1)
            assert held_out[i] == pytest.approx(intercept + slope * x[i, j], abs=1e-6)


def test_auto_follows_the_free_label_from_few_rows_among_many_inputs() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((16, 100)) + 0.1
    y = 70 + 5 * np.log(x[:, 0]) + rng.normal(0, 0.5, 16)  # accuracy up with the parameter count
    free = np.zeros(100, dtype=bool)
    free[:2] = True
    prior, _ = FeaturePrior.fit(x, y[:, None], kind="auto", free_inputs=free)
    assert prior.kinds == ["line"] and prior.models[0].input == 0
    test = rng.random((200, 100)) + 0.1
    assert spearmanr(prior.mean(test)[:, 0], test[:, 0])[0] == pytest.approx(1.0)
    again = FeaturePrior.from_dict(json.loads(json.dumps(prior.to_dict())), prior.arrays())
    np.testing.assert_array_equal(again.mean(test), prior.mean(test))


def test_bad_inputs_are_refused() -> None:
    x, y = _data(20)
    with pytest.raises(ValueError, match="kind"):
        FeaturePrior.fit(x, y[:, None], kind="knn")
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        FeaturePrior.fit(x, y[:, None], kind="auto")
    assert "auto" in KINDS


def test_few_rows_fit_a_ridge_only() -> None:
    x, y = _data(5)
    prior, _ = FeaturePrior.fit(x, y[:, None], kind="forest")
    assert prior.kinds == ["ridge"]


@pytest.mark.parametrize("rows", [2, 3, 4])
def test_auto_chooses_from_as_few_as_two_rows(rows: int) -> None:  # a constraint known on two trials
    x, y = _data(rows)
    prior, held_out = FeaturePrior.fit(x, y[:, None], kind="auto")
    assert np.isfinite(prior.mean(x)).all() and held_out.shape == (rows, 1)


def test_only_the_trend_forest_predicts_past_the_training_rows() -> None:
    x, y = _data(80)
    far = x.copy()
    far[:, 0] = 10.0  # far beyond the training range of the input the objective follows
    for kind, beyond in (("forest", False), ("trend-forest", True)):
        prior, held_out = FeaturePrior.fit(x, y[:, None], kind=kind)
        assert (prior.mean(far)[:, 0] > held_out.max() + 0.5).all() == beyond


def test_the_trend_line_follows_only_the_inputs_it_may() -> None:
    x, y = _data(80)
    prior, _ = FeaturePrior.fit(x, y[:, None], kind="trend-forest")
    assert prior.models[0].input == 0  # the input the objective follows best
    mask = np.array([False, True, True, True, True])
    prior, _ = FeaturePrior.fit(x, y[:, None], kind="trend-forest", line_inputs=mask)
    assert prior.models[0].input != 0
    far = x.copy()
    far[:, 0] = 10.0  # the forest still reads input 0, but nothing carries it past the training rows
    assert prior.mean(far)[:, 0].max() < prior.mean(x)[:, 0].max() + 0.5


def test_the_trees_disagree_more_far_from_the_training_rows() -> None:
    from sklearn.ensemble import RandomForestRegressor

    from nasrlm.priors import models

    x, y = _data(150)
    values = np.column_stack([y, np.exp(y)])
    prior, _ = FeaturePrior.fit(x[:, :2], values, kind="trend-forest")
    inside = np.random.default_rng(4).random((50, 2)) * 0.5 + 0.35
    outside = inside.copy()
    outside[:, 1] += 1.5  # where no training row lies, the trees' last splits guess differently
    d_in, d_out = prior.disagreement(inside), prior.disagreement(outside)
    assert d_in.shape == (50, 2) and (d_in > 0).all()
    assert (d_out.mean(axis=0) > d_in.mean(axis=0)).all()
    # a plain forest's disagreement is the spread of scikit-learn's trees, in normal scores
    prior, _ = FeaturePrior.fit(x[:, :2], y[:, None], kind="forest", seed=2)
    reference = RandomForestRegressor(n_estimators=models.TREES, max_features=0.5,
                                      min_samples_leaf=models.MIN_LEAF, random_state=2,
                                      n_jobs=1).fit(np.log(x[:, :2]).astype(np.float32), y)
    trees = np.stack([t.predict(np.log(inside).astype(np.float32)) for t in reference.estimators_], axis=1)
    expected = prior.objectives[0].forward(trees).std(axis=1)
    np.testing.assert_allclose(prior.disagreement(inside)[:, 0], expected, atol=1e-9)
    # a ridge has no trees
    ridge, _ = FeaturePrior.fit(x[:, :2], y[:, None], kind="ridge")
    assert np.isnan(ridge.disagreement(inside)).all()


def test_the_gaussian_process_leave_one_out_predictions_are_exact() -> None:
    x, y = _data(40)
    z = (y - y.mean()) / y.std()
    gp, held_out = GaussianProcess.fit(x, z)
    assert gp.noise > 0
    for i in (0, 23):
        keep = np.arange(len(z)) != i
        alone = GaussianProcess(gp.centre, gp.scale, gp.train[keep], np.zeros(0), np.zeros((0, 0)), gp.mean,
                                gp.length, gp.linear, gp.noise)
        kernel = alone._cross(x[keep])  # the kernel among the other rows, from their raw inputs
        weights = np.linalg.solve(kernel + gp.noise * np.eye(keep.sum()), z[keep] - gp.mean)
        assert held_out[i] == pytest.approx(gp.mean + alone._cross(x[i:i + 1]) @ weights, abs=1e-8)


def test_the_gaussian_process_is_sure_near_its_rows_and_carries_its_line_past_them() -> None:
    x, y = _data(80)
    z = (y - y.mean()) / y.std()
    gp, held_out = GaussianProcess.fit(x, z)
    assert spearmanr(held_out, z)[0] > 0.9
    far = x.copy()
    far[:, 1] = 5.0  # beyond every row on an input the objective follows only through a wave
    assert (gp.std(far) > 2 * gp.std(x).max()).all()
    prior, _ = FeaturePrior.fit(x, y[:, None], kind="gp")
    assert prior.kinds == ["gp"]
    np.testing.assert_allclose(prior.disagreement(far)[:, 0], prior.models[0].std(prior._x(far)[1]))
    beyond = x.copy()
    beyond[:, 0] = 3.0  # three times the training range of the input the objective grows with
    assert (prior.mean(beyond)[:, 0] > held_out.max()).mean() > 0.9


def test_a_gaussian_process_of_many_rows_fits_a_subset_and_predicts_the_rest(monkeypatch) -> None:
    from nasrlm.priors import gaussian_process

    monkeypatch.setattr(gaussian_process, "GP_MAX_ROWS", 30)
    x, y = _data(50)
    z = (y - y.mean()) / y.std()
    gp, held_out = GaussianProcess.fit_rows(x, z, seed=0)
    assert gp.train.shape == (30, 5)
    seen = (np.abs(gp.train[:, None, :] - ((x - gp.centre) / gp.scale)[None]).sum(axis=2) < 1e-12).any(axis=0)
    assert seen.sum() == 30
    np.testing.assert_allclose(held_out[~seen], gp.predict(x[~seen]))
    assert spearmanr(held_out, z)[0] > 0.8


def _cells(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of three noise labels and three node counts (a stem's five 3x3 convolutions, then 15 a cell
    edge), and a latency margin that adds up the counts, as NB201's fpga latency does; the counts' mask."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, 3, size=(n, 3))
    counts = np.array([5, 2, 2]) + 15 * edges
    latency = 1.133 + edges @ np.array([1.258, 0.515, 0.410]) - 2.8
    return np.hstack([rng.random((n, 3)) + 0.1, counts]), latency, np.array([False] * 3 + [True] * 3)


def test_a_constraint_s_value_that_adds_up_the_counts_is_predicted_as_their_sum() -> None:
    x, margin, summed = _cells(30, seed=0)
    prior, _ = FeaturePrior.fit(x, margin[:, None], kind="trend-forest", signed=[True], summed_inputs=summed,
                                costs=[True])
    assert prior.kinds == ["sum-forest"]
    unseen, truth, _ = _cells(200, seed=1)
    predicted = prior.objectives[0].inverse(prior.mean(unseen)[:, 0])
    assert np.abs(predicted - truth).max() < 0.05
    assert ((predicted <= 0) == (truth <= 0)).mean() > 0.95
    again = FeaturePrior.from_dict(json.loads(json.dumps(prior.to_dict())), prior.arrays())
    np.testing.assert_array_equal(again.mean(unseen), prior.mean(unseen))
    np.testing.assert_array_equal(again.disagreement(unseen), prior.disagreement(unseen))


def test_no_other_model_reads_the_summed_counts() -> None:
    x, margin, summed = _cells(30, seed=0)
    rng = np.random.default_rng(2)
    other = 3 * x[:, 0] + rng.normal(0, 0.05, len(x))  # follows a noise label, not the counts
    values = np.column_stack([other, margin, other])
    prior, held_out = FeaturePrior.fit(x, values, kind="trend-forest", signed=[False, False, True],
                                       summed_inputs=summed, costs=[False, False, True])
    assert prior.kinds == ["trend-forest", "trend-forest", "trend-forest"]  # no cost; a cost but no sum
    without, held_out_without = FeaturePrior.fit(x[:, ~summed], values, kind="trend-forest",
                                                 signed=[False, False, True])
    np.testing.assert_array_equal(prior.mean(x), without.mean(x[:, ~summed]))
    np.testing.assert_array_equal(held_out, held_out_without)


def test_a_latency_objective_that_adds_up_the_counts_is_predicted_as_their_sum() -> None:
    x, margin, summed = _cells(30, seed=0)
    latency = margin + 2.8  # positive: an objective, not a constraint's value
    prior, _ = FeaturePrior.fit(x, latency[:, None], kind="trend-forest", summed_inputs=summed, costs=[True])
    assert prior.kinds == ["sum-forest"]
    unseen, truth, _ = _cells(200, seed=1)
    assert spearmanr(prior.mean(unseen)[:, 0], truth)[0] > 0.95
    assert FeaturePrior.fit(x, latency[:, None], kind="trend-forest", summed_inputs=summed)[0].kinds == \
        ["trend-forest"]  # not said to be a cost: no sum
