"""Farthest-first selection of the architectures to label."""

from __future__ import annotations

import numpy as np
import pytest

from nasrlm.selection import farthest_first


def test_picks_cover_the_range_where_random_draws_crowd_the_middle() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 1))  # most rows near 0, few in the tails
    picked = farthest_first(x, 5, seed=1)
    assert len(set(picked.tolist())) == 5
    assert x[picked].min() == x.min() or x[picked].max() == x.max()  # the second pick is an extreme
    assert np.ptp(x[picked]) > 0.9 * np.ptp(x)
    random = x[rng.choice(len(x), 5, replace=False)]
    assert np.ptp(x[picked]) > np.ptp(random)


def test_each_pick_is_the_row_farthest_from_those_before_it() -> None:
    x = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 3.0], [5.0, 0.1], [9.0, 9.0]])
    picked = farthest_first(x, 3, seed=0, standardize=False)
    first = picked[0]
    distances = np.linalg.norm(x - x[first], axis=1)
    assert picked[1] == int(np.argmax(distances))
    assert list(farthest_first(x, 3, seed=0, standardize=False)) == list(picked)  # a seed fixes it


def test_standardized_picks_do_not_depend_on_a_column_unit() -> None:
    x = np.random.default_rng(3).normal(size=(200, 2))
    rescaled = x * np.array([1.0, 1000.0])  # milliseconds against seconds, say
    assert list(farthest_first(rescaled, 6, seed=2)) == list(farthest_first(x, 6, seed=2))
    assert list(farthest_first(rescaled, 6, seed=2, standardize=False)) != list(farthest_first(x, 6, seed=2))


def test_bad_input_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="k must be"):
        farthest_first(np.zeros((3, 2)), 4)
    with pytest.raises(ValueError, match="finite"):
        farthest_first(np.array([[0.0], [np.nan]]), 1)
    with pytest.raises(ValueError, match="shape"):
        farthest_first(np.zeros(3), 1)
