"""Optuna's own sampler test mix-ins (``optuna.testing.pytest_samplers``), run on the RLMSampler.

The mix-ins draw parameters such as ``x`` and ``y`` that build no architecture of any space, and the
RLMSampler's model only reads architectures (an objective that ignores the space gets
:class:`~nasrlm.search.SpaceMismatchError`, tested in ``test_search.py``). So here its start-up phase
outlasts every mix-in's trials: they check its Optuna bookkeeping (independent and conditional
sampling, NaN objectives, fixed and single-valued parameters, multi-objective studies, changing
ranges). Relative sampling, determinism, RDB storage and ``n_jobs > 1`` are tested on NB201 in
``test_search.py``; ``RelativeSamplerTestCase`` needs a sampler for arbitrary parameters and is not run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from optuna.samplers import BaseSampler
from optuna.testing.pytest_samplers import BasicSamplerTestCase, MultiObjectiveSamplerTestCase

from nasrlm.search import RLMSampler
from search_spaces import NasBench201


class TestRLMSamplerWithOptunasSuite(BasicSamplerTestCase, MultiObjectiveSamplerTestCase):
    @pytest.fixture
    def sampler(self) -> Callable[[], BaseSampler]:
        return lambda: RLMSampler(NasBench201(), n_startup_trials=1_000, seed=0)
