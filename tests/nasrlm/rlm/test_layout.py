"""The layout of the model stack: the language model is built inside ``nasrlm/rlm/`` only, a predictor from
nothing through ``RLMPredictor.from_scratch`` only, every module of ``nasrlm/`` imports (no module names a
path that moved away), the old module paths are gone, and the model stack imports nothing of the search,
the command line or Optuna."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
NASRLM = REPO / "nasrlm"
#: Where the modules of nasrlm/rlm/ and nasrlm/priors/ were before they had packages of their own.
OLD_MODULES = ("predictor", "model", "training", "inference", "normalize", "tokenizers", "presets",
               "calibration", "pretraining", "augment", "prior", "feature_prior", "transfer")


def test_only_nasrlm_rlm_builds_the_language_model() -> None:
    found = [f"{path.relative_to(REPO)}:{k}" for path in sorted(NASRLM.rglob("*.py"))
             if NASRLM / "rlm" not in path.parents
             for k, line in enumerate(path.read_text().splitlines(), 1) if "RegressionLM(" in line]
    assert not found, f"RegressionLM( outside nasrlm/rlm/: {', '.join(found)} (use RLMPredictor)"


def test_a_predictor_is_built_from_nothing_through_from_scratch_only() -> None:
    # one way to a fresh model (the free-label tags, the size presets, the seed of the initial weights): no
    # builder beside it, and no call of one outside nasrlm/rlm/ in the code, the benchmarks, the tests
    # (this file names the pattern) or the documentation
    from nasrlm.rlm.predictor import RLMPredictor

    assert not [name for name in vars(RLMPredictor) if name.lstrip("_") == "create"]
    builder = re.compile(r"RLMPredictor\s*\.\s*_?create\b|\bRLMPredictor\(")
    files = [REPO / "README.md", REPO / "DEVELOPERS.md",
             *(path for folder in ("nasrlm", "experiments", "tests", "docs", "examples")
               for path in sorted((REPO / folder).rglob("*")) if path.suffix in (".py", ".md"))]
    found = [f"{path.relative_to(REPO)}:{k}" for path in files
             if NASRLM / "rlm" not in path.parents and path != Path(__file__).resolve()
             for k, line in enumerate(path.read_text().splitlines(), 1) if builder.search(line)]
    assert not found, (f"a predictor built outside nasrlm/rlm/: {', '.join(found)} "
                       "(use RLMPredictor.from_scratch, from_base or load)")


@pytest.fixture(scope="module")
def fresh_imports() -> dict:
    """What one fresh interpreter imports: first the model stack's packages (``nasrlm.priors``, then
    ``nasrlm.rlm``: what each pulled in beside itself), then every module of ``nasrlm``. Fresh, so that no
    module imports only because a test imported another one first; each from this checkout, since an
    editable install of another checkout would answer an import of a module path that no longer exists here.
    One process for both checks: importing the whole stack is most of its time."""
    script = textwrap.dedent(f"""
        import importlib, json, pkgutil, sys
        from pathlib import Path
        import nasrlm.priors, nasrlm.rlm
        stack = []
        for package in (nasrlm.priors, nasrlm.rlm):
            for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
                importlib.import_module(module.name)
            stack.append(sorted(n for n in sys.modules if n.split(".")[0] == "optuna" and "." not in n
                                or n.startswith(("nasrlm.search", "nasrlm.cli", "nasrlm.rlm."))))
        import nasrlm
        names = sorted(m.name for m in pkgutil.walk_packages(nasrlm.__path__, "nasrlm.")
                       if m.name.rpartition(".")[2] != "__main__")  # that one runs the command line
        for name in names:
            importlib.import_module(name)
        here = Path({str(NASRLM)!r})
        elsewhere = sorted(n for n, m in list(sys.modules.items()) if n.split(".")[0] == "nasrlm"
                           and not Path(getattr(m, "__file__", None) or "/").resolve().is_relative_to(here))
        print(json.dumps({{"stack": stack, "names": names, "elsewhere": elsewhere}}))
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_every_module_of_nasrlm_imports(fresh_imports: dict) -> None:
    names = fresh_imports["names"]
    assert len(names) > 50 and {"nasrlm.rlm.predictor", "nasrlm.priors.prior"} <= set(names), names
    elsewhere = fresh_imports["elsewhere"]
    assert elsewhere == [], f"modules imported from outside {NASRLM}: {elsewhere}"


@pytest.mark.parametrize("old", OLD_MODULES)
def test_the_old_module_paths_are_gone(old: str) -> None:
    assert not (NASRLM / f"{old}.py").exists() and not (NASRLM / old).exists(), (
        f"nasrlm/{old} still exists (no shims: import it from nasrlm.rlm or nasrlm.priors)")


def test_the_model_stack_imports_no_search_no_command_line_no_optuna(fresh_imports: dict) -> None:
    # DEVELOPERS.md, "Layout": the model and its priors sit below the search and the command line; and the
    # priors below the model, which stands on them (nasrlm.rlm.predictor imports nasrlm.priors)
    priors, stack = fresh_imports["stack"]
    assert priors == [], f"nasrlm.priors imports {priors}"
    above = [n for n in stack if not n.startswith("nasrlm.rlm.")]
    assert above == [], f"the model stack imports {above}"


def test_no_module_of_nasrlm_is_over_500_lines_and_the_predictor_s_own_is_at_most_300() -> None:
    # a module past these is a sign that two ideas share it (issue "The predictor as parts that compose")
    sizes = {path.relative_to(REPO): len(path.read_text().splitlines()) for path in NASRLM.rglob("*.py")}
    assert not {path: n for path, n in sizes.items() if n > 500}
    assert sizes[Path("nasrlm/rlm/predictor.py")] <= 300
