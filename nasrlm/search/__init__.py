"""Pareto search over a search space: the RLM-driven Optuna sampler, evaluation, and reports.

``RLMSampler`` is an ordinary Optuna sampler (use it with ``optuna.create_study``); ``run_search`` and
``write_report`` are what ``nasrlm search`` and ``nasrlm demo`` are made of. The sampler's parts are
public for experiments that take it apart: its surrogate (``RLMSurrogate``), its candidates
(``candidate_params``), its pick (``greedy_ehvi``) and what it caches of each architecture (``ArchCache``).
Its recipe is three settings objects (``ProposalSettings``, ``FitSettings``, ``CandidateSettings``);
``sampler_keywords`` makes them from flat options by name, as ``--rlm-option KEY=VALUE`` gives them.
"""

from nasrlm.measure import is_profile
from nasrlm.search._constraints import Constraint, UnmeetableConstraintError
from nasrlm.search._evaluate import ArchEvaluator, MissingValueError
from nasrlm.search._job import (
    SAMPLERS,
    JobOutput,
    make_sampler,
    restricted_to_table,
    search_job,
    summary,
    warm_enqueued,
    worker_seed,
)
from nasrlm.search._report import (
    PredictedFront,
    Scores,
    Truth,
    predicted_front,
    reference_point,
    score,
    write_report,
)
from nasrlm.search._run import (
    CONSTRAINTS_ATTR,
    DUPLICATE_ATTR,
    ERROR_ATTR,
    SURPLUS_ATTR,
    SearchResult,
    SearchStopped,
    open_study,
    run_search,
)
from nasrlm.search._sources import EVALUATION_COLUMN, SourceError, read_sources, warm_start_sources
from nasrlm.search._training import TRAINED, NetworkTrainer, Training
from nasrlm.search.sampler import (
    DEFAULT_MODEL,
    MODEL_THREADS,
    PREDICTED_USER_ATTR,
    ArchCache,
    CandidateSettings,
    FitSettings,
    PriorSurrogate,
    ProposalSettings,
    RLMSampler,
    RLMSurrogate,
    SpaceMismatchError,
    WarmStartError,
    candidate_params,
    draw_params,
    earlier_front,
    greedy_ehvi,
    read_warm_start,
    sampler_keywords,
)
from nasrlm.search.workers import STALE_ATTR, WorkerSettings, place_of

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_THREADS",
    "CONSTRAINTS_ATTR",
    "DUPLICATE_ATTR",
    "ERROR_ATTR",
    "SearchStopped",
    "PREDICTED_USER_ATTR",
    "STALE_ATTR",
    "SURPLUS_ATTR",
    "TRAINED",
    "NetworkTrainer",
    "Training",
    "SAMPLERS",
    "JobOutput",
    "make_sampler",
    "restricted_to_table",
    "search_job",
    "warm_enqueued",
    "summary",
    "worker_seed",
    "place_of",
    "ArchCache",
    "ArchEvaluator",
    "EVALUATION_COLUMN",
    "SourceError",
    "read_sources",
    "read_warm_start",
    "warm_start_sources",
    "Constraint",
    "UnmeetableConstraintError",
    "CandidateSettings",
    "FitSettings",
    "PriorSurrogate",
    "ProposalSettings",
    "RLMSurrogate",
    "candidate_params",
    "draw_params",
    "earlier_front",
    "greedy_ehvi",
    "MissingValueError",
    "PredictedFront",
    "RLMSampler",
    "Scores",
    "SearchResult",
    "SpaceMismatchError",
    "WarmStartError",
    "Truth",
    "WorkerSettings",
    "is_profile",
    "predicted_front",
    "reference_point",
    "open_study",
    "run_search",
    "sampler_keywords",
    "score",
    "write_report",
]
