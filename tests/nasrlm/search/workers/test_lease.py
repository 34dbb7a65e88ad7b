"""The fit lease: one worker refits at a time, and the others know when to wait for its proposals."""

from __future__ import annotations

import time

import optuna
import pytest

from nasrlm.search.workers._lease import LEASE_ATTR, FitLease


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
    assert theirs.fitted_elsewhere_within(60) and not mine.fitted_elsewhere_within(60)  # a's model is trained
    time.sleep(0.1)
    assert not theirs.fitted_elsewhere_within(0.05)


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


def test_a_claim_made_before_its_fit_holds_by_its_deadline_alone(study) -> None:
    assert FitLease(study, "a").claim(None, seconds=2.0, settle=0.0)
    assert FitLease(study, "b").held_elsewhere()  # no trial yet: nothing ends it but the deadline
    assert not FitLease(study, "b").claim(None, seconds=60, settle=0.0)
    time.sleep(2.1)
    assert not FitLease(study, "b").held_elsewhere()
    assert not FitLease(study, "b").fitted_elsewhere_within(60)  # a claim that expired fitted nothing


def test_a_fit_that_fails_leaves_no_record_of_a_fit(study) -> None:
    with pytest.raises(RuntimeError), FitLease(study, "a").holding(study.ask()._trial_id, seconds=60):
        raise RuntimeError("the fit failed")
    assert not FitLease(study, "b").held_elsewhere() and not FitLease(study, "b").fitted_elsewhere_within(60)


def test_of_workers_claiming_a_free_lease_at_once_exactly_one_keeps_it(study) -> None:
    import threading

    won: dict[str, bool] = {}
    start = threading.Barrier(4)

    def claim(owner: str) -> None:
        start.wait()
        won[owner] = FitLease(study, owner).claim(None, seconds=60, settle=1.0)

    threads = [threading.Thread(target=claim, args=(f"worker {k}",)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(won.values()) == 1
    winner = next(owner for owner, kept in won.items() if kept)
    assert study._storage.get_study_system_attrs(study._study_id)[LEASE_ATTR]["owner"] == winner
