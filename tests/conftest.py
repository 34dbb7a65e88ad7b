"""Shared test fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from nasrlm._processes import usable_cores
from nasrlm.testing import PostgresServer, postgres_unavailable, temporary_postgres

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Make a relative ``NASRLM_DATA`` absolute, from where pytest was started: it is often named relative
    to the checkout (``NASRLM_DATA=../shared/data python -m pytest -q``), and tests that run the command
    line in temporary directories would otherwise look for it from there.

    Under ``pytest -n N`` (pytest-xdist) each worker's torch, and every process its tests start, gets its
    share of the cores (``OMP_NUM_THREADS``, read when torch is imported, as no test module has been yet):
    N thread pools each as wide as the machine spin against each other."""
    env = os.environ.get("NASRLM_DATA")
    if env and not os.path.isabs(env):
        os.environ["NASRLM_DATA"] = os.path.abspath(env)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, usable_cores() // workers)))


@pytest.fixture(scope="session", autouse=True)
def label_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test's label cache (``NASRLM_CACHE``) in one throw-away folder: tests never read what the
    user's cache holds, nor leave anything in it. A test about the cache itself names its own.

    Under ``pytest -n`` (pytest-xdist) the workers share one folder, beside their own temporary ones, as
    a user's processes share one cache: what one worker computes (a tokenizer, NB101's id map) the others
    read, and the cache's writes are atomic."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.getbasetemp().parent / "label-cache"
        folder.mkdir(exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp("label-cache")
    previous = os.environ.get("NASRLM_CACHE")
    os.environ["NASRLM_CACHE"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("NASRLM_CACHE", None)
    else:
        os.environ["NASRLM_CACHE"] = previous


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark data directory: ``$NASRLM_DATA``, else ``../shared/data`` beside the repository.

    Tests that need published benchmark tables skip (with this reason) where the data is absent, e.g. on a
    fresh clone; the project itself must still work from what pip installs.
    """
    env = os.environ.get("NASRLM_DATA")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip("benchmark data not found: set NASRLM_DATA or put it at ../shared/data")
    return path


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    """A throw-away PostgreSQL server on the loopback address (skips, saying why, where none can start)."""
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)
    with temporary_postgres() as server:
        yield server
