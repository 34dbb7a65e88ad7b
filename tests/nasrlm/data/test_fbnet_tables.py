"""FBNet loader: the two files agree on their keys, and the keys are our architectures.

(Named ``test_fbnet_tables.py``: ``tests/search_spaces/test_fbnet.py`` holds the basename ``test_fbnet``.)
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from exporters import count_parameters, materialize
from nasrlm.data import (
    DataFileNotFoundError,
    Objective,
    UnknownObjectiveError,
    available_objectives,
    load_table,
)
from nasrlm.data import _fbnet as fbnet
from search_spaces import FBNet, FBNetArch

SPACE = FBNet()
GPUS = ("1080ti", "2080ti", "titan_rtx", "titanx", "titanxp")
DEVICES = [f"{g}_{b}" for g in GPUS for b in (1, 32, 64)] + [
    "gold_6226", "gold_6240", "silver_4114", "silver_4210r", "pixel2", "pixel3", "essential_ph_1",
    "samsung_a50", "samsung_s7", "raspi4", "eyeriss", "fpga"]
ZERO_COST = ["params_m", "zc_flops_m"] + [f"zc_{p}" for p in (
    "synflow", "zen", "epe_nas", "fisher", "grad_norm", "grasp", "jacov", "l2_norm", "nwot", "plain", "snip")]


@pytest.fixture(scope="module")
def fbnet_dir(data_dir: Path) -> Path:
    if not (data_dir / fbnet.LATENCY_CSV).is_file():
        pytest.skip(f"benchmark data not found: {data_dir / 'fbnet'}")
    return data_dir


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_two_files_agree_on_their_arch_keys(fbnet_dir: Path) -> None:
    latency = _rows(fbnet_dir / fbnet.LATENCY_CSV)
    zero_cost = _rows(fbnet_dir / fbnet.ZERO_COST_CSV)
    assert len(latency) == len(zero_cost) == 5000
    lat_keys = [r["op_idx_list"] for r in latency]
    zc_keys = [r["op_idx_list"] for r in zero_cost]
    assert len(set(lat_keys)) == 5000 and set(lat_keys) == set(zc_keys)  # same archs, other order
    # the latency file's second key (block names) spells its first (op ids in HW-NAS-Bench order)
    assert all(FBNetArch.from_op_indices(r["op_idx_list"]).blocks == tuple(r["op_names"].split())
               for r in latency)
    # a value check across the files: on the joined rows latency follows the FLOPs of the other file
    # (Spearman 0.95-0.98 for these devices); a scrambled join gives about 0
    table = load_table("fbnet", ["pixel3", "eyeriss", "fpga", "zc_flops_m"], fbnet_dir)
    flops = table.column("zc_flops_m")
    for device in ("pixel3", "eyeriss", "fpga"):
        assert spearmanr(table.column(device), flops).statistic > 0.9, device
    shuffled = np.random.default_rng(0).permutation(flops)
    assert abs(spearmanr(table.column("fpga"), shuffled).statistic) < 0.1


def test_objectives_cover_every_column(fbnet_dir: Path, tmp_path: Path) -> None:
    objectives = available_objectives("fbnet", fbnet_dir)
    assert [o.name for o in objectives] == [*DEVICES, *ZERO_COST]
    for o in objectives:
        if o.name in DEVICES:
            assert o.unit == "ms" and "batch" in o.description and not o.higher_is_better
    assert available_objectives("fbnet", tmp_path) == []
    (tmp_path / "fbnet").mkdir()
    (tmp_path / fbnet.ZERO_COST_CSV).write_text("op_idx_list\n")
    assert [o.name for o in available_objectives("fbnet", tmp_path)] == ZERO_COST


def test_params_match_our_networks(fbnet_dir: Path) -> None:
    """The key mapping: the network we build for a row's id has the row's parameter count."""
    table = load_table("fbnet", ["params_m", "pixel3"], fbnet_dir)
    assert len(table.ids) == 5000 and not np.isnan(table.values).any()
    rng = np.random.default_rng(0)
    for k in rng.choice(len(table.ids), size=20, replace=False):
        model = materialize(SPACE.build_onnx(SPACE.parse(table.ids[k])), weights=False)
        assert round(table.column("params_m")[k] * 1e6) == count_parameters(model), table.ids[k]


def test_rows_follow_the_latency_file(fbnet_dir: Path) -> None:
    latency = _rows(fbnet_dir / fbnet.LATENCY_CSV)
    table = load_table("fbnet", ["raspi4"], fbnet_dir)
    assert table.ids[:3] == ["-".join(r["op_names"].split()) for r in latency[:3]]
    assert table.column("raspi4")[:3].tolist() == [float(r["raspi4"]) for r in latency[:3]]


def test_given_ids_and_extra_columns(fbnet_dir: Path) -> None:
    known = load_table("fbnet", ["pixel3"], fbnet_dir).ids[:2]
    other = SPACE.arch_id(SPACE.sample(np.random.default_rng(5)))
    cpu = Objective("cpu-1t-b1", "ms", "ONNX Runtime, 1 thread, batch 1", "measured", False)
    extra = {"cpu-1t-b1": (cpu, {other: 3.0, known[0]: 1.0})}
    table = load_table("fbnet", ["pixel3", "cpu-1t-b1"], fbnet_dir, ids=[*known, other], extra=extra)
    assert table.ids == [*known, other]
    assert not np.isnan(table.column("pixel3")[:2]).any() and np.isnan(table.column("pixel3")[2])
    assert table.column("cpu-1t-b1")[0] == 1.0 and np.isnan(table.column("cpu-1t-b1")[1])
    full = load_table("fbnet", ["pixel3", "cpu-1t-b1"], fbnet_dir, extra=extra)
    assert len(full.ids) == 5001 and full.ids[-1] == other  # measured-only archs join at the end
    with pytest.raises(ValueError, match="malformed FBNet id"):
        load_table("fbnet", ["pixel3"], fbnet_dir, ids=["k3_e1-skip"])


def test_unknown_objective_and_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    with pytest.raises(UnknownObjectiveError, match="did you mean 'pixel3'"):
        load_table("fbnet", ["pixle3"])
    with pytest.raises(DataFileNotFoundError, match="fbnet/zero_cost.csv"):
        load_table("fbnet", ["zc_synflow"], tmp_path)
    with pytest.raises(DataFileNotFoundError, match="no data directory"):
        load_table("fbnet", ["pixel3"])


def test_mis_keyed_file_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "fbnet").mkdir()
    header = "row,op_idx_list,op_names," + ",".join(DEVICES)
    ops = " ".join(["0"] * 22)
    names = " ".join(["k3_e1"] * 21 + ["skip"])  # says the last layer is op 8
    (tmp_path / fbnet.LATENCY_CSV).write_text(f"{header}\n0,{ops},{names}," + ",".join(["1"] * 27) + "\n")
    with pytest.raises(ValueError, match="op_names .* disagree with op_idx_list"):
        load_table("fbnet", ["pixel3"], tmp_path)
    (tmp_path / fbnet.LATENCY_CSV).write_text(f"{header}\n0,{ops} 9,{names}," + ",".join(["1"] * 27) + "\n")
    with pytest.raises(ValueError, match="line 2: an FBNet op_idx_list has 22 ids"):
        load_table("fbnet", ["pixel3"], tmp_path)
