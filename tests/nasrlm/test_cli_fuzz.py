"""Random ids, tables and model configs through ``nasrlm.cli.main``: a result or one line and exit 2,
never a traceback. Property-based (hypothesis), beside the hand-written cases of test_cli_errors.py."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nasrlm.cli import main

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
#: bits of the formats under test, so that random text often comes near to valid input
PIECES = st.sampled_from(["|", "~", "+", "0", "1", "2", "nor_conv_3x3", "skip_connect", "none", ",", "\n",
                          "arch_id", "acc[%]", "lat[ms]", "nan", "inf", "-1", "1e309", "\ufeff", " ", '"'])
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=3)), max_size=30).map("".join)
LEAF = st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats() | st.text(max_size=8)
JSON = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def _outcome(capsys, argv: list[str]) -> int:
    try:
        code = main(argv)
    except SystemExit as usage:  # argparse's own refusal (an id that starts with '-' reads as an option)
        err = capsys.readouterr().err
        assert usage.code == 2 and ": error: " in err.splitlines()[-1] and "Traceback" not in err, err
        return 2
    err = capsys.readouterr().err
    assert code in (0, 2), err
    if code == 2:  # one line naming what is wrong, no traceback
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("nasrlm: error: ") and "Traceback" not in err, err
    return code


@FUZZ
@given(arch=TEXT)
def test_random_ids(capsys, arch: str) -> None:
    _outcome(capsys, ["export", "nb201", "--arch", arch])


@FUZZ
@given(body=TEXT)
def test_random_tables(capsys, tmp_path: Path, body: str) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as work:
        table = Path(work) / "t.csv"
        table.write_text(f"arch_id,acc[%]\n{ARCH},70\n{body}", encoding="utf-8", errors="surrogatepass")
        _outcome(capsys, ["eval", str(_model(tmp_path)), "--data", str(table), "--space", "nb201",
                          "--samples", "2", "-q"])


@FUZZ
@given(config=JSON)
def test_random_model_configs(capsys, tmp_path: Path, config: object) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as work:
        model = Path(work) / "model"
        shutil.copytree(_model(tmp_path), model)
        (model / "config.json").write_text(json.dumps(config))
        code = _outcome(capsys, ["predict", str(model), "--space", "nb201", "--arch", ARCH, "--samples", "2"])
        assert code == 2  # a random config is never a model


_MODELS: dict[Path, Path] = {}


def _model(tmp_path: Path) -> Path:
    """A tiny untrained model, made once per test (as test_cli_errors' fixture makes one)."""
    if tmp_path not in _MODELS:
        from nasrlm.data import Objective
        from nasrlm.rlm.predictor import RLMPredictor
        from nasrlm.rlm.tokenizers import OnnxTokenizer
        from search_spaces import NasBench201

        space = NasBench201()
        tokenizer = OnnxTokenizer.train([space.to_text(space.parse(i)) for i in space.sample_ids(20)], 400)
        predictor = RLMPredictor.from_scratch([Objective("acc", "%", "", "test", True)], size="tiny",
                                              tokenizer=tokenizer)
        _MODELS[tmp_path] = predictor.save(tmp_path / "model")
    return _MODELS[tmp_path]


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
