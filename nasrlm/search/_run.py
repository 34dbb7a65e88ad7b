"""Running a search: an Optuna study whose budget counts completed objective evaluations.

The study is an ordinary Optuna study (any storage URL, resumable with ``load_if_exists``), so users can
open it with Optuna's own tools; each trial records its architecture id as the user attribute
``arch_id``, and the objective names are the study's metric names.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import optuna
from optuna.study import MaxTrialsCallback
from optuna.trial import TrialState
from tqdm.auto import tqdm

from nasrlm.data import Objective
from nasrlm.metrics import pareto_mask
from nasrlm.search._evaluate import ArchEvaluator, MissingValueError
from search_spaces import SearchSpace

#: User attribute of a trial that drew an architecture the study had evaluated already (it is pruned,
#: not evaluated again, and does not count toward the budget).
DUPLICATE_ATTR = "duplicate_of"
#: Repeated architectures per evaluation of the budget after which a search gives up (a space smaller
#: than the budget, or a sampler that keeps drawing what it has).
MAX_REPEATS_PER_EVALUATION = 10
#: How often a running trial in a database storage says it is alive, and after how long without a word
#: it counts as dead (its worker killed) and is failed by the next trial of any worker.
HEARTBEAT_SECONDS = 30
STALE_AFTER_SECONDS = 120


@dataclass
class SearchResult:
    """The completed evaluations of one study, in evaluation order."""

    sampler: str  # a label: "rlm", "random", ...
    objectives: list[Objective]
    arch_ids: list[str]
    values: np.ndarray  # (evaluations, objectives), in the objectives' units
    study_name: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def maximize(self) -> list[bool]:
        return [o.higher_is_better for o in self.objectives]

    @property
    def front(self) -> np.ndarray:
        """Indices of the non-dominated evaluations."""
        return np.flatnonzero(pareto_mask(self.values, self.maximize))

    @classmethod
    def from_study(cls, study: optuna.Study, objectives: list[Objective], sampler: str) -> SearchResult:
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        values = np.array([t.values for t in trials], dtype=np.float64).reshape(len(trials), len(objectives))
        return cls(sampler, objectives, [t.user_attrs["arch_id"] for t in trials], values, study.study_name)


def run_search(space: SearchSpace, evaluator: ArchEvaluator, sampler: optuna.samplers.BaseSampler, *,
               budget: int, label: str = "", storage: str | None = None, study_name: str = "nasrlm",
               progress: bool = True, max_failures: int | None = None) -> SearchResult:
    """Search until the study holds ``budget`` completed evaluations (resuming an existing study).

    Architectures missing from a table fail their trial (:class:`MissingValueError`) and do not count;
    after ``max_failures`` (default: ``budget``) failed trials the search stops with an error. A trial
    that draws an architecture the study has evaluated (or is evaluating) already is pruned, with the
    id in its user attribute :data:`DUPLICATE_ATTR`, and does not count either: a resumed study whose
    sampler replays its random stream, or two workers that draw the same cell, never evaluate it twice.
    """
    if budget < 1:
        raise ValueError(f"budget must be positive, got {budget}")
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" / per-trial lines
    try:
        study = optuna.create_study(
            storage=_with_heartbeat(storage), study_name=study_name, sampler=sampler, load_if_exists=True,
            directions=["maximize" if o.higher_is_better else "minimize" for o in evaluator.objectives])
    finally:
        optuna.logging.set_verbosity(verbosity)
    if study.metric_names is None:
        with warnings.catch_warnings():  # experimental since Optuna 3.2, and exactly what we need
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(evaluator.names)
    elif list(study.metric_names) != evaluator.names:
        raise ValueError(f"study {study_name!r} in {storage} optimises {study.metric_names}, "
                         f"not {evaluator.names}; pick another --study-name")

    def objective(trial: optuna.Trial) -> list[float]:
        arch_id = space.arch_id(space.suggest(trial))
        if arch_id in _taken(study, trial.number):  # a resumed random stream replays its draws, a worker ...
            trial.set_user_attr(DUPLICATE_ATTR, arch_id)
            raise optuna.TrialPruned(f"architecture {arch_id} is evaluated by trial(s) of this study already")
        trial.set_user_attr("arch_id", arch_id)
        return evaluator(arch_id)

    def done() -> int:
        return _states(study)[TrialState.COMPLETE]

    limit = budget if max_failures is None else max_failures
    start = time.perf_counter()
    with tqdm(total=budget, initial=min(done(), budget), desc=f"search {label or space.name}", unit="eval",
              disable=not progress) as bar:

        def tick(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
            states = _states(study)  # one query of the storage per trial
            bar.n = min(states[TrialState.COMPLETE], budget)
            bar.refresh()
            if (states[TrialState.FAIL] > limit
                    or states[TrialState.PRUNED] > MAX_REPEATS_PER_EVALUATION * budget):
                study.stop()

        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        try:
            if done() < budget:
                enough = MaxTrialsCallback(budget, states=(TrialState.COMPLETE,))
                study.optimize(objective, callbacks=[enough, tick], catch=(MissingValueError,))
        finally:
            optuna.logging.set_verbosity(verbosity)
    states = _states(study)
    failed, repeated = states[TrialState.FAIL], states[TrialState.PRUNED]
    if states[TrialState.COMPLETE] < budget:
        raise RuntimeError(f"search stopped after {failed} failed trials and {repeated} repeated "
                           f"architectures with {states[TrialState.COMPLETE]} of {budget} evaluations done "
                           f"(architectures missing from the table, or a space smaller than the budget?)")
    result = SearchResult.from_study(study, evaluator.objectives, label or type(sampler).__name__)
    result.seconds = time.perf_counter() - start
    result.extra["failed_trials"] = failed
    result.extra["repeated_trials"] = repeated
    return result


def _with_heartbeat(storage: str | optuna.storages.BaseStorage | None
                    ) -> str | optuna.storages.BaseStorage | None:
    """A database URL as an RDB storage whose running trials beat every :data:`HEARTBEAT_SECONDS`.

    A worker killed mid-trial (``kill -9``, a lost machine) leaves its trial RUNNING forever; with a
    heartbeat, the next trial of any worker fails a trial whose beat is older than
    :data:`STALE_AFTER_SECONDS`, and its architecture can be proposed again.
    """
    if not isinstance(storage, str):
        return storage
    with warnings.catch_warnings():  # experimental since Optuna 2.9, and exactly what we need
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(storage, heartbeat_interval=HEARTBEAT_SECONDS,
                                          grace_period=STALE_AFTER_SECONDS)


def _states(study: optuna.Study) -> Counter[TrialState]:
    """How many of the study's trials are in each state."""
    return Counter(t.state for t in study.get_trials(deepcopy=False))


def _taken(study: optuna.Study, number: int) -> set[str]:
    """Architectures of the study's other trials that are evaluated or being evaluated."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
    return {t.user_attrs["arch_id"] for t in trials if t.number != number and "arch_id" in t.user_attrs}
