"""experiments/worker_benchmark.py in its smoke configuration, on a throw-away PostgreSQL server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
