"""Fixtures shared by the tests of experiments/ scripts."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture
def load_script(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """Load ``experiments/NAME`` as a module of this process (its imports loaded already), with its own
    folder first on the path as when it runs, and registered while the test runs (a script's dataclasses
    look their module up)."""

    def load(name: str) -> ModuleType:
        monkeypatch.syspath_prepend(str(EXPERIMENTS))
        spec = importlib.util.spec_from_file_location(f"_{Path(name).stem}", EXPERIMENTS / name)
        assert spec is not None and spec.loader is not None
        script = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, script)
        spec.loader.exec_module(script)
        return script

    return load
