"""The acquisition: greedy expected-hypervolume-improvement selection."""

from __future__ import annotations

import numpy as np

from nasrlm.search import greedy_ehvi
from nasrlm.search._acquisition import BOOTSTRAP_REFERENCES, startup_references

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


def test_bootstrap_references_are_medians_of_resamples_of_the_start_up_trials() -> None:
    startup = np.array([[70.0, 5.0], [80.0, 8.0], [60.0, 12.0], [75.0, 3.0], [65.0, 20.0]])
    one = startup_references(startup, "startup", seed=0)
    assert one.shape == (1, 2) and np.allclose(one[0], [70.0, 8.0])
    many = startup_references(startup, "bootstrap", seed=0)
    assert many.shape == (BOOTSTRAP_REFERENCES, 2)
    assert (many >= startup.min(axis=0)).all() and (many <= startup.max(axis=0)).all()
    assert len({tuple(r) for r in many}) > 1  # they spread over where the space's median may lie
    assert np.array_equal(many, startup_references(startup, "bootstrap", seed=0))


def test_improvement_averaged_over_references_values_what_only_a_lenient_one_counts() -> None:
    observed = np.array([[50.0, 20.0]])
    samples = certain((65.0, 8.0), (55.0, 5.0))  # the first beats (60, 10) but is slower than 6
    strict = np.array([[60.0, 6.0]])
    both = np.array([[60.0, 10.0], [60.0, 6.0]])
    # from the strict reference alone nothing improves, so the pick is random; averaged, the first wins
    picks = {greedy_ehvi(samples, observed, strict, MAXIMIZE, 1, np.random.default_rng(s))[0]
             for s in range(20)}
    assert picks == {0, 1}
    assert greedy_ehvi(samples, observed, both, MAXIMIZE, 1, np.random.default_rng(0)) == [0]
