"""The command line: every command on the happy path, and one clear line for bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from nasrlm.cli import COMMANDS, main
from nasrlm.cli._predict import _json_number
from nasrlm.data import BenchmarkTable
from search_spaces import NasBench201

REPO = Path(__file__).resolve().parents[2]
ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_spaces_lists_nb201(capsys) -> None:
    code, out, _ = run(capsys, "spaces", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert {"name": "nb201", "size": 15625}.items() <= rows["nb201"].items()
    assert {"nb101", "fbnet"} <= rows.keys()


def test_export_text_to_stdout_is_the_canonical_text(capsys) -> None:
    from search_spaces import get_space

    space = get_space("nb201")
    code, out, _ = run(capsys, "export", "nb201", "--arch", ARCH)
    assert code == 0 and out == space.to_text(space.parse(ARCH))


def test_export_random_jsonl_is_reproducible(capsys) -> None:
    _, first, _ = run(capsys, "export", "nb201", "--random", "3", "--seed", "5", "--format", "jsonl")
    _, again, _ = run(capsys, "export", "nb201", "--random", "3", "--seed", "5", "--format", "jsonl")
    rows = [json.loads(line) for line in first.splitlines()]
    assert first == again and len({r["arch_id"] for r in rows}) == 3


def test_export_onnx_files_with_index(capsys, tmp_path: Path) -> None:
    code, _, _ = run(capsys, "export", "nb201", "--random", "2", "--format", "onnx", "-o", str(tmp_path))
    assert code == 0
    index = (tmp_path / "index.csv").read_text().splitlines()
    assert index[0] == "file,arch_id" and len(index) == 3
    onnx.checker.check_model(onnx.load(tmp_path / index[1].split(",")[0]), full_check=True)


def test_measure_then_data_uses_the_profile_as_an_objective(capsys, tmp_path: Path) -> None:
    db = str(tmp_path / "lat.db")
    code, _, err = run(capsys, "measure", "nb201", "--device", "cpu-1t-b1", "--arch", ARCH, "--db", db,
                       "--warmup", "1", "--runs", "3", "--quiet")
    assert code == 0 and "1 measured now" in err
    code, _, err = run(capsys, "measure", "nb201", "--arch", ARCH, "--db", db, "--quiet")
    assert code == 0 and "0 measured now, 1 already" in err
    out = tmp_path / "table.csv"
    code, _, err = run(capsys, "data", "nb201", "--objectives", "acc,cpu-1t-b1", "--db", db, "-o", str(out))
    assert code == 0
    table = BenchmarkTable.read_csv(out)
    assert [o.name for o in table.objectives] == ["acc", "cpu-1t-b1"]
    assert [o.unit for o in table.objectives] == ["%", "ms"]
    latency = table.column("cpu-1t-b1")
    assert (latency > 0).sum() == 1 and table.ids[int((latency > 0).argmax())] == ARCH


def test_data_records_which_accuracy_source_was_used(capsys, tmp_path: Path, data_dir: Path,
                                                     monkeypatch) -> None:
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    out = tmp_path / "t.csv"
    run(capsys, "data", "nb201", "--objectives", "acc", "-o", str(out))
    assert "analog-nasbench" in BenchmarkTable.read_csv(out).objectives[0].source
    run(capsys, "data", "nb201", "--objectives", "acc,pixel3", "--data-dir", str(data_dir), "-o", str(out))
    table = BenchmarkTable.read_csv(out)
    assert "cifar10_200ep.csv" in table.objectives[0].source and len(table.ids) == 15625
    assert table.column("pixel3")[table.ids.index(ARCH)] == pytest.approx(17.2381, abs=1e-4)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["export", "nb999", "--random", "1"], "unknown search space 'nb999'"),
        (["search", "nb201", "--objectives", "acc", "--budget", "3", "--constraint", "pixel3<10"],
         "--constraint: constraint 'pixel3<10': expected NAME<=LIMIT or NAME>=LIMIT"),
        (["search", "nb201", "--objectives", "acc", "--budget", "3", "--constraint", "pixel3<=x"],
         "the limit 'x' is not a number"),
        (["search", "nb201", "--objectives", "acc", "--budget", "3", "--constraint", "pixel3<=2",
          "--constraint", "pixel3 <= 2"], "--constraint pixel3<=2 is given twice"),
        (["export", "nb201", "--arch", "|nor_conv_3x3~0|+|bogus~0|none~1|+|none~0|none~1|none~2|"], "bogus"),
        (["data", "nb201", "--objectives", "acc,pixle3", "-o", "x.csv"], "did you mean 'pixel3'"),
        (["measure", "nb201", "--device", "gpu-b1", "--random", "1"], "provider 'gpu'"),
        (["data", "nb201", "--objectives", "pixel3", "--data-dir", "/nonexistent/dir", "-o", "x.csv"],
         "/nonexistent/dir"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path: Path, monkeypatch, argv, says) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("nasrlm: error:") and says in err
    assert "Traceback" not in err


def test_python_dash_m_works() -> None:
    done = subprocess.run([sys.executable, "-m", "nasrlm", "spaces"], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert "nb201" in done.stdout


@pytest.mark.slow
def test_train_predict_eval_end_to_end(capsys, tmp_path: Path) -> None:
    import numpy as np

    from nasrlm.data import Objective
    from search_spaces import NasBench201

    space = NasBench201()
    ids = space.sample_ids(40, seed=2)
    convs = np.array([[sum(op.startswith("nor_conv") for op in space.parse(i).ops)] for i in ids], float)
    table = BenchmarkTable("nb201", ids, [Objective("acc", "%", "toy accuracy", "test", True),
                                          Objective("lat", "ms", "toy latency", "test", False)],
                           np.hstack([80 + 2 * convs, 1 + convs]))
    data = table.to_csv(tmp_path / "train.csv")
    model = tmp_path / "model"
    code, _, err = run(capsys, "train", "--data", str(data), "-o", str(model), "--size", "tiny",
                       "--epochs", "2", "--pretrain", "8", "--quiet")
    assert code == 0 and "saved" in err and (model / "model.safetensors").is_file()
    assert json.loads((model / "config.json").read_text())["spaces"] == ["nb201"]  # predict checks it
    code, out, _ = run(capsys, "predict", str(model), "--space", "nb201", "--arch", ids[0], "--samples", "8")
    prediction = json.loads(out)[ids[0]]
    assert code == 0 and set(prediction) == {"acc", "lat"} and prediction["lat"]["unit"] == "ms"
    code, out, _ = run(capsys, "eval", str(model), "--data", str(data), "--samples", "4", "--quiet")
    scores = json.loads(out)
    assert code == 0 and scores["acc"]["n"] == 40 and -1 <= scores["acc"]["kendall"] <= 1
    code, _, err = run(capsys, "eval", str(tmp_path), "--data", str(data))
    assert code == 2 and "not a nasrlm model directory" in err


def test_train_on_a_published_column_named_like_a_free_label(capsys, tmp_path: Path) -> None:
    """NB101 and FBNet tables publish ``params_m``; pre-training on the counted one must not clash."""

    from nasrlm.data import Objective
    from nasrlm.free_labels import free_labels
    from search_spaces import NasBench201

    space = NasBench201()
    ids = space.sample_ids(12, seed=3)
    published = free_labels(space, ids)[:, :1]
    table = BenchmarkTable("nb201", ids, [Objective("params_m", "M", "published parameters", "test", False)],
                           published)
    data = table.to_csv(tmp_path / "train.csv")
    code, _, err = run(capsys, "train", "--data", str(data), "-o", str(tmp_path / "model"), "--size", "tiny",
                       "--epochs", "1", "--pretrain", "4", "--quiet")
    assert code == 0 and "saved" in err, err


@pytest.mark.parametrize("prior", ["line", "forest"])
def test_train_with_a_prior_then_predict_and_eval_compute_its_labels(capsys, tmp_path, prior) -> None:
    from nasrlm.data import Objective
    from nasrlm.free_labels import free_labels
    from search_spaces import NasBench201

    space = NasBench201()
    ids = space.sample_ids(30, seed=4)
    latency = 1 + 2 * free_labels(space, ids)[:, 1:]  # explained by the MACs alone
    table = BenchmarkTable("nb201", ids, [Objective("lat", "ms", "toy latency", "test", False)], latency)
    data = table.to_csv(tmp_path / "train.csv")
    model = tmp_path / "model"
    code, _, err = run(capsys, "train", "--data", str(data), "-o", str(model), "--size", "tiny",
                       "--epochs", "1", "--prior", prior, "--quiet")
    assert code == 0 and f"{prior} prior on the free labels" in err, err
    code, out, _ = run(capsys, "eval", str(model), "--data", str(data), "--samples", "16", "--quiet")
    assert code == 0 and json.loads(out)["lat"]["kendall"] > 0.9  # one epoch: the prior's ranking
    code, out, _ = run(capsys, "predict", str(model), "--space", "nb201", "--arch", ids[0], "--samples", "4")
    assert code == 0 and set(json.loads(out)[ids[0]]) == {"lat"}


def test_train_on_inputs_then_eval_and_predict_read_them_from_a_table(capsys, tmp_path) -> None:
    """``--inputs``: columns measured for every architecture (another device's latency) that the prior reads;
    eval takes them from its table, predict from ``--inputs CSV``, and each says which is missing."""
    import numpy as np

    from nasrlm.data import Objective

    space = NasBench201()
    ids = space.sample_ids(30, seed=6)
    known = np.random.default_rng(0).uniform(1, 5, 30)  # a device already measured
    table = BenchmarkTable("nb201", ids, [Objective("old", "ms", "a known device", "test", False),
                                          Objective("new", "ms", "a new device", "test", False)],
                           np.column_stack([known, 2 * known**1.5]))  # the new one a power law of it
    data = table.to_csv(tmp_path / "train.csv")
    model = tmp_path / "model"
    code, _, err = run(capsys, "train", "--data", str(data), "-o", str(model), "--size", "tiny", "--epochs",
                       "1", "--prior", "ridge", "--inputs", "old", "--quiet")
    assert code == 0 and "ridge prior on old:" in err, err
    code, out, _ = run(capsys, "eval", str(model), "--data", str(data), "--samples", "8", "--quiet")
    assert code == 0 and set(json.loads(out)) == {"new"} and json.loads(out)["new"]["kendall"] > 0.9
    code, out, err = run(capsys, "predict", str(model), "--space", "nb201", "--arch", ids[0])
    assert code == 2 and "prior reads old of every architecture: give a table of them with --inputs" in err
    code, out, _ = run(capsys, "predict", str(model), "--space", "nb201", "--arch", ids[0], "--samples", "4",
                       "--inputs", str(data))
    assert code == 0 and set(json.loads(out)[ids[0]]) == {"new"}
    other = space.sample_ids(40, seed=7)[-1]
    code, out, err = run(capsys, "predict", str(model), "--space", "nb201", "--arch", other, "--inputs",
                         str(data))
    assert code == 2 and f"no row for {other!r}" in err
    alone = BenchmarkTable("nb201", ids, [table.objectives[1]], table.values[:, 1:])
    alone = alone.to_csv(tmp_path / "n.csv")
    code, out, err = run(capsys, "eval", str(model), "--data", str(alone))
    assert code == 2 and "reads old, which are not among its columns" in err
    for flags, says in ((["--prior", "none"], "--inputs is read by a feature prior, not by --prior none"),
                        (["--objectives", "old"], "nothing is left to learn"),
                        (["--equivalents", "1"], "an equivalent architecture's --inputs are not known")):
        code, _, err = run(capsys, "train", "--data", str(data), "-o", str(tmp_path / "m2"), "--size", "tiny",
                           "--inputs", "old", *flags)
        assert code == 2 and says in err, err


@pytest.mark.slow
def test_train_with_equivalent_architectures(capsys, tmp_path) -> None:
    import numpy as np

    from nasrlm.data import Objective
    from search_spaces import NasBench201

    space = NasBench201()
    ids = space.sample_ids(20, seed=5)
    ids[0] = "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"  # has dead edges
    values = np.column_stack([np.linspace(60, 90, 20), np.linspace(1, 3, 20)])
    table = BenchmarkTable("nb201", ids, [Objective("acc", "%", "toy accuracy", "test", True),
                                          Objective("lat", "ms", "toy latency", "test", False)], values)
    data = table.to_csv(tmp_path / "train.csv")
    code, _, err = run(capsys, "train", "--data", str(data), "-o", str(tmp_path / "model"), "--size", "tiny",
                       "--epochs", "1", "--equivalents", "2", "--quiet")  # with the default prior
    n = sum(bool(space.equivalents(space.parse(i))) for i in ids)
    assert code == 0 and f"{2 * n} equivalent architectures of {n} labelled ones carry acc" in err
    code, _, err = run(capsys, "train", "--data", str(data), "-o", str(tmp_path / "m2"), "--equivalents", "1",
                       "--carry", "top1")
    assert code == 2 and "--carry: top1 not among the objectives trained (acc, lat)" in err
    code, _, err = run(capsys, "train", "--data", str(data), "-o", str(tmp_path / "m2"), "--equivalents", "1",
                       "--objectives", "lat")
    assert code == 2 and "--carry acc" in err


@pytest.mark.slow
def test_pretrain_then_fine_tune_a_new_column_with_init(capsys, tmp_path: Path, data_dir: Path) -> None:
    import numpy as np

    from nasrlm.data import Objective
    from search_spaces import NasBench201

    base = tmp_path / "base"
    code, _, err = run(capsys, "pretrain", "--data-dir", str(data_dir), "-o", str(base), "--spaces", "nb201",
                       "--exclude", "nb201:*acc*", "--max-rows", "16", "--free-rows", "0", "--max-steps", "3",
                       "--size", "tiny", "--device", "cpu", "--quiet")
    assert code == 0 and "saved base model" in err, err
    tags = json.loads((base / "config.json").read_text())["model"]["objectives"]
    assert "nb201:pixel3" in tags and not [t for t in tags if "acc" in t]
    code, _, err = run(capsys, "pretrain", "--data-dir", str(data_dir), "-o", str(base), "--spaces", "nb201")
    assert code == 2 and "not empty" in err
    code, _, err = run(capsys, "pretrain", "--data-dir", str(data_dir), "-o", str(base), "--resume",
                       "--max-steps", "5", "--minutes", "1", "--quiet")
    assert code == 2 and "--exclude" in err  # resuming must not change what the base saw
    shipped = tmp_path / "shipped"
    code, _, err = run(capsys, "pretrain", "--data-dir", str(data_dir), "-o", str(base), "--resume",
                       "--exclude", "nb201:*acc*", "--max-steps", "5", "--quiet", "--ship", str(shipped))
    assert code == 0 and "5 steps" in err and f"shipped {shipped}" in err, err
    from safetensors import safe_open

    with safe_open(shipped / "model.safetensors", "pt") as weights:  # float16, and nothing but the model
        assert {str(weights.get_tensor(k).dtype) for k in weights.keys()} == {"torch.float16"}  # noqa: SIM118
    assert {f.name for f in shipped.iterdir()} == {"config.json", "model.safetensors", "tokenizer.model",
                                                   "pretraining.json"}  # what it saw: --exclude, rows, steps
    assert json.loads((shipped / "pretraining.json").read_text())["exclude"] == ["nb201:*acc*"]
    from nasrlm.rlm.predictor import RLMPredictor

    assert RLMPredictor.load(shipped).lm.model.config == RLMPredictor.load(base).lm.model.config
    # a new run from the shipped base: its weights and normalisers, a schedule of its own, the same --exclude
    again, rows = tmp_path / "again", ["--spaces", "nb201", "--max-rows", "16", "--free-rows", "0"]
    start = ["pretrain", "--data-dir", str(data_dir), "-o", str(again), "--base", str(shipped)]
    code, _, err = run(capsys, *start, *rows, "--max-steps", "2", "--quiet")
    assert code == 2 and "--base" in err and "--exclude" in err and not again.exists()
    code, _, err = run(capsys, *start, "--resume", "--exclude", "nb201:*acc*", "--quiet")
    assert code == 2 and "give one of them" in err
    code, _, err = run(capsys, *start, "--exclude", "nb201:*acc*", *rows, "--max-steps", "2", "--quiet")
    assert code == 0 and "2 steps" in err, err
    first, second = RLMPredictor.load(shipped), RLMPredictor.load(again)
    assert second.lm.model.config == first.lm.model.config and second.lm.normalizers == first.lm.normalizers
    record = json.loads((again / "pretraining.json").read_text())
    assert record["step"] == 2 and record["init"]["step"] == 5  # counted afresh, and the steps before
    parent = record["init"]  # where the weights came from, and what they had seen
    assert parent["path"] == str(shipped) and parent["init"] is None and "loss" not in parent
    deeper = tmp_path / "deeper"  # the shipped base's encoder deepened, the record saying so
    deepen = ["pretrain", "--data-dir", str(data_dir), "--init", str(shipped), "--exclude", "nb201:*acc*",
              *rows, "--quiet"]
    code, _, err = run(capsys, *deepen, "-o", str(deeper), "--encoder-layers", "3", "--max-steps", "1")
    assert code == 0 and "--init is an alias of --base" in err, err  # the old name, which says so
    deepened = RLMPredictor.load(deeper).lm.model.config
    assert deepened.encoder_layers == 3 != first.lm.model.config.encoder_layers
    assert json.loads((deeper / "pretraining.json").read_text())["init"]["encoder_layers"] == 3
    code, _, err = run(capsys, *deepen, "-o", str(tmp_path / "same"), "--encoder-layers", "1")
    assert code == 2 and "--encoder-layers: encoder_layers 1: the model already has 1" in err, err
    code, _, err = run(capsys, "pretrain", "-o", str(tmp_path / "new"), "--encoder-layers", "3")
    assert code == 2 and "give --base" in err

    space = NasBench201()
    ids = space.sample_ids(12, seed=5)
    table = BenchmarkTable("nb201", ids, [Objective("acc", "%", "toy accuracy", "test", True)],
                           np.linspace(60, 90, 12)[:, None])
    data = table.to_csv(tmp_path / "few.csv")
    model = tmp_path / "model"
    code, _, err = run(capsys, "train", "--data", str(data), "-o", str(model), "--base", str(base),
                       "--epochs", "1", "--device", "cpu", "--quiet")
    assert code == 0 and "new: acc" in err, err
    code, out, _ = run(capsys, "predict", str(model), "--space", "nb201", "--arch", ids[0], "--samples", "4")
    assert code == 0 and 60 <= json.loads(out)[ids[0]]["acc"]["median"] <= 90
    # a device the base never saw: read after the three latencies it knows that rank its rows best
    device = Objective("my_device", "ms", "a device the base never saw", "test", False)
    latencies = BenchmarkTable("nb201", ids, [device], np.geomspace(2, 9, 12)[:, None])
    data = latencies.to_csv(tmp_path / "latencies.csv")
    for name, read, expected in (("reading", [], 3), ("alone", ["--read", "0"], 0)):
        code, _, err = run(capsys, "train", "--data", str(data), "-o", str(tmp_path / name), "--base",
                           str(base), "--epochs", "1", "--device", "cpu", "--quiet", *read)
        assert code == 0 and "new: my_device" in err, err
        reads = RLMPredictor.load(tmp_path / name).lm.reads_first
        assert len(reads) == expected and all(f"nb201:{r}" in tags for r in reads), reads
        assert ("first" in err) == bool(expected), err
    code, out, _ = run(capsys, "predict", str(tmp_path / "reading"), "--space", "nb201", "--arch", ids[0])
    assert code == 0 and set(json.loads(out)[ids[0]]) == {"my_device"}  # what it reads is not reported


@pytest.mark.slow
def test_pretrain_writes_a_transfer_forest_train_base_reads(capsys, tmp_path: Path, data_dir: Path) -> None:
    import numpy as np

    from nasrlm.data import Objective
    from nasrlm.priors.transfer import TRANSFER_LABEL, AccuracyTransfer
    from nasrlm.rlm.predictor import RLMPredictor
    from search_spaces import NasBench201

    base = tmp_path / "base"
    # NB301, not NB101: its table needs no hashing of the whole space (cold, 1-3 min)
    code, _, err = run(capsys, "pretrain", "--data-dir", str(data_dir), "-o", str(base), "--spaces", "nb301",
                       "--max-rows", "40", "--free-rows", "0", "--max-steps", "1", "--size", "tiny")
    assert code == 0 and "transfer forests: nb301 (40 rows of nb301:acc)" in err, err
    assert AccuracyTransfer.find(base).tags == ("nb301:acc",)
    ids = NasBench201().sample_ids(12, seed=5)
    table = BenchmarkTable("nb201", ids, [Objective("acc", "%", "toy accuracy", "test", True)],
                           np.linspace(60, 90, 12)[:, None])
    model = tmp_path / "model"
    code, _, err = run(capsys, "train", "--data", str(table.to_csv(tmp_path / "few.csv")), "-o", str(model),
                       "--base", str(base), "--epochs", "1")
    assert code == 0 and "what nb301's published accuracy says" in err, err
    assert RLMPredictor.load(model).prior_part.inputs[-1] == TRANSFER_LABEL  # the prior reads what NB301 says
    code, out, _ = run(capsys, "predict", str(model), "--space", "nb201", "--arch", ids[0], "--samples", "4")
    assert code == 0 and 60 <= json.loads(out)[ids[0]]["acc"]["median"] <= 90


@pytest.mark.parametrize(("argv", "says"), [
    (["train", "--data", "{table}", "-o", "{tmp}/m", "--base", "{tmp}"],
     "--base {tmp}: not a usable base model"),
    (["train", "--data", "{table}", "-o", "{tmp}/m", "--base", "{tmp}", "--pretrain", "5"],
     "--base and --pretrain"),
    (["predict", "{tmp}", "--space", "nb201", "--random", "1", "--device", "tpu"], "--device 'tpu'"),
])
def test_base_and_device_errors_are_one_line(capsys, tmp_path: Path, argv, says) -> None:
    import numpy as np

    from nasrlm.data import Objective
    from search_spaces import NasBench201

    ids = NasBench201().sample_ids(3)
    table = BenchmarkTable("nb201", ids, [Objective("acc", "%", "", "test", True)], np.ones((3, 1)))
    path = table.to_csv(tmp_path / "t.csv")
    code, _, err = run(capsys, *[a.format(table=path, tmp=tmp_path) for a in argv])
    assert code == 2 and says.format(tmp=tmp_path) in err and err.count("\n") == 1, err


def test_search_reads_its_base_once_and_the_old_option_says_it_is_an_alias(capsys, tmp_path: Path) -> None:
    search = ["search", "nb201", "--objectives", "acc,cpu-1t-b1", "--budget", "2", "-q",
              "--out", str(tmp_path / "run")]
    code, _, err = run(capsys, *search, "--rlm-option", f"base={tmp_path}")
    assert code == 2 and "--rlm-option base= is an alias of --base" in err, err
    assert f"--base {tmp_path}: not a usable base model" in err, err
    code, _, err = run(capsys, *search, "--base", "shipped", "--rlm-option", f"base={tmp_path}")
    assert code == 2 and "give one of them" in err, err


def test_the_cli_offers_every_prior_kind() -> None:
    from nasrlm.cli import build_parser
    from nasrlm.priors.feature_prior import PRIOR_KINDS

    parser = build_parser()
    for kind in ("none", *PRIOR_KINDS):
        assert parser.parse_args(["train", "--data", "t.csv", "-o", "model", "--prior", kind]).prior == kind


def test_eval_writes_an_undefined_correlation_as_json_null() -> None:
    assert _json_number(float("nan")) is None and _json_number(0.25) == 0.25
    assert json.loads(json.dumps({"kendall": _json_number(float("nan"))})) == {"kendall": None}


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_command_prints_its_help(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0 and f"usage: nasrlm {command}" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "variable", "value"), [
    (["--jobs", "2"], "NASRLM_JOBS", "2"), (["--cache", "{tmp}/c"], "NASRLM_CACHE", "{tmp}/c"),
    (["--no-cache"], "NASRLM_CACHE", "off")])
def test_label_options_reach_the_label_cache(argv, variable, value, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NASRLM_JOBS", "1")  # both restored after the test, which the command changes
    monkeypatch.setenv("NASRLM_CACHE", str(tmp_path / "default"))
    seen = {}

    class Recording:  # a model that records what the command set before it predicts
        predicts = ("acc",)
        prior_part = None  # no prior: no inputs to read

        def to(self, device):
            return self

    def predict_archs(predictor, space, ids, objectives, **kwargs):  # reads texts through the label cache
        seen["value"] = os.environ.get(variable)
        raise SystemExit(0)

    monkeypatch.setattr("nasrlm.cli._predict._load_model_for", lambda path, space: Recording())
    monkeypatch.setattr("nasrlm.rlm.tuning.predict_archs", predict_archs)
    with pytest.raises(SystemExit):
        main(["predict", "m", "--space", "nb201", "--random", "1", "-q",
              *(a.format(tmp=tmp_path) for a in argv)])
    assert seen["value"] == value.format(tmp=tmp_path)


def test_a_cache_option_naming_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    afile = tmp_path / "f"
    afile.write_text("x")
    assert main(["predict", "m", "--space", "nb201", "--random", "1", "--cache", str(afile)]) == 2
    assert f"--cache {afile}: not a folder" in capsys.readouterr().err


def test_objectives_lists_what_every_space_has(capsys) -> None:
    assert main(["objectives", "nds_vanilla"]) == 0  # a space without published tables
    out = capsys.readouterr().out
    assert "params_m[M]" in out and "macs_m[M]" in out and "cpu-<T>t-b<B>" in out and "val_acc" in out


def test_data_computes_parameters_and_macs_for_the_measured_rows(capsys, tmp_path: Path) -> None:
    db = str(tmp_path / "lat.db")
    assert main(["measure", "ofa_proxyless", "--random", "2", "--runs", "2", "--warmup", "1", "--db", db,
                 "-q"]) == 0
    out = tmp_path / "t.csv"
    assert main(["data", "ofa_proxyless", "--objectives", "params_m,cpu-1t-b1", "--db", db, "-o",
                 str(out)]) == 0
    table = BenchmarkTable.read_csv(out)
    from nasrlm.free_labels import free_labels
    from search_spaces import get_space

    expected = free_labels(get_space("ofa_proxyless"), table.ids)[:, 0]
    assert len(table.ids) == 2 and table.column("params_m").tolist() == expected.tolist()
    assert main(["data", "ofa_proxyless", "--objectives", "params_m", "-o", str(tmp_path / "u.csv")]) == 2
    assert "name a published or measured one too" in capsys.readouterr().err


class BrokenNB201(NasBench201):
    """NB201 with a bug a user might write: ``build_onnx`` raises for cells with a ``none`` edge."""

    name = "broken201"

    def build_onnx(self, arch):
        if "none" in self.arch_id(arch):
            raise ValueError("none edges unsupported")
        return super().build_onnx(arch)


def test_export_warns_about_an_architecture_that_fails_to_build_and_goes_on(capsys, tmp_path: Path,
                                                                            monkeypatch) -> None:
    from search_spaces import _registry

    monkeypatch.setitem(_registry._FACTORIES, "broken201", BrokenNB201)
    out = tmp_path / "t.jsonl"
    assert main(["export", "broken201", "--random", "6", "--format", "jsonl", "-o", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    written = [json.loads(line)["arch_id"] for line in out.read_text().splitlines()]
    assert len(written) == 1 and "none" not in written[0]
    assert len(err) == 6 and err[-1] == "nasrlm: 5 of 6 architectures failed (see the warnings above)"
    assert all(line.startswith("nasrlm: warning: broken201 architecture |") and
               line.endswith("failed to build: ValueError: none edges unsupported") for line in err[:-1])
    broken = next(i for i in BrokenNB201().sample_ids(20, seed=0) if "none" in i)
    assert main(["export", "broken201", "--arch", broken]) == 2  # the only one asked: a one-line error
    assert capsys.readouterr().err.count("\n") == 1


def test_measure_warns_about_an_architecture_that_fails_to_build_and_goes_on(capsys, tmp_path: Path,
                                                                             monkeypatch) -> None:
    from search_spaces import _registry

    monkeypatch.setitem(_registry._FACTORIES, "broken201", BrokenNB201)
    ids = BrokenNB201().sample_ids(6, seed=0)
    argv = ["measure", "broken201", "--runs", "2", "--warmup", "1", "--db", str(tmp_path / "l.db"), "-q"]
    assert main([*argv, *(a for i in ids for a in ("--arch", i))]) == 1
    err = capsys.readouterr().err.splitlines()
    broken = [i for i in ids if "none" in i]
    assert [line for line in err if "warning:" in line] == [
        f"nasrlm: warning: broken201 architecture {i} failed to build or run: ValueError: none edges "
        f"unsupported" for i in broken]
    assert err[-1] == f"nasrlm: {len(broken)} of 6 architectures failed (see the warnings above)"


def test_search_constraints_on_unknown_or_unmeetable_quantities_are_one_line(capsys, tmp_path, data_dir):
    base = ["search", "nb201", "--objectives", "acc", "--budget", "3", "--sampler", "random", "--data-dir",
            str(data_dir), "--out", str(tmp_path / "run"), "-q"]
    code, out, err = run(capsys, *base, "--constraint", "nonsense<=3")
    assert code == 2 and err.count("\n") == 1 and "unknown NB201 objective 'nonsense'" in err
    code, out, err = run(capsys, *base, "--constraint", "pixel3<=0.001")
    assert code == 2 and err.count("\n") == 1
    assert "none of the 15,625 architectures of the table meets pixel3<=0.001 (the closest: pixel3 0.00328)" \
        in err
    assert not (tmp_path / "run").exists()
    code, out, err = run(capsys, *base, "--constraint", "pixel3<=3", "--storage",
                         f"sqlite:///{tmp_path / 'study.db'}")
    assert code == 0 and re.search(r"\d+% feasible, (none feasible|best feasible)", out)
    code, out, err = run(capsys, *base, "--constraint", "pixel3<=4", "--storage",
                         f"sqlite:///{tmp_path / 'study.db'}", "--budget", "5")
    assert code == 2 and "searches under the constraints pixel3<=3, not pixel3<=4" in err


def test_plot_draws_studies_of_any_sampler_and_tables_side_by_side(capsys, tmp_path, data_dir) -> None:
    import optuna

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    for sampler in ("random", "tpe"):
        code, _, err = run(capsys, "search", "nb201", "--objectives", "acc,pixel3", "--budget", "12",
                           "--sampler", sampler, "--data-dir", str(data_dir), "--storage", storage, "--out",
                           str(tmp_path / sampler), "-q")
        assert code == 0, err
    study = optuna.create_study(storage=storage, study_name="by-hand", directions=["maximize", "minimize"])
    study.set_metric_names(["acc", "pixel3"])  # another tool's study: no arch_id, its own sampler
    study.optimize(lambda trial: (trial.suggest_float("a", 80, 90), trial.suggest_float("b", 2, 20)),
                   n_trials=6)
    out = tmp_path / "plot"
    code, stdout, err = run(capsys, "plot", storage, str(tmp_path / "random" / "pareto.csv"), "--out",
                            str(out), "--space", "nb201", "--data-dir", str(data_dir), "--report-at", "6,12")
    assert code == 0, err
    assert "4 results drawn: nb201-random-seed0, nb201-tpe-seed0, by-hand, pareto.csv" in stdout
    assert {p.name for p in out.iterdir()} == {"pareto.csv", "pareto.png", "hypervolume.png", "report.md"}
    report = (out / "report.md").read_text()
    assert "| Pareto recall | HV ratio @6 | HV ratio @12 |" in report
    rows = {line.split("|")[1].strip(): line for line in report.splitlines() if line.startswith("| nb201-")}
    assert set(rows) == {"nb201-random-seed0", "nb201-tpe-seed0"} and "| by-hand |" in report
    code, stdout, err = run(capsys, "plot", storage, "--study", "by-hand", "--out", str(tmp_path / "one"))
    assert code == 0 and "1 results drawn: by-hand" in stdout


@pytest.mark.parametrize(("sources", "says"), [
    (["{tmp}/none.csv"], "none.csv: no such file"),
    (["sqlite:///{tmp}/study.db", "--study", "other"], "--study other: no storage given holds it"),
    (["sqlite:///{tmp}/unnamed.db"], "does not name its objectives: name them with study.set_metric_names"),
    (["sqlite:///{tmp}/study.db", "{tmp}/lat.csv"], "plot results of the same objectives"),
    (["nosuchdb://x"], "nosuchdb://x: cannot be read as an Optuna storage"),
])
def test_plot_refuses_sources_it_cannot_read_in_one_line(capsys, tmp_path, sources, says) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    named = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="s",
                                directions=["maximize"])
    named.set_metric_names(["acc"])
    optuna.create_study(storage=f"sqlite:///{tmp_path / 'unnamed.db'}", study_name="u")
    ids = NasBench201().sample_ids(3, seed=0)
    from nasrlm.data import Objective

    BenchmarkTable("nb201", ids, [Objective("lat", "ms", "toy", "test", False)], [[1.0], [2.0], [3.0]]
                   ).to_csv(tmp_path / "lat.csv")
    given = [s.format(tmp=tmp_path) for s in sources]
    code, out, err = run(capsys, "plot", *given, "--out", str(tmp_path / "p"))
    assert code == 2 and out == "" and err.count("\n") == 1 and says in err, err


def test_search_warm_started_from_an_earlier_study_reads_it_and_its_baseline_gets_the_front(
        capsys, tmp_path, data_dir) -> None:
    import optuna

    storage = f"sqlite:///{tmp_path / 'earlier.db'}"
    code, _, err = run(capsys, "search", "nb201", "--objectives", "acc,pixel3", "--budget", "12", "--sampler",
                       "tpe", "--data-dir", str(data_dir), "--storage", storage, "--out", str(tmp_path / "e"),
                       "-q")
    assert code == 0, err
    earlier = optuna.load_study(study_name="nb201-tpe-seed0", storage=storage)
    tiny = ["n_startup_trials=4", "num_candidates=60", "num_samples=4", "pretrain_archs=0", "fit_steps=3",
            'model={"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1}']
    out = tmp_path / "warm"
    code, stdout, err = run(capsys, "search", "nb201", "--objectives", "acc,eyeriss", "--budget", "8",
                            "--data-dir", str(data_dir), "--warm-start", storage, "--compare", "tpe",
                            "--out", str(out), "-q", *[a for t in tiny for a in ("--rlm-option", t)])
    assert code == 0, err
    report = (out / "report.md").read_text()
    assert "## Warm start" in report
    # nasrlm search evaluates each architecture once: twelve trials, twelve architectures
    assert "- study nb201-tpe-seed0, 12 trials of 12 architectures; acc known; evidence pixel3" in report
    assert "were on an earlier front" in report
    assert len(earlier.best_trials) >= 1 and "   tpe: 8 evaluations" in stdout
