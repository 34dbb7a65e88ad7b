"""What the RLMSampler reads off an Optuna study (its completed trials, their front, its objectives), and
the prediction it leaves with a trial it proposed. Public Optuna calls only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from nasrlm.data import Objective
from nasrlm.metrics import pareto_mask

#: Trial user attribute holding the model's unweighted median prediction, by objective name, for a
#: trial it proposed: what its residual is weighed by, and what people watching the study see.
PREDICTED_USER_ATTR = "predicted"


def completed(study: Study) -> list[FrozenTrial]:
    """The study's completed trials with values."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return [t for t in trials if t.values is not None]


def front_params(study: Study, complete: Sequence[FrozenTrial]) -> list[dict[str, Any]]:
    """Parameters of the Pareto-optimal trials among ``complete``."""
    maximize = [d == StudyDirection.MAXIMIZE for d in study.directions]
    observed = np.array([t.values for t in complete], dtype=np.float64)
    return [t.params for t, keep in zip(complete, pareto_mask(observed, maximize), strict=True) if keep]


def objective_names(study: Study) -> list[str]:
    """The study's objective names (``objective_k`` where it has none)."""
    return study.metric_names or [f"objective_{k}" for k in range(len(study.directions))]


def objectives(study: Study) -> list[Objective]:
    return [Objective(name, "", "trial value", "optuna study", d == StudyDirection.MAXIMIZE)
            for name, d in zip(objective_names(study), study.directions, strict=True)]


def by_name(study: Study, predicted: Sequence[float]) -> dict[str, float]:
    """A prediction as the trial's user attribute :data:`PREDICTED_USER_ATTR` keeps it."""
    return dict(zip(objective_names(study), predicted, strict=True))
