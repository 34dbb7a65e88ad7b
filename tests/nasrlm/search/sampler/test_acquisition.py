"""The acquisition: greedy expected-hypervolume-improvement selection."""

from __future__ import annotations

import numpy as np

from nasrlm.search import greedy_ehvi

MAXIMIZE = [True, False]  # accuracy up, latency down
OBSERVED = np.array([[70.0, 5.0], [80.0, 8.0]])
REFERENCE = np.array([60.0, 10.0])


def certain(*points: tuple[float, float], samples: int = 4) -> np.ndarray:
    return np.repeat(np.array(points, dtype=float)[:, None, :], samples, axis=1)


def test_the_candidate_that_improves_most_comes_first_and_its_twin_does_not_follow() -> None:
    samples = certain((90.0, 7.0), (89.9, 7.0), (72.0, 4.0), (65.0, 9.0))
    picked = greedy_ehvi(samples, OBSERVED, REFERENCE, MAXIMIZE, 2, np.random.default_rng(0))
    # after believing the first pick, its near twin adds almost nothing; the fast one adds more
    assert picked == [0, 2]


def test_an_uncertain_candidate_that_may_land_beyond_the_front_beats_a_sure_one_just_behind() -> None:
    sure = certain((79.0, 8.0))
    gamble = np.array([[[60.0, 9.0], [60.0, 9.0], [95.0, 6.0], [60.0, 9.0]]])
    picked = greedy_ehvi(np.concatenate([sure, gamble]), OBSERVED, REFERENCE, MAXIMIZE, 1,
                         np.random.default_rng(0))
    assert picked == [1]


def test_when_nothing_is_expected_to_improve_the_picks_are_random_and_distinct() -> None:
    samples = certain((61.0, 9.9), (62.0, 9.9), (63.0, 9.9))
    picks = [greedy_ehvi(samples, OBSERVED, REFERENCE, MAXIMIZE, 5, np.random.default_rng(seed))
             for seed in range(8)]
    assert all(sorted(p) == [0, 1, 2] for p in picks)  # no more than there are, each once
    assert len({tuple(p) for p in picks}) > 1
