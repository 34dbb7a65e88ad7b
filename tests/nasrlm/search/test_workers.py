"""Many workers on one study in a real PostgreSQL server: exact budget, no duplicates, kill -9, outages.

Each worker is a process of its own, as on a cluster; the server is a throw-away one on the loopback
address (the ``postgres`` fixture skips where PostgreSQL is not installed).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import Counter

import numpy as np
import optuna
import pytest
import torch

from nasrlm.data import BenchmarkTable, Objective
from nasrlm.search import ArchEvaluator, RLMSampler, WorkerSettings, open_study, run_search, sampler_keywords
from nasrlm.search.workers._liveness import CREATE_RACES, OUTAGES
from search_spaces import NasBench201

SPACE = NasBench201()
IDS = [SPACE.arch_id(a) for a in SPACE.enumerate()]
QUICK = WorkerSettings(heartbeat_seconds=1, stale_after_seconds=3, poll_seconds=0.1, outage_seconds=30)
FORK = multiprocessing.get_context("fork")

pytestmark = pytest.mark.slow


class SlowEvaluator(ArchEvaluator):
    """A toy table whose every lookup takes ``seconds``, as training would (forever: ``None``)."""

    def __init__(self, seconds: float | None) -> None:
        values = np.array([[len(i) % 17, 1.0 + i.count("conv")] for i in IDS], dtype=np.float64)
        objectives = [Objective("acc", "%", "toy accuracy", "test", True),
                      Objective("lat", "ms", "toy latency", "test", False)]
        super().__init__(SPACE, objectives, BenchmarkTable("nb201", IDS, objectives, values))
        self.seconds = seconds

    def __call__(self, arch_id: str) -> list[float]:
        time.sleep(self.seconds if self.seconds is not None else 3600)
        return super().__call__(arch_id)


def test_a_study_opens_with_its_objectives_and_refuses_to_reopen_for_others(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    evaluator = SlowEvaluator(0)
    study = open_study(url, "s", evaluator)
    assert study.directions == [optuna.study.StudyDirection.MAXIMIZE, optuna.study.StudyDirection.MINIMIZE]
    assert study.metric_names == ["acc", "lat"]
    assert open_study(url, "s", evaluator)._study_id == study._study_id  # the same study, loaded
    other = ArchEvaluator(SPACE, evaluator.objectives[::-1], evaluator.table)
    with pytest.raises(ValueError, match=r"optimises \['acc', 'lat'\], not \['lat', 'acc'\]"):
        open_study(url, "s", other)


def work(url: str, budget: int, seed: int, seconds: float | None, sampler: str = "random") -> None:
    torch.set_num_threads(1)  # forked from a process whose torch thread pool may be busy: stay off it
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    chosen = (optuna.samplers.RandomSampler(seed=seed) if sampler == "random" else
              RLMSampler(SPACE, seed=seed, **sampler_keywords(
                  {"n_startup_trials": 4, "proposals_per_fit": 3, "num_candidates": 40,
                   "fresh_candidates": 10, "num_samples": 4, "pretrain_archs": 0, "fit_steps": 3,
                   "model": {"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1,
                             "decoder_layers": 1, "dropout": 0.0}})))
    run_search(SPACE, SlowEvaluator(seconds), chosen, budget=budget, storage=url, study_name="shared",
               progress=False, workers=QUICK)


STARTED: list[multiprocessing.Process] = []


@pytest.fixture(autouse=True)
def _no_worker_outlives_its_test():
    yield
    while STARTED:
        process = STARTED.pop()
        if process.is_alive():
            process.kill()
            process.join()


def start(url: str, budget: int, seed: int, seconds: float | None, sampler: str = "random"
          ) -> multiprocessing.Process:
    process = FORK.Process(target=work, args=(url, budget, seed, seconds, sampler), daemon=True)
    process.start()
    STARTED.append(process)
    return process


def wait_until(trials_in: optuna.trial.TrialState, at_least: int, url: str) -> None:
    """Wait until the shared study has ``at_least`` trials in state ``trials_in`` (it may not exist yet)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            study = optuna.load_study(study_name="shared", storage=url)
            if len(study.get_trials(deepcopy=False, states=(trials_in,))) >= at_least:
                return
        except (KeyError, *OUTAGES, *CREATE_RACES):  # not created yet, or its tables being created
            pass
        time.sleep(0.1)
    raise AssertionError(f"no {at_least} {trials_in.name} trials after 60 s")


def wait_for_a_beat(url: str) -> None:
    """Wait until some trial of the shared study has a heartbeat (Optuna's heartbeat table)."""
    from optuna.storages._rdb.models import TrialHeartbeatModel

    storage = optuna.storages.RDBStorage(url)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        session = storage.scoped_session()
        try:
            if session.query(TrialHeartbeatModel).count():
                return
        finally:
            session.close()
        time.sleep(0.05)
    raise AssertionError("no trial beat within 60 s")


def finish(processes: list[multiprocessing.Process], url: str) -> list[optuna.trial.FrozenTrial]:
    for p in processes:
        p.join(timeout=240)
        assert p.exitcode == 0, f"a worker ended with {p.exitcode}"
    return optuna.load_study(study_name="shared", storage=url).trials


def completed_ids(trials: list[optuna.trial.FrozenTrial]) -> list[str]:
    return [t.user_attrs["arch_id"] for t in trials if t.state == optuna.trial.TrialState.COMPLETE]


def test_four_workers_drawing_alike_complete_exactly_the_budget_and_nothing_twice(postgres) -> None:
    # the same seed everywhere: every worker draws the same architectures in the same order
    trials = finish([start(postgres.url, 24, 0, 0.05) for _ in range(4)], postgres.url)
    ids = completed_ids(trials)
    assert len(ids) == 24 and len(set(ids)) == 24
    assert optuna.trial.TrialState.RUNNING not in {t.state for t in trials}


def test_rlm_sampler_workers_share_one_study(postgres) -> None:
    trials = finish([start(postgres.url, 12, seed, 0.1, "rlm") for seed in range(3)], postgres.url)
    ids = completed_ids(trials)
    assert len(ids) == 12 and len(set(ids)) == 12
    assert any("predicted" in t.user_attrs for t in trials)  # the model proposed some of them


@pytest.mark.parametrize("after_a_beat", [True, False], ids=["after-its-first-beat", "before-it"])
def test_a_worker_killed_mid_trial_is_replaced_and_its_architecture_run_again(postgres, after_a_beat) -> None:
    hung = start(postgres.url, 12, 99, None)  # evaluates forever: surely mid-trial when killed
    wait_until(optuna.trial.TrialState.RUNNING, 1, postgres.url)
    # killed after its first beat, its trial is stale before the next workers start, and the first of them
    # re-runs it before anything else; killed before it, the trial is adopted by a beat from the next
    # workers and goes stale while they run, then its retry takes its place ahead of their later draws
    if after_a_beat:
        wait_for_a_beat(postgres.url)
    os.kill(hung.pid, signal.SIGKILL)
    hung.join()
    time.sleep(QUICK.stale_after_seconds + 0.5)  # after a beat, its trial is stale by now
    trials = finish([start(postgres.url, 12, seed, 0.05) for seed in range(2)], postgres.url)
    ids = completed_ids(trials)
    assert len(ids) == 12 and len(set(ids)) == 12
    lost = next(t for t in trials if t.state == optuna.trial.TrialState.FAIL)
    retry = next(t for t in trials if t.system_attrs.get("failed_trial") == lost.number)
    assert retry.state == optuna.trial.TrialState.COMPLETE and retry.user_attrs["arch_id"] in ids
    assert Counter(t.state for t in trials)[optuna.trial.TrialState.RUNNING] == 0


def test_workers_wait_out_a_database_outage(postgres) -> None:
    workers = [start(postgres.url, 20, seed, 0.2) for seed in range(2)]
    wait_until(optuna.trial.TrialState.COMPLETE, 3, postgres.url)
    postgres.stop()
    time.sleep(4)
    postgres.start()
    ids = completed_ids(finish(workers, postgres.url))
    assert len(ids) == 20 and len(set(ids)) == 20


def test_a_worker_started_while_the_database_is_down_waits_for_it(postgres) -> None:
    # the same moment as a worker still opening the study when an outage begins (seen once in CI)
    postgres.stop()
    worker = start(postgres.url, 6, 0, 0.05)
    time.sleep(7)  # longer than the tries at a create race would last
    assert worker.is_alive(), f"the worker gave up on the database: exit code {worker.exitcode}"
    postgres.start()
    ids = completed_ids(finish([worker], postgres.url))
    assert len(ids) == 6 and len(set(ids)) == 6


def test_a_postgresql_url_without_a_driver_connects_as_the_readme_writes_it(postgres) -> None:
    from nasrlm.cli._search import _check_storage

    bare = postgres.url.replace("postgresql+psycopg://", "postgresql://")
    url = _check_storage(bare, workers=4)
    assert url.startswith("postgresql+psycopg://")  # the driver nasrlm[postgres] installs
    optuna.create_study(study_name="bare-url", storage=url)
    assert "bare-url" in optuna.get_all_study_names(storage=url)
