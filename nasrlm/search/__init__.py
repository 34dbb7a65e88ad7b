"""Pareto search over a search space: the RLM-driven Optuna sampler, evaluation, and reports.

``RLMSampler`` is an ordinary Optuna sampler (use it with ``optuna.create_study``); ``run_search`` and
``write_report`` are what ``nasrlm search`` and ``nasrlm demo`` are made of.
"""

from nasrlm.measure import is_profile
from nasrlm.search._evaluate import ArchEvaluator, MissingValueError
from nasrlm.search._job import SAMPLERS, JobOutput, make_sampler, search_job, summary
from nasrlm.search._report import (
    PredictedFront,
    Scores,
    Truth,
    predicted_front,
    reference_point,
    score,
    write_report,
)
from nasrlm.search._run import SearchResult, run_search
from nasrlm.search._sampler import DEFAULT_MODEL, PREDICTED_ATTR, RLMSampler, SpaceMismatchError

__all__ = [
    "DEFAULT_MODEL",
    "PREDICTED_ATTR",
    "SAMPLERS",
    "JobOutput",
    "make_sampler",
    "search_job",
    "summary",
    "ArchEvaluator",
    "MissingValueError",
    "PredictedFront",
    "RLMSampler",
    "Scores",
    "SearchResult",
    "SpaceMismatchError",
    "Truth",
    "is_profile",
    "predicted_front",
    "reference_point",
    "run_search",
    "score",
    "write_report",
]
