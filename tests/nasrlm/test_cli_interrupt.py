"""ctrl-C in a search, through a real process and SIGINT: one line, exit 130, nothing counted as failed, and
the same command resumes the study."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _completed(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0


def _sigint_as_in_a_terminal() -> None:
    """In the search's process, before it starts: SIGINT's default action, as a terminal's ctrl-C finds it.
    A test run as a background job of a non-interactive shell (``.ci/run &``) inherits SIGINT ignored, and
    the search would never see the signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is a POSIX matter")
def test_ctrl_c_keeps_the_study_and_the_same_command_resumes_it(tmp_path: Path) -> None:
    db = tmp_path / "study.db"
    command = [sys.executable, "-m", "nasrlm", "search", "nb201", "--objectives", "params_m,cpu-1t-b1",
               "--sampler", "random", "--storage", f"sqlite:///{db}", "--out", str(tmp_path / "run"), "-q"]
    env = {**os.environ, "NASRLM_CACHE": str(tmp_path / "cache")}
    search = subprocess.Popen([*command, "--budget", "1000"], cwd=tmp_path, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              preexec_fn=_sigint_as_in_a_terminal)
    deadline = time.monotonic() + 120
    while _completed(db) < 3 and search.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    search.send_signal(signal.SIGINT)
    _, err = search.communicate(timeout=60)
    assert search.returncode == 130, err
    assert "Traceback" not in err, err
    done = _completed(db)
    assert err.splitlines()[-1] == (f"nasrlm: interrupted: {done} evaluations kept in sqlite:///{db} "
                                    f"(study 'nb201-random-seed0'); run the same command to resume")
    with sqlite3.connect(db) as conn:
        states = dict(conn.execute("SELECT state, COUNT(*) FROM trials GROUP BY state").fetchall())
    assert "FAIL" not in states  # the trial ctrl-C stopped is no failure
    assert "RUNNING" not in states, err  # nor left running: the resumed run would wait for it to go stale

    resumed = subprocess.run([*command, "--budget", str(done + 2)], cwd=tmp_path, env=env, text=True,
                             capture_output=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming study 'nb201-random-seed0': {done} of {done + 2} evaluations done" in resumed.stderr
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"{done + 2} evaluations with `random`" in report and "(0 failed trials)" in report
