"""experiments/worker_benchmark.py in its smoke configuration, on a throw-away PostgreSQL server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from nasrlm.search import STALE_ATTR
from nasrlm.testing import postgres_unavailable

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_smoke_run_completes_the_budget_exactly_without_duplicates(data_dir: Path) -> None:
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    run = subprocess.run([sys.executable, "experiments/worker_benchmark.py", "--data-dir", str(data_dir),
                          "--smoke"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    row = next(line for line in run.stdout.splitlines() if line.startswith("| 0 | 3 |"))
    cells = [cell.strip() for cell in row.split("|")]
    completed, distinct, lost, bad_exits = cells[3], cells[4], cells[10], cells[11]
    assert int(completed) == 12 and int(distinct) == 12 and lost == "0" and bad_exits == "0"


def _trial(number: int, state: TrialState, arch: str, **system_attrs: object) -> optuna.trial.FrozenTrial:
    trial = create_trial(state=state, values=[1.0] if state == TrialState.COMPLETE else None,
                         params={"x": arch}, distributions={"x": CategoricalDistribution(list("abcd"))},
                         user_attrs={"arch_id": arch}, system_attrs=system_attrs)
    trial.number = number
    return trial


def test_a_killed_architecture_is_lost_only_where_a_later_place_completed(load_script) -> None:
    script = load_script("worker_benchmark.py")
    killed = {STALE_ATTR: 1.0}
    trials = [_trial(0, TrialState.COMPLETE, "a"), _trial(1, TrialState.FAIL, "b", **killed),
              _trial(2, TrialState.COMPLETE, "c"), _trial(3, TrialState.FAIL, "d", **killed),
              _trial(4, TrialState.PRUNED, "d", failed_trial=3)]  # its retry, surplus: the budget filled
    assert script.lost(trials, {"a", "c"}) == "1 (1 kills)"  # b: trial 2 counted in its stead; d: surplus
    retried = [*trials[:2], _trial(5, TrialState.COMPLETE, "b", failed_trial=1), *trials[2:]]
    assert script.lost(retried, {"a", "b", "c"}) == "0"
