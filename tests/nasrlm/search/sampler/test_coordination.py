"""The RLMSampler's bookkeeping of proposals handed out to workers' trials."""

from __future__ import annotations

import optuna
import pytest

from nasrlm.search.sampler._coordination import Workers
from nasrlm.search.sampler._study import PREDICTED_USER_ATTR

FAIL, WAITING = optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING


def a_study(tmp_path) -> optuna.Study:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", directions=["maximize", "minimize"])
    study.set_metric_names(["acc", "lat"])
    return study


def taken_for_dead(study: optuna.Study) -> optuna.trial.FrozenTrial:
    """A trial asked for, then failed by another worker before it stored a parameter."""
    trial = study.ask()
    study._storage.set_trial_state_values(trial._trial_id, state=FAIL)
    return study._storage.get_trial(trial._trial_id)


def test_a_pick_handed_to_a_trial_taken_for_dead_waits_for_the_next_worker(tmp_path) -> None:
    study, workers = a_study(tmp_path), Workers(lambda params: params["x"])
    trial = taken_for_dead(study)
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):  # storing its prediction
        workers.hand_out(study, trial, [({"x": "a"}, {"acc": 90.0, "lat": 3.0}),
                                           ({"x": "b"}, {"acc": 89.0, "lat": 2.0})])
    waiting = {t.system_attrs["fixed_params"]["x"]: t.user_attrs[PREDICTED_USER_ATTR]
               for t in study.get_trials(states=(WAITING,))}
    assert waiting == {"a": {"acc": 90.0, "lat": 3.0}, "b": {"acc": 89.0, "lat": 2.0}}
    evaluated, pending = workers.evaluated_and_pending(study)
    assert not evaluated and sorted(pending) == ["a", "b"]


def test_a_pick_is_pending_while_its_trial_runs_and_free_again_if_it_ends_without_it(tmp_path) -> None:
    study, workers = a_study(tmp_path), Workers(lambda params: params["x"])
    trial = study.ask()
    workers.note_handed_out(study, study._storage.get_trial(trial._trial_id), {"x": "c"})
    assert workers.evaluated_and_pending(study)[1] == ["c"]  # not stored yet: pending all the same
    study._storage.set_trial_state_values(trial._trial_id, state=FAIL)  # taken for dead before suggesting
    assert workers.evaluated_and_pending(study) == (set(), [])
