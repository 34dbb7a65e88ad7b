"""Bad input to the command line: one line naming the file or option, exit status 2, and nothing written.

Each case drives ``nasrlm.cli.main`` as a user would. A traceback (exit 1) or an error after the work
began (a half-written output) is what these guard against.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nasrlm.cli import main
from nasrlm.data import BenchmarkTable, Objective

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
#: A place nobody can create a file in, root included.
UNWRITABLE = "/proc/nasrlm-test"
#: ``search`` arguments that pass every check (no benchmark data needed: accuracy comes from
#: analog-nasbench, latency is measured); each case adds the one bad option.
SEARCH = ["search", "nb201", "--objectives", "acc,cpu-1t-b1", "--budget", "2", "--sampler", "random",
          "--out", "{tmp}/run", "-q"]
RLM_SEARCH = ["search", "nb201", "--objectives", "acc,cpu-1t-b1", "--budget", "2", "--out", "{tmp}/run", "-q"]
TRAIN = ["train", "--data", "{tmp}/table.csv", "-o", "{tmp}/model-out"]
PREDICT = ["predict", "{model}", "--space", "nb201", "--arch", ARCH, "--samples", "2"]
EVAL = ["eval", "{model}", "--data", "{tmp}/table.csv", "--samples", "2", "-q"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny, untrained but complete model directory (a tokenizer of a few texts: seconds, not a
    training run); cases copy it and damage the copy."""
    from nasrlm.rlm.predictor import RLMPredictor
    from nasrlm.rlm.tokenizers import OnnxTokenizer
    from search_spaces import NasBench201

    space = NasBench201()
    tokenizer = OnnxTokenizer.train([space.to_text(space.parse(i)) for i in space.sample_ids(20)], 400)
    predictor = RLMPredictor.from_scratch([Objective("acc", "%", "", "test", True)], size="tiny",
                                          tokenizer=tokenizer)
    predictor.spaces = ("nb201",)  # as fine_tune records them
    path = predictor.save(tmp_path_factory.mktemp("model") / "model")
    RLMPredictor.load(path)  # intact, so each case fails for its own damage only
    return path


def _truncate_weights(model: Path) -> None:
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])


def _random_weights(model: Path) -> None:
    (model / "model.safetensors").write_bytes(np.random.default_rng(0).bytes(4096))


def _config_list(model: Path) -> None:
    (model / "config.json").write_text("[1, 2]\n")


def _config_unknown_key(model: Path) -> None:
    meta = json.loads((model / "config.json").read_text())
    meta["model"]["bogus"] = 1
    (model / "config.json").write_text(json.dumps(meta))


def _config_unknown_top_key(model: Path) -> None:
    meta = json.loads((model / "config.json").read_text())
    meta["objectivs"] = []  # a hand edit's typo
    (model / "config.json").write_text(json.dumps(meta))


def _config_huge(model: Path) -> None:
    meta = json.loads((model / "config.json").read_text())
    meta["model"].update(d_model=65536, d_ff=262144)  # 10^11 parameters: refused before allocating
    (model / "config.json").write_text(json.dumps(meta))


def _table(name: str, *rows: str) -> Callable[[Path], None]:
    """Writes ``{tmp}/name`` beside the model copy: a CSV without sidecar, ``arch_id,acc[%],lat[ms]``."""
    def write(model: Path) -> None:
        (model.parent / name).write_text("\n".join(["arch_id,acc[%],lat[ms]", *rows]) + "\n")
    return write


OTHER = "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"


def _study(named: bool) -> Callable[[Path], None]:
    """Writes ``{tmp}/s.db`` beside the model copy: an Optuna storage of one two-trial study, ``earlier``,
    whose objectives are named or not."""
    def write(model: Path) -> None:
        import warnings

        import optuna

        level = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # no lines on the test's captured stderr
        try:
            study = optuna.create_study(storage=f"sqlite:///{model.parent / 's.db'}", study_name="earlier",
                                        directions=["maximize"])
            if named:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    study.set_metric_names(["acc"])
            study.optimize(lambda t: 1.0, n_trials=1)
        finally:
            optuna.logging.set_verbosity(level)
    return write


def _mysql_installed() -> bool:
    return any(importlib.util.find_spec(m) is not None for m in ("MySQLdb", "pymysql", "mysql"))


def case(name: str, argv: list[str], says: str, damage: Callable[[Path], None] | None = None,
         **options: Any) -> Any:
    """One bad input: its argv, what its one line must say, how to damage the model copy first.

    In ``argv``, ``{tmp}`` is the test's directory (holding ``afile``, a plain file, and ``table.csv``)
    and ``{model}`` the test's copy of the model directory.
    """
    return pytest.param(argv, says, damage, id=name, **options)


CASES = [
    # output paths, checked before any work
    case("export -o DIR", ["export", "nb201", "--arch", ARCH, "-o", "{tmp}"], "is a directory"),
    case("export -o below a file", ["export", "nb201", "--arch", ARCH, "-o", "{tmp}/afile/x.txt"],
         "is a file, not a directory"),
    case("export -o unwritable", ["export", "nb201", "--arch", ARCH, "-o", f"{UNWRITABLE}.txt"],
         "cannot write"),
    case("export onnx -o FILE", ["export", "nb201", "--random", "2", "--format", "onnx", "-o", "{tmp}/afile"],
         "exists and is not a directory"),
    case("data -o DIR", ["data", "nb201", "--objectives", "acc", "-o", "{tmp}"], "is a directory"),
    case("data -o below a file", ["data", "nb201", "--objectives", "acc", "-o", "{tmp}/afile/t.csv"],
         "is a file, not a directory"),
    case("data -o unwritable", ["data", "nb201", "--objectives", "acc", "-o", f"{UNWRITABLE}.csv"],
         "cannot write"),
    case("search --out FILE", [*SEARCH, "--out", "{tmp}/afile"], "exists and is not a directory"),
    case("search --out below a file", [*SEARCH, "--out", "{tmp}/afile/run"], "is a file, not a directory"),
    case("search --out unwritable", [*SEARCH, "--out", UNWRITABLE], "cannot write"),
    case("train -o FILE", [*TRAIN, "-o", "{tmp}/afile", "--size", "tiny", "--epochs", "1", "-q"],
         "exists and is not a directory"),
    # inputs with no bound: threads beyond the cores, a batch beyond the memory
    case("measure threads", ["measure", "nb201", "--device", "cpu-999t-b1", "--random", "1", "--db",
                             "{tmp}/l.db"], "would time the oversubscription"),
    case("measure batch", ["measure", "nb201", "--device", "cpu-1t-b100000000", "--random", "1", "--db",
                           "{tmp}/l.db"], "GiB with activations"),
    case("search threads", [*SEARCH, "--objectives", "acc,cpu-999t-b1"], "would time the oversubscription"),
    # input files and what is read from them
    case("train --data DIR", ["train", "--data", "{tmp}", "-o", "{tmp}/m"], "--data"),
    case("train --data not a table", ["train", "--data", "{tmp}/afile", "-o", "{tmp}/m"],
         "not a benchmark table"),
    case("train --objectives absent", [*TRAIN, "--objectives", "lat"], "not among the columns"),
    case("train --space other", [*TRAIN, "--space", "fbnet"], "not a fbnet architecture id"),
    case("train inf label", ["train", "--data", "{tmp}/t.csv", "--space", "nb201", "-o", "{tmp}/m"],
         f"column 'lat' of {OTHER} is inf, which is not a measurement",
         _table("t.csv", f"{ARCH},70,1.5", f"{OTHER},80,inf")),
    case("train duplicate id", ["train", "--data", "{tmp}/t.csv", "--space", "nb201", "-o", "{tmp}/m"],
         f"arch id '{ARCH}' is on lines 2 and 4",
         _table("t.csv", f"{ARCH},70,1.5", f"{OTHER},80,2", f"{ARCH},71,1.6")),
    case("train empty column", ["train", "--data", "{tmp}/t.csv", "--space", "nb201", "-o", "{tmp}/m"],
         "column 'lat' has fewer than two values", _table("t.csv", f"{ARCH},70,", f"{OTHER},80,")),
    case("predict truncated weights", PREDICT, "model.safetensors", _truncate_weights),
    case("predict random weights", PREDICT, "model.safetensors", _random_weights),
    case("eval truncated weights", EVAL, "model.safetensors", _truncate_weights),
    case("predict config list", PREDICT, "config.json: expected a JSON object", _config_list),
    case("eval config unknown key", EVAL, "unknown model setting(s) bogus", _config_unknown_key),
    case("predict config unknown top-level key", PREDICT, "unknown key(s) objectivs",
         _config_unknown_top_key),
    case("predict config huge", PREDICT, "more than the 1,000,000,000", _config_huge),
    case("predict --samples 0", [*PREDICT[:-1], "0"], "--samples 0"),
    case("predict another space", ["predict", "{model}", "--space", "fbnet", "--random", "1"],
         "was trained on nb201 architectures, not fbnet's"),
    case("objectives unknown space", ["objectives", "nb999"], "unknown search space 'nb999'"),
    # the latency store
    case("measure --db DIR", ["measure", "nb201", "--random", "1", "--db", "{tmp}", "-q"], "--db"),
    case("data --db not SQLite",
         ["data", "nb201", "--objectives", "cpu-1t-b1", "--db", "{tmp}/afile", "-o", "{tmp}/t.csv"],
         "not an SQLite database"),
    # search settings
    case("--storage unknown scheme", [*SEARCH, "--storage", "foo://bar"], "'foo'"),
    case("--storage malformed", [*SEARCH, "--storage", "not a url"], "not a database URL"),
    case("--storage driver missing", [*SEARCH, "--storage", "mysql://u@h/db"], "driver is not installed",
         marks=pytest.mark.skipif(_mysql_installed(), reason="a MySQL driver is installed")),
    case("--storage in a missing directory", [*SEARCH, "--storage", "sqlite:///{tmp}/no/such/study.db"],
         "does not exist"),
    case("--rlm-option not a number", [*RLM_SEARCH, "--rlm-option", "num_candidates=abc"],
         "expected a whole number"),
    case("--rlm-option model unknown key", [*RLM_SEARCH, "--rlm-option", 'model={"bogus": 1}'], "bogus"),
    case("--rlm-option model inconsistent", [*RLM_SEARCH, "--rlm-option", 'model={"d_model": 30}'],
         "divisible"),
    case("--budget over the space", [*SEARCH, "--budget", "20000"], "15,625"),
    case("--base not a model", [*RLM_SEARCH, "--base", "{tmp}"], "not a usable base model"),
    # warm starts: what the search reads before it starts
    case("--warm-start missing file", [*RLM_SEARCH, "--warm-start", "{tmp}/missing.csv"],
         "missing.csv: no such file"),
    case("--warm-start unknown study", [*RLM_SEARCH, "--warm-start", "sqlite:///{tmp}/s.db",
                                        "--warm-start-study", "nope"], "--warm-start-study nope: no storage",
         _study(named=True)),
    case("--warm-start unnamed objectives", [*RLM_SEARCH, "--warm-start", "sqlite:///{tmp}/s.db"],
         "study earlier does not name its objectives", _study(named=False)),
    case("--warm-start another space", [*RLM_SEARCH, "--warm-start", "{tmp}/t.csv"],
         "is no architecture of space 'nb201'", _table("t.csv", "not-a-cell,70,1.5")),
    case("--warm-start-study alone", [*RLM_SEARCH, "--warm-start-study", "earlier"], "needs --warm-start"),
]


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with its size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.mark.parametrize(("argv", "says", "damage"), CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(capsys, tmp_path: Path, monkeypatch, model_dir,
                                                         argv, says, damage) -> None:
    monkeypatch.chdir(tmp_path)  # a default output (runs/..., latency.db) would land here, and be seen
    (tmp_path / "afile").write_text("a plain file\n")
    ids = [ARCH, "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"]
    BenchmarkTable("nb201", ids, [Objective("acc", "%", "", "test", True)], np.array([[70.0], [80.0]])
                   ).to_csv(tmp_path / "table.csv")
    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    if damage is not None:
        damage(model)
    before = _listing(tmp_path)
    code = main([a.replace("{tmp}", str(tmp_path)).replace("{model}", str(model)) for a in argv])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("nasrlm: error: "), err
    assert says in lines[0] and "Traceback" not in err
    assert out == ""
    assert _listing(tmp_path) == before  # nothing created, nothing half-written
    assert not os.path.lexists(UNWRITABLE) and not os.path.lexists(f"{UNWRITABLE}.txt")



def test_user_errors_are_nasrlm_errors_and_keep_their_builtin_bases() -> None:
    """``main`` prints NasrlmError as one line; code that caught the built-in bases still catches them."""
    from nasrlm.cli import CliError
    from nasrlm.data import DataFileError, DataFileNotFoundError, UnknownObjectiveError
    from nasrlm.data._analog import AnalogNasBenchNotFoundError
    from nasrlm.errors import NasrlmError
    from nasrlm.measure import LatencyStoreError
    from nasrlm.rlm.checkpoints import ModelFileError, ModelNotFoundError
    from nasrlm.rlm.pretraining import PretrainInputError

    bases = {CliError: Exception, DataFileError: ValueError, DataFileNotFoundError: FileNotFoundError,
             UnknownObjectiveError: KeyError, AnalogNasBenchNotFoundError: ModuleNotFoundError,
             LatencyStoreError: RuntimeError, ModelFileError: ValueError,
             ModelNotFoundError: FileNotFoundError, PretrainInputError: ValueError}
    for error, builtin in bases.items():
        assert issubclass(error, NasrlmError) and issubclass(error, builtin), error
    assert issubclass(UnknownObjectiveError, ValueError)


def test_a_report_never_shows_a_storage_password() -> None:
    from nasrlm.cli._search import _shown_command

    shown = _shown_command(["search", "nb201", "--storage", "postgresql://me:s3cret@db/x", "--seed", "1"])
    assert "s3cret" not in shown and "postgresql://me:***@db/x" in shown and shown.endswith("--seed 1")
    assert "s3cret" not in _shown_command(["search", "--storage=postgresql://me:s3cret@db/x"])
