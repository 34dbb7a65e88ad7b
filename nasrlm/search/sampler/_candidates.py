"""Candidate parameters for the RLMSampler to score: the whole grid, or random draws and front mutants.

Pure functions of Optuna distributions and a numpy generator: they know nothing of architectures or of
the model, so any experiment can draw the candidates the sampler would (same seed, same draws).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

Params = dict[str, Any]


@dataclass(frozen=True)
class CandidateSettings:
    """How many candidates each proposal round scores, and of which kind (a bad number raises
    ``ValueError`` naming the field)."""

    #: random draws made once and scored every round (the pool); when the parameter grid is at most
    #: this large, every point of the grid is scored instead
    num_candidates: int = 2000
    #: random draws made anew every round beside the pool, so the search can reach beyond it
    fresh_candidates: int = 500
    #: a front member's parameter with at most this many values is mutated to each of them ...
    mutate_every_value_up_to: int = 16
    #: ... a parameter with more (or a continuous one) to this many random draws
    random_mutations: int = 4

    def __post_init__(self) -> None:
        if self.num_candidates < 1:
            raise ValueError(f"num_candidates must be positive, got {self.num_candidates}")
        for name in ("fresh_candidates", "mutate_every_value_up_to", "random_mutations"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")


def candidate_params(search_space: dict[str, BaseDistribution], settings: CandidateSettings, *,
                     pool: Sequence[Params], front: Sequence[Params], rng: np.random.Generator,
                     draw: Callable[[np.random.Generator], Params] | None = None,
                     refine: bool = False) -> list[Params]:
    """Parameters to score this round: the whole grid if it is small, else the pool, fresh draws and mutants.

    Fresh draws come from ``draw`` (default: :func:`draw_params` over ``search_space``). The mutants
    change one parameter of one member of the current ``front``; with ``refine``, they are all there
    is. Duplicates (and parameters that build the same architecture) are left to the caller, which
    knows the space.
    """
    grid = parameter_grid(search_space)
    if refine:
        return [m for parent in front for m in mutants(parent, search_space, grid, settings, rng)]
    if grid is not None and math.prod(len(v) for v in grid.values()) <= settings.num_candidates:
        names = sorted(grid)
        combos = itertools.product(*(grid[n] for n in names))
        return [dict(zip(names, combo, strict=True)) for combo in combos]
    if draw is None:
        def draw(g: np.random.Generator) -> Params:
            return draw_params(search_space, g)
    draws = list(pool)
    draws += [draw(rng) for _ in range(settings.fresh_candidates)]
    for parent in front:
        draws += mutants(parent, search_space, grid, settings, rng)
    return draws


def mutants(parent: Params, search_space: dict[str, BaseDistribution], grid: dict[str, list[Any]] | None,
            settings: CandidateSettings, rng: np.random.Generator) -> list[Params]:
    """``parent`` with one parameter changed: to every other value when it has few, else to random draws.

    Parameters of the search space that ``parent`` does not use (a conditional space's blocks beyond a
    stage's depth) are drawn once for all its mutants, so a mutant that deepens a stage has them.
    """
    missing = {name: d for name, d in search_space.items() if name not in parent}
    if missing:
        parent = {**draw_params(missing, rng), **parent}
    out = []
    for name in sorted(search_space):
        if grid is not None and len(grid[name]) <= settings.mutate_every_value_up_to:
            alternatives = grid[name]
        else:
            alternatives = [draw(search_space[name], rng) for _ in range(settings.random_mutations)]
        out.extend({**parent, name: value} for value in alternatives if value != parent.get(name))
    return out


def parameter_grid(search_space: dict[str, BaseDistribution]) -> dict[str, list[Any]] | None:
    """All values of each parameter when every one is categorical or a small integer range, else ``None``."""
    grid: dict[str, list[Any]] = {}
    for name, d in search_space.items():
        if isinstance(d, CategoricalDistribution):
            grid[name] = list(d.choices)
        elif isinstance(d, IntDistribution) and not d.log and (d.high - d.low) // d.step < 1000:
            grid[name] = list(range(d.low, d.high + 1, d.step))
        else:
            return None
    return grid


def draw_params(search_space: dict[str, BaseDistribution], rng: np.random.Generator) -> Params:
    """One random candidate: a uniform draw of every parameter, in name order (so a seed fixes it)."""
    return {name: draw(d, rng) for name, d in sorted(search_space.items())}


def draw(distribution: BaseDistribution, rng: np.random.Generator) -> Any:
    """One uniform draw from an Optuna distribution (log-uniform where it is logarithmic)."""
    if isinstance(distribution, CategoricalDistribution):
        return distribution.choices[int(rng.integers(len(distribution.choices)))]
    if isinstance(distribution, IntDistribution):
        if distribution.log:
            return int(round(math.exp(rng.uniform(math.log(distribution.low), math.log(distribution.high)))))
        return int(distribution.low + distribution.step * rng.integers((distribution.high - distribution.low)
                                                                        // distribution.step + 1))
    if isinstance(distribution, FloatDistribution):
        if distribution.log:
            return float(math.exp(rng.uniform(math.log(distribution.low), math.log(distribution.high))))
        if distribution.step is not None:
            steps = int(round((distribution.high - distribution.low) / distribution.step))
            return float(distribution.low + distribution.step * rng.integers(steps + 1))
        return float(rng.uniform(distribution.low, distribution.high))
    raise TypeError(f"cannot draw from {type(distribution).__name__}")
