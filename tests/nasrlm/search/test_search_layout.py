"""``nasrlm/search/`` by concern: the sampler and the workers in packages of their own, a few modules at the
top, and the flat modules they replaced gone (no shims)."""

from __future__ import annotations

from pathlib import Path

import pytest

SEARCH = Path(__file__).resolve().parents[3] / "nasrlm" / "search"
#: The modules that were at the top of nasrlm/search/ before the sampler and the workers had packages.
MOVED = ("_sampler", "_rounds", "_surrogate", "_acquisition", "_candidates", "_proposals", "_options",
         "_startup", "_numbered_draws", "_space_params", "_arch_cache", "_study", "_coordination", "_lease",
         "_liveness")


def test_the_top_of_search_holds_at_most_twelve_modules() -> None:
    top = [p.name for p in SEARCH.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()]
    assert len(top) <= 12, sorted(top)
    assert {"sampler", "workers"} <= set(top)


@pytest.mark.parametrize("module", MOVED)
def test_the_flat_module_is_gone(module: str) -> None:
    assert not (SEARCH / f"{module}.py").exists(), (
        f"nasrlm/search/{module}.py is back: it lives in nasrlm/search/sampler/ or workers/ (no shims)")
