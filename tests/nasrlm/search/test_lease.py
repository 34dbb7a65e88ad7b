"""The fit lease: one worker refits at a time, and the others know when to wait for its proposals."""

from __future__ import annotations

import time

import optuna
import pytest

from nasrlm.search._lease import LEASE_ATTR, FitLease


@pytest.fixture
def study() -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    return optuna.create_study()


def test_a_lease_holds_for_the_other_workers_until_released(study) -> None:
    mine, theirs = FitLease(study, "a"), FitLease(study, "b")
    assert not theirs.held_elsewhere() and not mine.held_elsewhere()  # free
    mine.take(study.ask()._trial_id, seconds=60)
    assert theirs.held_elsewhere()
    assert not mine.held_elsewhere()  # the holder never waits for itself
    theirs.release()  # not theirs to free
    assert theirs.held_elsewhere()
    mine.release()
    assert not theirs.held_elsewhere()
    assert study._storage.get_study_system_attrs(study._study_id)[LEASE_ATTR] is None


def test_a_lease_ends_with_its_trial(study) -> None:
    trial = study.ask()
    FitLease(study, "a").take(trial._trial_id, seconds=60)
    study.tell(trial, state=optuna.trial.TrialState.FAIL)  # its worker died, and the trial was failed
    assert not FitLease(study, "b").held_elsewhere()


def test_a_lease_ends_at_its_deadline(study) -> None:
    FitLease(study, "a").take(study.ask()._trial_id, seconds=0.05)
    assert FitLease(study, "b").held_elsewhere()
    time.sleep(0.1)
    assert not FitLease(study, "b").held_elsewhere()


def test_a_lease_naming_a_trial_of_no_study_does_not_hold(study) -> None:
    study._storage.set_study_system_attr(study._study_id, LEASE_ATTR,
                                         {"owner": "a", "trial": 10_000, "until": time.time() + 60})
    assert not FitLease(study, "b").held_elsewhere()


def test_a_lease_held_through_a_block_outlasts_its_deadline_and_ends_with_the_block(study) -> None:
    other = FitLease(study, "b")
    with FitLease(study, "a").holding(study.ask()._trial_id, seconds=0.3):
        time.sleep(0.7)  # past the first deadline: pushed back meanwhile
        assert other.held_elsewhere()
    assert not other.held_elsewhere()
