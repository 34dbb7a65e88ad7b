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

#: Trial user attribute holding the model's unweighted median prediction for a trial it proposed, by the
#: name of each objective and of each constraint's value (``name#constraint``): what its residual is weighed
#: by, and what people watching the study see.
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


#: Appended to a constraint's name for the model's tag of its value: a constraint named like an objective or
#: a column the model knows (``pixel3``) is a value less a limit, not that column.
CONSTRAINT_SUFFIX = "#constraint"


def constraint_objectives(names: Sequence[str]) -> list[Objective]:
    """What the surrogate learns of each constraint: its value, one more column, lower the better."""
    return [Objective(name + CONSTRAINT_SUFFIX, "", "constraint value (feasible at 0 or less)",
                      "optuna study", False) for name in names]


def least_violating(trials: Sequence[FrozenTrial], count: int) -> list[FrozenTrial]:
    """The ``count`` trials that miss their constraints by least (the sum of their values above 0): where
    a search without a feasible trial yet looks for one."""
    violation = [sum(max(value, 0.0) for value in t.constraints.values()) for t in trials]  # set ones
    return [trials[k] for k in np.argsort(violation, kind="stable")[:count]]


def constraint_names(trials: Sequence[FrozenTrial]) -> tuple[str, ...]:
    """The names of the constraints the trials' objective set (``trial.set_constraint``), in the order first
    set; empty in a study without constraints."""
    return tuple(dict.fromkeys(name for t in trials for name in t.constraints))


def constraint_values(trials: Sequence[FrozenTrial], names: Sequence[str]) -> np.ndarray:
    """(trials, names): each trial's value of each constraint (feasible at 0 or less; NaN where not set)."""
    return np.array([[t.constraints.get(name, np.nan) for name in names] for t in trials],
                    dtype=np.float64).reshape(len(trials), len(names))


def feasible(trials: Sequence[FrozenTrial], names: Sequence[str]) -> list[FrozenTrial]:
    """The trials that meet every constraint of ``names`` (all of them, without constraints): a trial that
    did not set one has not met it, as :attr:`SearchResult.feasible <nasrlm.search.SearchResult.feasible>`
    counts."""
    return [t for t in trials if all(t.constraints.get(name, np.nan) <= 0 for name in names)]


def objective_names(study: Study) -> list[str]:
    """The study's objective names (``objective_k`` where it has none)."""
    return study.metric_names or [f"objective_{k}" for k in range(len(study.directions))]


def objectives(study: Study) -> list[Objective]:
    return [Objective(name, "", "trial value", "optuna study", d == StudyDirection.MAXIMIZE)
            for name, d in zip(objective_names(study), study.directions, strict=True)]

