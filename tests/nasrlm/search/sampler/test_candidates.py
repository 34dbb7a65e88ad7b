"""Candidate parameters: the grid when small, else the pool, fresh draws and one-parameter mutants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from nasrlm.search import CandidateSettings, candidate_params, draw_params
from nasrlm.search.sampler._candidates import draw, mutants, parameter_grid

SMALL = {"a": CategoricalDistribution(["x", "y", "z"]), "b": IntDistribution(0, 3)}
LARGE = {"a": CategoricalDistribution(["x", "y", "z"]), "w": FloatDistribution(0.0, 1.0)}


def test_a_small_grid_is_scored_whole() -> None:
    params = candidate_params(SMALL, CandidateSettings(num_candidates=12), pool=[], front=[],
                              rng=np.random.default_rng(0))
    assert len(params) == 12 and len({tuple(sorted(p.items())) for p in params}) == 12
    # one more point than the limit allows: random draws instead
    assert len(candidate_params(SMALL, CandidateSettings(num_candidates=11, fresh_candidates=5), pool=[],
                                front=[], rng=np.random.default_rng(0))) == 5


def test_pool_fresh_draws_and_mutants_of_the_front() -> None:
    settings = CandidateSettings(num_candidates=4, fresh_candidates=6, random_mutations=3)
    rng = np.random.default_rng(1)
    pool = [draw_params(LARGE, rng) for _ in range(4)]
    parent = {"a": "x", "w": 0.5}
    params = candidate_params(LARGE, settings, pool=pool, front=[parent], rng=rng)
    assert params[:4] == pool
    fresh, children = params[4:10], params[10:]
    assert all(set(p) == {"a", "w"} for p in fresh)
    # the categorical to each other value, the float to three random draws
    assert len(children) == 2 + 3
    assert all(sum(child[k] != parent[k] for k in parent) == 1 for child in children)
    assert {c["a"] for c in children if c["w"] == 0.5} == {"y", "z"}


def test_a_refining_round_scores_the_fronts_mutants_alone() -> None:
    settings = CandidateSettings(num_candidates=12, fresh_candidates=6, random_mutations=3)
    rng = np.random.default_rng(1)
    pool = [draw_params(LARGE, rng) for _ in range(4)]
    front = [{"a": "x", "w": 0.5}, {"a": "z", "w": 0.1}]
    params = candidate_params(LARGE, settings, pool=pool, front=front, rng=rng, refine=True)
    assert 0 < len(params) <= 2 * (3 + 3)  # three random draws of each parameter (not the grid: w is
    assert not any(p in pool for p in params)  # continuous), and no pool, no fresh draws
    assert all(min(sum(p[k] != parent[k] for k in parent) for parent in front) == 1 for p in params)
    # on a small grid too: the mutants, not the whole grid
    small = candidate_params(SMALL, settings, pool=[], front=[{"a": "x", "b": 0}], rng=rng, refine=True)
    assert sorted((p["a"], p["b"]) for p in small) == [("x", 1), ("x", 2), ("x", 3), ("y", 0), ("z", 0)]


def test_a_parameter_with_many_values_mutates_to_random_draws() -> None:
    space = {"n": IntDistribution(0, 99)}
    settings = CandidateSettings(mutate_every_value_up_to=16, random_mutations=4)
    children = mutants({"n": 7}, space, parameter_grid(space), settings, np.random.default_rng(0))
    assert 1 <= len(children) <= 4 and all(0 <= c["n"] <= 99 and c["n"] != 7 for c in children)
    every = mutants({"n": 7}, space, parameter_grid(space), CandidateSettings(mutate_every_value_up_to=100),
                    np.random.default_rng(0))
    assert len(every) == 99


@pytest.mark.parametrize("distribution", [
    FloatDistribution(1e-4, 1.0, log=True), FloatDistribution(-1.0, 1.0, step=0.25),
    IntDistribution(1, 64, log=True), IntDistribution(2, 10, step=2), CategoricalDistribution([1, "a", None]),
])
def test_draws_stay_inside_their_distribution_and_a_seed_fixes_them(distribution) -> None:
    values = [draw(distribution, np.random.default_rng(0)) for _ in range(3)]
    assert values[0] == values[1] == values[2]
    for value in (draw(distribution, np.random.default_rng(s)) for s in range(50)):
        assert distribution._contains(distribution.to_internal_repr(value))
        if isinstance(distribution, FloatDistribution) and distribution.step:
            assert math.isclose((value - distribution.low) / distribution.step,
                                round((value - distribution.low) / distribution.step))


def test_a_continuous_or_log_parameter_has_no_grid() -> None:
    assert parameter_grid({"w": FloatDistribution(0, 1)}) is None
    assert parameter_grid({"n": IntDistribution(1, 64, log=True)}) is None
    assert parameter_grid(SMALL) == {"a": ["x", "y", "z"], "b": [0, 1, 2, 3]}


def test_a_mutant_that_deepens_a_stage_gets_the_parameters_its_parent_did_not_use() -> None:
    # a conditional space: "k2" exists only when depth is 3 (as OFA's blocks beyond a stage's depth)
    space = {"depth": CategoricalDistribution([2, 3]), "k0": CategoricalDistribution([3, 5]),
             "k1": CategoricalDistribution([3, 5]), "k2": CategoricalDistribution([3, 5])}
    parent = {"depth": 2, "k0": 3, "k1": 5}
    children = mutants(parent, space, parameter_grid(space), CandidateSettings(), np.random.default_rng(0))
    deeper = [c for c in children if c["depth"] == 3]
    assert len(deeper) == 1 and deeper[0]["k2"] in (3, 5)
    assert all(c["k0"] == 3 and c["k1"] == 5 for c in children if c["depth"] == 3)


def test_a_parent_that_uses_every_parameter_draws_nothing() -> None:
    rng = np.random.default_rng(0)
    mutants({"a": "x", "b": 1}, SMALL, parameter_grid(SMALL), CandidateSettings(), rng)
    assert rng.random() == np.random.default_rng(0).random()  # the stream of later draws is unchanged


@pytest.mark.parametrize(("fields", "says"), [
    ({"num_candidates": 0}, "num_candidates must be positive"),
    ({"fresh_candidates": -1}, "fresh_candidates must be 0 or more"),
    ({"mutate_every_value_up_to": -1}, "mutate_every_value_up_to must be 0 or more"),
    ({"random_mutations": -1}, "random_mutations must be 0 or more"),
])
def test_a_bad_setting_is_refused_naming_the_field(fields, says) -> None:
    with pytest.raises(ValueError, match=says):
        CandidateSettings(**fields)
