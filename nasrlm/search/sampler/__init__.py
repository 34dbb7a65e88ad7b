"""The ``RLMSampler``: an Optuna sampler that asks the regression language model where to look next.

One module a part: the sampler and when it proposes (``_sampler``), one proposal round (``_rounds``), its
model of the objectives (``_surrogate``: ``RLMSurrogate``, ``PriorSurrogate``), the candidates a round scores
(``_candidates``) and the pick among them (``_acquisition``); the recipe's three settings objects
(``ProposalSettings`` in ``_proposals``, ``FitSettings`` in ``_surrogate``, ``CandidateSettings`` in
``_candidates``) and their flat names (``_options``); the start-up trials (``_numbered_draws``,
``_startup``), the space's parameters as Optuna sees them (``_space_params``), what it keeps of each
architecture (``_arch_cache``), what it reads of a study (``_study``) and of earlier ones
(``_warm_start``), and its bookkeeping for workers
sharing a study (``_coordination``, on :mod:`nasrlm.search.workers`).
"""

from nasrlm.search.sampler._acquisition import greedy_ehvi
from nasrlm.search.sampler._arch_cache import ArchCache, SpaceMismatchError
from nasrlm.search.sampler._candidates import CandidateSettings, candidate_params, draw_params
from nasrlm.search.sampler._options import OPTIONS, option_hints, sampler_keywords
from nasrlm.search.sampler._proposals import ProposalSettings
from nasrlm.search.sampler._sampler import MIN_CHECKED_PROPOSALS, RLMSampler
from nasrlm.search.sampler._study import PREDICTED_USER_ATTR
from nasrlm.search.sampler._surrogate import (
    DEFAULT_MODEL,
    MODEL_THREADS,
    FitSettings,
    PriorSurrogate,
    RLMSurrogate,
)
from nasrlm.search.sampler._warm_start import WarmStart, WarmStartError, earlier_front, read_warm_start

__all__ = [
    "DEFAULT_MODEL",
    "MIN_CHECKED_PROPOSALS",
    "MODEL_THREADS",
    "OPTIONS",
    "PREDICTED_USER_ATTR",
    "ArchCache",
    "CandidateSettings",
    "FitSettings",
    "PriorSurrogate",
    "ProposalSettings",
    "RLMSampler",
    "RLMSurrogate",
    "SpaceMismatchError",
    "WarmStart",
    "WarmStartError",
    "candidate_params",
    "draw_params",
    "earlier_front",
    "greedy_ehvi",
    "option_hints",
    "read_warm_start",
    "sampler_keywords",
]
