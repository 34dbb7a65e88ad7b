"""A search space as the RLMSampler sees it, through Optuna parameters: the relative search space of a
study, and random candidates drawn in it."""

from __future__ import annotations

from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution
from optuna.study import Study
from optuna.trial import FixedTrial, TrialState

from nasrlm.search.sampler._candidates import draw_params
from search_spaces import SearchSpace, SubsetSpace

#: Random architectures whose parameters (``space.params_of``) tell a conditional space's full search
#: space: a stage's deepest blocks among them, not only among the trials run.
DISTRIBUTION_DRAWS = 64


class SpaceParams:
    """``space``'s parameters; ``seed`` draws the architectures :meth:`distributions` records."""

    def __init__(self, space: SearchSpace, seed: int) -> None:
        self.space = space
        self._seed = seed
        self._space_draws = True  # until the space turns out to have no params_of
        self._distributions: dict[str, BaseDistribution] | None = None  # see distributions
        self._read: dict[tuple, frozenset[str]] = {}  # see space_names

    def relative_search_space(self, study: Study) -> dict[str, BaseDistribution]:
        """What :meth:`RLMSampler.infer_relative_search_space
        <nasrlm.search.RLMSampler.infer_relative_search_space>` answers: the parameters of completed trials
        that the space reads (:meth:`space_names`); any other is the independent sampler's, as with any
        relative sampler of Optuna's."""
        space: dict[str, BaseDistribution] = {}
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            read = self.space_names(t.params)
            for name, distribution in t.distributions.items():
                if name in read and not distribution.single():
                    space.setdefault(name, distribution)
        if space:  # once a trial drew the space's parameters: a study that draws none has none
            for name, distribution in self.distributions().items():
                space.setdefault(name, distribution)
        return space

    def space_names(self, params: dict[str, Any]) -> frozenset[str]:
        """The names among ``params`` that ``space.suggest`` reads to build its architecture from them (none
        where they build none: an objective that draws no architecture of the space), each set once."""
        key = tuple(sorted(params.items()))
        if key not in self._read:
            recorder = FixedTrial(params)
            try:
                self.space.suggest(recorder)
                self._read[key] = frozenset(recorder.params)
            except ValueError:  # FixedTrial's "missing parameter", or values the space refuses
                self._read[key] = frozenset()
        return self._read[key]

    def distributions(self) -> dict[str, BaseDistribution]:
        """What ``space.suggest`` asks for over :data:`DISTRIBUTION_DRAWS` random architectures (empty
        for a space without ``params_of``), recorded once."""
        if self._distributions is None:
            self._distributions = {}
            rng = np.random.default_rng(self._seed)
            try:
                for _ in range(DISTRIBUTION_DRAWS):
                    recorder = FixedTrial(self.space.params_of(self.space.sample(rng)))
                    self.space.suggest(recorder)
                    for name, distribution in recorder.distributions.items():
                        if not distribution.single():
                            self._distributions.setdefault(name, distribution)
            except NotImplementedError:  # no params_of: the trials' parameters are all there is
                pass
        return self._distributions

    def draw(self, search_space: dict[str, BaseDistribution], rng: np.random.Generator) -> dict[str, Any]:
        """One random candidate: a uniform draw of every parameter, or on a table subset the parameters of
        one of its rows, drawn uniformly (random parameters would crowd where they snap). Only there:
        on NB201 the subset's way searched worse (experiments/README.md, "Pareto search")."""
        params = draw_params(search_space, rng)
        if self._space_draws and isinstance(self.space, SubsetSpace):
            try:
                return {**params, **self.space.params_of(self.space.sample(rng))}
            except NotImplementedError:
                self._space_draws = False
        return params
