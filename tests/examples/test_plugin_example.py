"""The plug-in guide's worked example (``examples/plugin_example``), end to end with tiny settings.

Conformance suite on the example space, the ``--plugin`` mechanism in fresh processes, then the
example's own command list (measure -> data -> train -> search) through ``nasrlm.cli.main``. Costs
that the CLI does not let a user set are cut down here, as ``tests/nasrlm/search/test_search.py``
does: the RLM sampler is a tiny one, ``nasrlm train``'s tokenizer learns from the example space alone
instead of samples of every registered space, and any random sample of the space is capped at 24
architectures (each one a torch export).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from nasrlm.cli import main
from nasrlm.data import BenchmarkTable
from search_spaces import SearchSpace, _registry

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "plugin_example"
PLUGIN = EXAMPLE / "tinymb_plugin.py"


def _import(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whatever the plug-in registers or imports is gone after the test, so other tests never see it."""
    monkeypatch.setattr(_registry, "_FACTORIES", dict(_registry._FACTORIES))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("NASRLM_PLUGINS", raising=False)
    yield
    for name in ("tinymb_plugin", "tiny_mobilenet"):
        sys.modules.pop(name, None)


def _start(*argv: str, seed: int = 0) -> subprocess.Popen[str]:
    """``python -m ARGV`` in a fresh process from the repository root, without ``$NASRLM_PLUGINS``."""
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(REPO)}
    env.pop("NASRLM_PLUGINS", None)
    return subprocess.Popen([sys.executable, "-m", *argv], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def test_conformance_suite_passes() -> None:
    """Exactly what the guide tells the user to run."""
    code, out, err = _finish(_start("pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE)))
    assert code == 0, out[-3000:] + err[-3000:]
    assert " passed" in out and "failed" not in out


def test_plugin_text_is_the_same_in_every_process() -> None:
    """The hash-seed check through the CLI, as the guide shows it for spaces the suite cannot rebuild."""
    argv = ("nasrlm", "--plugin", str(PLUGIN), "export", "tinymb", "--random", "4", "--format", "jsonl")
    (code1, out1, err1), (code2, out2, err2) = map(_finish, [_start(*argv, seed=s) for s in (1, 2)])
    assert code1 == code2 == 0, err1 + err2
    assert out1 == out2
    rows = [json.loads(line) for line in out1.splitlines()]
    assert len(rows) == 4 and all(r["space"] == "tinymb" and r["text"] for r in rows)


def test_plugin_option_errors_are_one_line(capsys: pytest.CaptureFixture[str], isolated: None,
                                           tmp_path: Path) -> None:
    for argv, says in [
        (["--plugin", str(tmp_path / "missing.py"), "spaces"], "plug-in file"),
        (["--plugin", "no_such_plugin_module", "spaces"], "not found on the Python path"),
        (["export", "tinymb", "--random", "1"], "--plugin"),
    ]:
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize(("source", "says"), [
    ("import search_spaces\n\ndef broken(:\n    pass\n", ":3: SyntaxError: invalid syntax"),
    ("import search_spaces\n\n\nraise RuntimeError('my bug')\n", ":4: RuntimeError: my bug"),
    ("import no_such_dependency_xyz\n", ":1: ModuleNotFoundError: No module named 'no_such_dependency_xyz'"),
])
def test_a_plugin_that_fails_to_import_is_one_line_with_its_file_and_line(
        source: str, says: str, capsys: pytest.CaptureFixture[str], isolated: None, tmp_path: Path) -> None:
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text(source)
    assert main(["--plugin", str(plugin), "spaces"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and f"{plugin}{says}" in err, err
    assert "broken_plugin" not in sys.modules  # a later attempt imports it afresh


def test_plugin_from_the_environment(capsys: pytest.CaptureFixture[str], isolated: None,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NASRLM_PLUGINS", f"{PLUGIN},{PLUGIN}")  # named twice: imported once
    assert main(["spaces"]) == 0
    assert main(["--plugin", str(PLUGIN), "spaces"]) == 0  # and once more: still no second registration
    out, err = capsys.readouterr()
    assert out.count("\ntinymb ") + out.startswith("tinymb ") == 2 and err == ""


def test_plugin_option_after_the_command(capsys: pytest.CaptureFixture[str], isolated: None) -> None:
    assert main(["spaces", "--plugin", str(PLUGIN)]) == 0
    out, err = capsys.readouterr()
    assert "tinymb" in out and err == ""


@pytest.mark.slow
def test_worked_example_end_to_end(capsys: pytest.CaptureFixture[str], isolated: None, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from nasrlm.rlm.tokenizers import OnnxTokenizer
    from nasrlm.search import SAMPLERS, RLMSampler, sampler_keywords

    tiny = {"d_model": 32, "num_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1}
    options = {"n_startup_trials": 4, "proposals_per_fit": 4, "num_candidates": 24, "fresh_candidates": 8,
               "num_samples": 4, "pretrain_archs": 8, "fit_steps": 8, "model": tiny}
    monkeypatch.setitem(SAMPLERS, "rlm", lambda space, seed, progress: RLMSampler(
        space, seed=seed, **sampler_keywords(options)))  # with --budget 8: one fit, four proposals
    train_on_spaces = OnnxTokenizer.train_on_spaces.__func__
    monkeypatch.setattr(OnnxTokenizer, "train_on_spaces", classmethod(
        lambda cls, spaces=None, samples_per_space=100, **kw: train_on_spaces(cls, ["tinymb"], 24, **kw)))
    sample_ids = SearchSpace.sample_ids
    monkeypatch.setattr(SearchSpace, "sample_ids", lambda self, n, seed=0: sample_ids(self, min(n, 24), seed))

    out = tmp_path / "example"
    commands = _import(EXAMPLE / "run_example.py").commands(out, quick=True)
    assert [c[2] for c in commands] == ["spaces", "measure", "measure", "data", "train", "search", "search"]
    for argv in commands:
        assert main(argv) == 0, (argv, capsys.readouterr().err[-2000:])
    printed = capsys.readouterr()
    assert "tinymb" in printed.out  # listed by 'spaces'

    table = BenchmarkTable.read_csv(out / "tinymb.csv")
    assert table.space == "tinymb" and table.names == ["cpu-1t-b1", "cpu-2t-b8"]
    assert len(table.ids) == 12 and (table.values > 0).all()
    assert [o.unit for o in table.objectives] == ["ms", "ms"]
    assert (out / "model").is_dir()
    lines = printed.out.splitlines()
    assert any(line.strip().startswith("nsga2: 8 evaluations") for line in lines), printed.out
    assert any(line.strip().startswith("rlm: 8 evaluations") for line in lines), printed.out
    assert any(line.strip().startswith("random: 8 evaluations") for line in lines), printed.out
    for name in ("pareto.csv", "pareto.png", "hypervolume.png", "report.md"):
        assert (out / "search" / name).is_file(), name
