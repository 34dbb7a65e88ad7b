"""experiments/search_benchmark.py in its smoke configuration, on the published NB201 tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_smoke_run_reports_every_sampler_within_the_true_front(data_dir: Path) -> None:
    run = subprocess.run([sys.executable, "experiments/search_benchmark.py", "--data-dir", str(data_dir),
                          "--smoke", "--threads", "1"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in run.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| sampler")}
    assert set(rows) == {"rlm", "random", "tpe"}
    for row in rows.values():
        at6, at12 = (float(cell.split("±")[0]) for cell in row.split("|")[2:4])
        assert 0.0 <= at6 <= at12 <= 1.0  # a hypervolume never falls, nor passes the true front's
