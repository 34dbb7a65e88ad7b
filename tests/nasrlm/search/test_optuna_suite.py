"""Optuna's own sampler test mix-ins (``optuna.testing.pytest_samplers``), run on the RLMSampler with its
default settings.

The mix-ins draw parameters such as ``x`` and ``y`` that build no architecture of any space: past its start-up
trials the RLMSampler hands them to its independent sampler, as Optuna's relative samplers hand the parameters
they do not model to theirs (one warning), so the mix-ins check that path and its bookkeeping (independent and
conditional sampling, NaN objectives, fixed and single-valued parameters, multi-objective studies, changing
ranges). The same contracts asked of trials that draw the space's architecture past start-up (pickling, a
parameter beside the architecture, ranges that change, a lone worker's proposals) are in ``test_search.py``,
with relative sampling, determinism, RDB storage and ``n_jobs > 1``. ``RelativeSamplerTestCase`` is not run:
it asks a relative sampler to model arbitrary parameters, and this one models a search space's only.
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
        return lambda: RLMSampler(NasBench201(), seed=0)
