"""NB201 loader (keys cross-checked against a second source in every file) and the tidy table format."""

from __future__ import annotations

import csv
import itertools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from nasrlm.data import (
    NB201_OBJECTIVES,
    BenchmarkTable,
    DataFileError,
    DataFileNotFoundError,
    Objective,
    UnknownObjectiveError,
    available_nb201_objectives,
    load_analog_nasbench,
    load_nb201,
)

OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
GPUS = ("1080ti", "2080ti", "titan_rtx", "titanx", "titanxp")
DEVICES = [f"{g}_{b}" for g in GPUS for b in (1, 32, 256)] + [
    "gold_6226", "gold_6240", "silver_4114", "silver_4210r", "pixel2", "pixel3", "essential_ph_1",
    "samsung_a50", "samsung_s7", "raspi4", "eyeriss", "fpga"]
PROXIES = ("synflow", "grasp", "fisher", "grad_norm", "l2_norm", "plain", "nwot", "epe_nas", "jacov", "snip")
ZC = ["zc_flops_m"] + [f"zc_{p}" for p in PROXIES]
ACCURACY = ["acc", "cifar10_valid_acc_200ep", "cifar10_test_acc_12ep", "cifar10_valid_acc_12ep",
            "cifar100_test_acc_12ep", "cifar100_valid_acc_12ep", "imagenet16_test_acc_12ep",
            "imagenet16_valid_acc_12ep", "params_m", "analog_baseline_acc"]
ALL_NAMES = ACCURACY + DEVICES + ZC
ALL_ARCHS = {  # built independently of the loader: ops per edge in arch-string order
    "|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*ops) for ops in itertools.product(OPS, repeat=6)}
NO_DATA_OK = {"acc", "analog_baseline_acc"}


@pytest.fixture(scope="module")
def nb201_dir(data_dir: Path) -> Path:
    if not (data_dir / "nb201" / "archs.csv").is_file():
        pytest.skip(f"benchmark data not found: {data_dir / 'nb201'}")
    return data_dir


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NASRLM_DATA", raising=False)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


# --- the raw files agree with each other --------------------------------------------------------------
def test_arch_keys_agree_across_files(nb201_dir: Path) -> None:
    d = nb201_dir / "nb201"
    archs = _rows(d / "archs.csv")
    latency = _rows(d / "latency_ms.csv")
    assert [(r["nb201_index"], r["arch_str"]) for r in archs] == [
        (r["nb201_index"], r["arch_str"]) for r in latency]
    assert sorted(int(r["nb201_index"]) for r in archs) == list(range(15625))
    for name in ("archs.csv", "latency_ms.csv", "cifar10_200ep.csv", "accuracy_12ep.csv"):
        keys = [r["arch_str"] for r in _rows(d / name)]
        assert len(keys) == 15625 and set(keys) == ALL_ARCHS, name
    zc = [r for r in _rows(d / "zero_cost_725.csv") if r["dataset"] == "cifar10"]
    assert len(zc) == 725 and len({r["arch_str"] for r in zc}) == 725
    assert {r["arch_str"] for r in zc} <= ALL_ARCHS
    # second source for the accuracy key: NASLib's 200-epoch val accuracy vs the official table
    c10 = {r["arch_str"]: float(r["cifar10_valid_acc"]) for r in _rows(d / "cifar10_200ep.csv")}
    rho = spearmanr([float(r["val_accuracy"]) for r in zc], [c10[r["arch_str"]] for r in zc]).statistic
    assert rho > 0.98


def test_every_latency_column_is_an_objective(nb201_dir: Path) -> None:
    with (nb201_dir / "nb201" / "latency_ms.csv").open() as f:
        header = next(csv.reader(f))
    assert sorted(header[2:]) == sorted(DEVICES)
    for dev in DEVICES:
        obj = NB201_OBJECTIVES[dev]
        assert obj.unit == "ms" and not obj.higher_is_better
        assert "batch" in obj.description
    assert "estimated" in NB201_OBJECTIVES["eyeriss"].description
    assert "estimated" in NB201_OBJECTIVES["fpga"].description
    assert "batch 32" in NB201_OBJECTIVES["1080ti_32"].description
    assert "1080 Ti" in NB201_OBJECTIVES["1080ti_32"].description


# --- catalogue ----------------------------------------------------------------------------------------
def test_objective_names() -> None:
    assert list(NB201_OBJECTIVES) == ALL_NAMES
    assert NB201_OBJECTIVES["acc"].unit == "%" and NB201_OBJECTIVES["acc"].higher_is_better


def test_available_objectives(nb201_dir: Path, no_env: None, tmp_path: Path) -> None:
    assert {o.name for o in available_nb201_objectives(None)} == NO_DATA_OK
    assert "analog-nasbench" in next(o for o in available_nb201_objectives(None) if o.name == "acc").source
    full = available_nb201_objectives(nb201_dir)
    assert [o.name for o in full] == ALL_NAMES
    assert "cifar10_200ep.csv" in next(o for o in full if o.name == "acc").source
    (tmp_path / "nb201").mkdir()
    shutil.copy(nb201_dir / "nb201" / "cifar10_200ep.csv", tmp_path / "nb201")
    partial = {o.name for o in available_nb201_objectives(tmp_path)}
    assert partial == NO_DATA_OK | {"cifar10_valid_acc_200ep", "params_m"}


# --- loading ------------------------------------------------------------------------------------------
def test_full_load_with_data_dir(nb201_dir: Path) -> None:
    table = load_nb201(ALL_NAMES, nb201_dir)
    archs = _rows(nb201_dir / "nb201" / "archs.csv")
    assert table.space == "nb201" and table.data_dir == str(nb201_dir)
    assert table.ids == [r["arch_str"] for r in sorted(archs, key=lambda r: int(r["nb201_index"]))]
    assert table.values.shape == (15625, len(ALL_NAMES)) and table.values.dtype == np.float64
    dense = table.values[:, [table.names.index(n) for n in ACCURACY + DEVICES]]
    assert not np.isnan(dense).any()
    assert np.isnan(table.column("zc_snip")).sum() == 15625 - 725
    assert np.isnan(table.column("zc_synflow")).sum() == 15625 - 724  # one cell lacks synflow in NASLib
    # spot values straight from the files, first row of archs.csv
    first = archs[0]["arch_str"]
    row = table.ids.index(first)
    c10 = {r["arch_str"]: r for r in _rows(nb201_dir / "nb201" / "cifar10_200ep.csv")}
    assert table.column("acc")[row] == float(c10[first]["cifar10_test_acc"])
    assert table.column("params_m")[row] == float(c10[first]["params_m"])
    lat = _rows(nb201_dir / "nb201" / "latency_ms.csv")
    for r in lat[:50]:
        assert table.column("pixel3")[table.ids.index(r["arch_str"])] == float(r["pixel3"])
        assert table.column("titanxp_256")[table.ids.index(r["arch_str"])] == float(r["titanxp_256"])
    acc12 = {r["arch_str"]: r for r in _rows(nb201_dir / "nb201" / "accuracy_12ep.csv")}
    some = table.ids[1234]
    assert table.column("imagenet16_valid_acc_12ep")[1234] == float(acc12[some]["imagenet-val"])
    assert table.column("cifar100_test_acc_12ep")[1234] == float(acc12[some]["cifar100-test"])
    zc = [r for r in _rows(nb201_dir / "nb201" / "zero_cost_725.csv") if r["dataset"] == "cifar10"]
    for r in zc[:50]:
        i = table.ids.index(r["arch_str"])
        assert table.column("zc_jacov")[i] == float(r["jacov"])
        assert table.column("zc_flops_m")[i] == float(r["flops"])
    # analog column: same numbers as the package, and it tracks the official accuracy
    analog = load_analog_nasbench()
    assert list(table.column("analog_baseline_acc")) == [analog[i] for i in table.ids]
    assert spearmanr(table.column("acc"), table.column("analog_baseline_acc")).statistic > 0.99


def test_given_ids_are_gathered_in_order(nb201_dir: Path) -> None:
    full = load_nb201(["acc", "gold_6240", "zc_nwot"], nb201_dir)
    rng = np.random.default_rng(0)
    pick = [full.ids[i] for i in rng.permutation(15625)[:300]]
    sub = load_nb201(["zc_nwot", "acc", "gold_6240"], nb201_dir, ids=pick)
    assert sub.ids == pick and sub.names == ["zc_nwot", "acc", "gold_6240"]
    rows = [full.ids.index(i) for i in pick]
    np.testing.assert_array_equal(sub.column("acc"), full.column("acc")[rows])
    np.testing.assert_array_equal(sub.column("gold_6240"), full.column("gold_6240")[rows])
    np.testing.assert_array_equal(sub.column("zc_nwot"), full.column("zc_nwot")[rows])
    with pytest.raises(ValueError, match="canonical NB201 arch strings"):
        load_nb201(["acc"], nb201_dir, ids=[pick[0], "|conv~0|+|"])


def test_without_data_dir_acc_comes_from_analog_nasbench(no_env: None) -> None:
    table = load_nb201(["acc", "analog_baseline_acc"])
    assert table.ids == sorted(ALL_ARCHS) and table.data_dir is None
    assert "analog-nasbench" in table.objective("acc").source
    np.testing.assert_array_equal(table.column("acc"), table.column("analog_baseline_acc"))
    with pytest.raises(DataFileNotFoundError, match="nb201/latency_ms.csv.*no data directory"):
        load_nb201(["acc", "pixel3"])


def test_env_var_supplies_the_data_dir(nb201_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NASRLM_DATA", str(nb201_dir))
    table = load_nb201(["acc"])
    assert "cifar10_200ep.csv" in table.objective("acc").source
    assert table.column("acc").max() == pytest.approx(94.3733)


def test_missing_file_in_data_dir(tmp_path: Path) -> None:
    (tmp_path / "nb201").mkdir()
    with pytest.raises(DataFileNotFoundError, match="nb201/archs.csv"):
        load_nb201(["acc"], tmp_path)
    with pytest.raises(DataFileNotFoundError, match="nb201/cifar10_200ep.csv"):
        load_nb201(["acc"], tmp_path, ids=sorted(ALL_ARCHS)[:3])


def test_unknown_objective() -> None:
    with pytest.raises(UnknownObjectiveError) as info:
        load_nb201(["acx"])
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, KeyError)
    msg = str(err)
    assert "'acx'" in msg and "did you mean 'acc'" in msg and "pixel3" in msg and "zc_synflow" in msg


def test_extra_objectives_are_merged(nb201_dir: Path) -> None:
    ids = sorted(ALL_ARCHS)[:5]
    cpu = Objective("cpu-1t-b1", "ms", "ONNX Runtime, 1 thread, batch 1", "measured", False)
    extra = {"cpu-1t-b1": (cpu, {ids[0]: 1.5, ids[2]: 2.5, "not-in-table": 9.0})}
    table = load_nb201(["acc", "cpu-1t-b1"], nb201_dir, ids=ids, extra=extra)
    assert table.objective("cpu-1t-b1") == cpu
    col = table.column("cpu-1t-b1")
    assert col[0] == 1.5 and col[2] == 2.5 and np.isnan(col[[1, 3, 4]]).all()
    with pytest.raises(UnknownObjectiveError, match="cpu-1t-b1"):  # listed among the valid names
        load_nb201(["cpu-2t-b1"], nb201_dir, ids=ids, extra=extra)
    with pytest.raises(ValueError, match="shadows"):
        load_nb201(["acc"], nb201_dir, extra={"acc": (cpu, {})})
    with pytest.raises(ValueError, match="twice"):
        load_nb201(["acc", "acc"], nb201_dir)


def test_mis_keyed_latency_file_is_rejected(nb201_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "nb201"
    d.mkdir()
    shutil.copy(nb201_dir / "nb201" / "archs.csv", d)
    lines = (nb201_dir / "nb201" / "latency_ms.csv").read_text().splitlines(keepends=True)
    a, b = lines[1].split(",", 2), lines[2].split(",", 2)  # swap the arch strings of index 0 and 1
    lines[1], lines[2] = ",".join([a[0], b[1], a[2]]), ",".join([b[0], a[1], b[2]])
    (d / "latency_ms.csv").write_text("".join(lines))
    with pytest.raises(ValueError, match="disagree with nb201/archs.csv"):
        load_nb201(["pixel3"], tmp_path)


def test_invalid_arch_string_in_file_is_rejected(tmp_path: Path) -> None:
    d = tmp_path / "nb201"
    d.mkdir()
    good = sorted(ALL_ARCHS)
    rows = ["arch_str,cifar10_valid_acc,cifar10_test_acc,params_m\n"]
    rows += [f"{a},1,2,3\n" for a in good[:-1]] + ["|conv_7x7~0|+|x|,1,2,3\n"]
    (d / "cifar10_200ep.csv").write_text("".join(rows))
    with pytest.raises(ValueError, match="invalid NB201 arch string"):
        load_nb201(["acc"], tmp_path, ids=good[:2])


# --- table format -------------------------------------------------------------------------------------
def _table() -> BenchmarkTable:
    objs = [Objective("acc", "%", "CIFAR-10 test accuracy", "test", True),
            Objective("pixel3", "ms", "Pixel 3, batch 1", "test", False),
            Objective("zc_nwot", "", "proxy", "test", True)]
    values = np.array([[93.66, 0.1 + 0.2, -math.inf], [math.nan, 1e-300, 1.0 / 3.0]])
    return BenchmarkTable("nb201", ["|a|", "|b|"], objs, values, data_dir="/somewhere")


def test_csv_round_trip_with_sidecar(tmp_path: Path) -> None:
    t = _table()
    path = t.to_csv(tmp_path / "t.csv")
    text = path.read_text().splitlines()
    assert text[0] == "arch_id,acc[%],pixel3[ms],zc_nwot"
    assert text[2].startswith("|b|,,")  # missing -> empty field
    assert "0.30000000000000004" in text[1]  # repr-exact
    meta = json.loads((tmp_path / "t.csv.meta.json").read_text())
    assert meta["space"] == "nb201" and meta["data_dir"] == "/somewhere"
    assert meta["objectives"][1]["description"] == "Pixel 3, batch 1"
    back = BenchmarkTable.read_csv(path)
    assert back.space == t.space and back.ids == t.ids and back.objectives == t.objectives
    assert back.data_dir == "/somewhere"
    np.testing.assert_array_equal(back.values, t.values)  # bit-exact, NaN and -inf included


def test_csv_round_trip_without_sidecar(tmp_path: Path) -> None:
    path = _table().to_csv(tmp_path / "t.csv")
    (tmp_path / "t.csv.meta.json").unlink()
    back = BenchmarkTable.read_csv(path, space="nb201")
    assert [(o.name, o.unit) for o in back.objectives] == [("acc", "%"), ("pixel3", "ms"), ("zc_nwot", "")]
    assert all(o.source == "unknown" and o.description == "unknown" for o in back.objectives)
    assert [o.higher_is_better for o in back.objectives] == [True, False, True]  # guessed from the unit
    np.testing.assert_array_equal(back.values, _table().values)
    assert BenchmarkTable.read_csv(path).space == "unknown"


def test_real_table_round_trip(nb201_dir: Path, tmp_path: Path) -> None:
    t = load_nb201(["acc", "raspi4", "zc_nwot", "zc_synflow"], nb201_dir)
    back = BenchmarkTable.read_csv(t.to_csv(tmp_path / "nb201.csv"))
    assert back.ids == t.ids and back.objectives == t.objectives
    np.testing.assert_array_equal(back.values, t.values)


def test_table_validation() -> None:
    obj = Objective("acc", "%", "d", "s", True)
    with pytest.raises(ValueError, match="shape"):
        BenchmarkTable("nb201", ["a", "b"], [obj], np.zeros((3, 1)))
    with pytest.raises(ValueError, match="is in rows 1 and 2"):
        BenchmarkTable("nb201", ["a", "a"], [obj], np.zeros((2, 1)))
    with pytest.raises(ValueError, match="duplicate objective"):
        BenchmarkTable("nb201", ["a"], [obj, obj], np.zeros((1, 2)))
    with pytest.raises(ValueError, match="CSV header"):
        Objective("acc[%]", "%", "d", "s", True)
    with pytest.raises(KeyError, match="no objective 'pixel3'"):
        BenchmarkTable("nb201", ["a"], [obj], np.zeros((1, 1))).column("pixel3")


def test_a_csv_with_a_byte_order_mark_reads_like_one_without(tmp_path: Path) -> None:
    path = _table().to_csv(tmp_path / "t.csv")
    (tmp_path / "t.csv.meta.json").unlink()
    path.write_bytes("\ufeff".encode() + path.read_bytes())  # as spreadsheets save "CSV UTF-8"
    back = BenchmarkTable.read_csv(path, space="nb201")
    assert back.names == ["acc", "pixel3", "zc_nwot"]
    np.testing.assert_array_equal(back.values, _table().values)


def test_a_duplicate_id_is_named_with_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("arch_id,acc[%]\na,1\nb,2\na,3\n")
    with pytest.raises(DataFileError, match=r"arch id 'a' is on lines 2 and 4"):
        BenchmarkTable.read_csv(path, space="nb201")
