"""Fixtures shared by the search tests."""

from __future__ import annotations

from collections.abc import Iterator

import optuna
import pytest


@pytest.fixture
def quiet_optuna() -> Iterator[None]:
    """Optuna's per-trial INFO lines off for the test, its verbosity restored after."""
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    yield
    optuna.logging.set_verbosity(level)
