import numpy as np
import pytest

from nasrlm.priors.inputs import InputRoles
from nasrlm.rlm._residuals import PriorPart, blend_weights, fit_prior, out_of_sample_truth

#: the names of three inputs that are no label: a line may follow any, none is free or summed
UNNAMED = ("a", "b", "c")


def _noisy_rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(size=(n, 3))
    y = 70 + 5 * x[:, :1] + 3 * rng.normal(size=(n, 1))  # the noise a forest learns by heart in-bag
    return x, np.column_stack([y, rng.normal(size=n)])  # a second objective the prior does not predict


def test_truths_sit_as_far_from_the_prior_as_its_out_of_sample_errors():
    rng = np.random.default_rng(0)
    x, raw = _noisy_rows(rng, 200)
    objectives = ("acc", "other")
    prior, predicted, values = fit_prior(x, raw[:, :1], ("acc",), (), "forest", None,
                                         np.ones(len(x), dtype=bool), InputRoles.of(UNNAMED))
    values = np.column_stack([values, raw[:, 1]])
    rows = np.arange(150, 200)
    truth = out_of_sample_truth(prior, x, values, raw, objectives, predicted, rows)

    # the prior's residual of each moved truth is the out-of-sample one, and the other objective is as it was
    np.testing.assert_allclose(prior.residuals(x[rows], truth[:, :1])[:, 0], values[rows, 0], atol=1e-6)
    np.testing.assert_array_equal(truth[:, 1], raw[rows, 1])
    # in-bag, the forest is nearer the truth than out of sample: the moved truths lie further from it
    in_bag = np.abs(prior.residuals(x[rows], raw[rows, :1])).mean()
    assert np.abs(values[rows, 0]).mean() > 1.3 * in_bag


def test_an_unknown_truth_stays_unknown():
    rng = np.random.default_rng(1)
    x, raw = _noisy_rows(rng, 60)
    raw[3, 0] = np.nan
    prior, predicted, values = fit_prior(x, raw[:, :1], ("acc",), (), "forest", None,
                                         ~np.isnan(raw[:, 0]), InputRoles.of(UNNAMED))
    truth = out_of_sample_truth(prior, x, values, raw[:, :1], ("acc",), predicted, np.arange(10))
    assert np.isnan(truth[3, 0]) and np.isfinite(np.delete(truth[:, 0], 3)).all()


def _decoding(draws: np.ndarray):
    """What ``blend_weights`` samples: here set, 16 equal samples of ``draws`` per text."""
    return lambda texts, objectives, **options: np.repeat(draws[:, None, :], 16, axis=1)


def test_blend_weights_measure_the_model_from_the_prior_s_out_of_sample_prediction():
    rng = np.random.default_rng(2)
    x, raw = _noisy_rows(rng, 80)
    raw = raw[:, :1]
    prior, _, residuals = fit_prior(x, raw, ("acc",), (), "forest", None, np.ones(len(x), dtype=bool),
                                    InputRoles.of(UNNAMED))
    rows = np.arange(50, 80)
    texts = ["-"] * len(x)
    # the validation rows' out-of-sample prediction: the prior, fitted on them too, without their own labels
    held_out = prior.values(x[rows], prior.scores(raw[rows]) - residuals[rows] - prior.mean(x[rows]))
    part = PriorPart(prior, ("a", "b", "c"), ("acc",), "blend")
    weigh = lambda draws: blend_weights(part, _decoding(draws), texts, x, raw, residuals, ("acc",), rows)  # noqa: E731
    assert weigh(raw[rows]) == {"acc": pytest.approx(1.0)}  # a model that knows every truth
    assert weigh(held_out) == {"acc": 0.0}  # a model that says what the prior says, out of sample
    in_bag = prior.values(x[rows], np.zeros((len(rows), 1)))  # nearer the truths than out of sample
    assert weigh(in_bag)["acc"] > 0.3
