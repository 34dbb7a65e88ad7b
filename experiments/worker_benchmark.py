"""Many workers on one study in PostgreSQL: exact budget, no duplicates, wall time, and kill -9.

Starts a throw-away PostgreSQL server on the loopback address, then per seed runs ``--workers``
processes on one study of NB201 from the published tables, each evaluation taking a fixed
``--eval-seconds`` (a sleep stands for training). Reports per run: completed trials, distinct
architectures, hypervolume ratio to the true front (reference at the table's medians, as
``search_benchmark.py``), wall time, and with ``--kill-every S`` how many workers were killed (``kill
-9`` of a random live one every S seconds, a new worker started in its place), trials re-run, and
architectures lost (a killed trial's, never completed while a later draw's did: its retries spent, or the
draw took its place).
``--single`` also runs one worker alone on each seed, for the wall-time ratio; ``--shared-startup N`` enqueues
the same N random architectures (drawn from the seed) before the workers start, so that one worker and four
begin from the same trials and differ only in what comes after. "Model's picks": completed
trials a fit proposed (the others are start-up draws and front mutants of workers that found another
refitting).

    python experiments/worker_benchmark.py --data-dir ../shared/data --workers 4 --seeds 0,1,2,3,4 --single
    python experiments/worker_benchmark.py --data-dir ../shared/data --workers 4 --seeds 0 --kill-every 20
    python experiments/worker_benchmark.py --data-dir ../shared/data --smoke
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna
import torch
from _common import machine

from nasrlm.search import (
    PREDICTED_USER_ATTR,
    STALE_ATTR,
    ArchEvaluator,
    SearchResult,
    Truth,
    WorkerSettings,
    make_sampler,
    open_study,
    place_of,
    reference_point,
    restricted_to_table,
    run_search,
    score,
    worker_seed,
)
from nasrlm.testing import temporary_postgres
from search_spaces import SearchSpace, get_space


def lost(trials: list[optuna.trial.FrozenTrial], completed: set[str]) -> str:
    """Architectures of killed trials (once drawn) that never completed while a later place did (a draw
    after it counted in its stead), and how often each was killed: ``"1 (3 kills)"``; a fourth kill of
    one is past ``WorkerSettings.max_retries`` (2) retries. A trial killed while it waited for a place
    behind a budget that filled without it is not lost: it would have ended as surplus."""
    last = max((place_of(t) for t in trials if t.state == optuna.trial.TrialState.COMPLETE), default=-1)
    kills = Counter(t.user_attrs["arch_id"] for t in trials
                    if STALE_ATTR in t.system_attrs and "arch_id" in t.user_attrs and place_of(t) < last)
    gone = [kills[arch] for arch in kills if arch not in completed]
    return f"{len(gone)} ({', '.join(map(str, gone))} kills)" if gone else "0"


FORK = multiprocessing.get_context("fork")  # workers inherit the loaded tables
#: model fits of the RLMSampler, summed over the workers that ended normally (a killed one's are lost)
FITS = FORK.Value("i", 0)


class TimedEvaluator(ArchEvaluator):
    """Looks values up in the table after sleeping ``seconds``, as if each architecture were trained."""

    def __init__(self, inner: ArchEvaluator, seconds: float) -> None:
        super().__init__(inner.space, inner.objectives, inner.table, inner.store)
        self.seconds = seconds

    def __call__(self, arch_id: str) -> list[float]:
        time.sleep(self.seconds)
        return super().__call__(arch_id)


@dataclass
class Job:
    space: SearchSpace
    evaluator: ArchEvaluator
    sampler: str
    options: dict
    budget: int
    url: str
    settings: WorkerSettings
    labels: Path  # where each run's label cache goes
    shared_startup: int = 0  # random architectures enqueued before the workers start (drawn from the seed)

    def work(self, study_name: str, seed: int) -> None:
        torch.set_num_threads(1)
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        options = self.options
        if self.sampler == "rlm":  # the run's workers share one new label cache: no run starts warm
            options = {"label_cache": str(self.labels / f"{study_name}.db"), **options}
        sampler = make_sampler(self.sampler, self.space, seed, options=options)
        run_search(self.space, self.evaluator, sampler, budget=self.budget, storage=self.url,
                   study_name=study_name, progress=False, workers=self.settings)
        with FITS.get_lock():
            FITS.value += getattr(sampler, "fits", 0)

    def start(self, study_name: str, seed: int) -> multiprocessing.Process:
        process = FORK.Process(target=self.work, args=(study_name, seed), daemon=True)
        process.start()
        return process

    def enqueue_startup(self, study_name: str, seed: int) -> None:
        """The study, created here with ``shared_startup`` random architectures waiting in it: the same ones
        for every run of ``seed``, whatever its number of workers."""
        study = open_study(self.url, study_name, self.evaluator)
        draws = np.random.default_rng(seed)
        for _ in range(self.shared_startup):
            study.enqueue_trial(self.space.params_of(self.space.sample(draws)))

    def run(self, study_name: str, seed: int, workers: int, kill_every: float | None) -> dict:
        """Run ``workers`` processes on one new study until all have stopped; what happened."""
        rng = random.Random(seed)
        if self.shared_startup:
            self.enqueue_startup(study_name, seed)
        FITS.value = 0
        start = time.perf_counter()

        def seed_of(worker: int) -> int:  # one stream per run of a seed (rlm: shared by its workers)
            return worker_seed(self.sampler, seed * 1000, worker)

        processes = [self.start(study_name, seed_of(k)) for k in range(workers)]
        killed, next_kill = 0, start + (kill_every or float("inf"))
        while any(p.is_alive() for p in processes):
            time.sleep(0.2)
            if time.perf_counter() >= next_kill:
                live = [p for p in processes if p.is_alive()]
                if live:
                    victim = rng.choice(live)
                    os.kill(victim.pid, signal.SIGKILL)
                    victim.join()
                    killed += 1
                    replacement = self.start(study_name, seed_of(workers + killed))
                    processes[processes.index(victim)] = replacement
                next_kill += kill_every or float("inf")
        seconds = time.perf_counter() - start
        bad = [p.exitcode for p in processes if p.exitcode != 0]
        study = optuna.load_study(study_name=study_name, storage=self.url)
        trials = study.get_trials(deepcopy=False)
        result = SearchResult.from_study(study, self.evaluator.objectives, self.sampler)
        return {"result": result, "seconds": seconds, "killed": killed, "bad_exits": bad, "fits": FITS.value,
                "retried": sum("failed_trial" in t.system_attrs for t in trials),
                "lost": lost(trials, set(result.arch_ids)),
                "running": sum(t.state == optuna.trial.TrialState.RUNNING for t in trials),
                "picked": sum(PREDICTED_USER_ATTR in t.user_attrs for t in trials
                              if t.state == optuna.trial.TrialState.COMPLETE)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--objectives", default="acc,pixel3")
    parser.add_argument("--sampler", default="rlm")
    parser.add_argument("--rlm-options", default="{}", help='RLMSampler options by name (JSON)')
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--eval-seconds", type=float, default=2.0, help="each evaluation sleeps this long")
    parser.add_argument("--kill-every", type=float, help="kill -9 a random worker every this many seconds")
    parser.add_argument("--single", action="store_true", help="also run one worker alone, for the wall time")
    parser.add_argument("--stale-after", type=int, default=WorkerSettings().stale_after_seconds,
                        help="seconds without a heartbeat after which a trial is dead (default: library's)")
    parser.add_argument("--shared-startup", type=int, default=0, metavar="N",
                        help="enqueue the same N random architectures (from the seed) before workers start")
    parser.add_argument("--smoke", action="store_true", help="tiny run: random sampler, 12 evaluations")
    args = parser.parse_args()
    if args.smoke:
        args.sampler, args.workers, args.seeds, args.budget, args.eval_seconds = "random", 3, "0", 12, 0.05
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = get_space("nb201")
    names = args.objectives.split(",")
    evaluator = ArchEvaluator.for_names(space, names, data_dir=args.data_dir)
    space, evaluator = restricted_to_table(space, evaluator)
    truth = Truth(*evaluator.truth())
    reference = reference_point([], truth)
    heartbeat = max(1, min(WorkerSettings().heartbeat_seconds, args.stale_after // 4))
    settings = WorkerSettings(heartbeat_seconds=heartbeat, stale_after_seconds=args.stale_after)
    print("| seed | workers | completed | distinct | HV ratio | wall s | model fits | killed | re-run | lost "
          "| bad exits | model's picks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    options = json.loads(args.rlm_options)
    with temporary_postgres() as server, tempfile.TemporaryDirectory() as labels:
        job = Job(space, TimedEvaluator(evaluator, args.eval_seconds), args.sampler, options, args.budget,
                  server.url, settings, Path(labels), args.shared_startup)
        for seed in (int(s) for s in args.seeds.split(",")):
            for workers in ([1] if args.single else []) + [args.workers]:
                kill = args.kill_every if workers > 1 else None
                run = job.run(f"seed{seed}-workers{workers}", seed, workers, kill)
                r: SearchResult = run["result"]
                hv = score(r, reference, truth).history[-1] if r.arch_ids else 0.0
                print(f"| {seed} | {workers} | {len(r.arch_ids)} | {len(set(r.arch_ids))} | {hv:.3f} | "
                      f"{run['seconds']:.0f} | {run['fits']} | {run['killed']} | {run['retried']} | "
                      f"{run['lost']} | {run['bad_exits'] or 0} | {run['picked']} |", flush=True)
    shown = (f" {args.rlm_options}" if options else "") + (
        f", {args.shared_startup} shared start-up trials" if args.shared_startup else "")
    print(f"\n{args.sampler} sampler{shown}, budget {args.budget}, {args.eval_seconds} s per evaluation; "
          f"{os.cpu_count()} cores {machine()}, one torch thread per worker; "
          f"{time.strftime('%Y-%m-%d')}")


if __name__ == "__main__":
    main()
