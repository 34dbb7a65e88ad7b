"""NDS json loader, on fixture files written here in the published format (the real files are not here)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nasrlm.data import DataFileNotFoundError, Objective, UnknownObjectiveError
from nasrlm.data._nds import (
    NDS_FILES,
    NDS_OBJECTIVES,
    load_nds,
    load_nds_json,
    nds_space_of,
    read_nds_records,
)
from nasrlm.data._tables import TABLE_LOADERS, available_objectives, load_table
from search_spaces import get_space

DARTS_V2 = {
    "normal": [["sep_conv_3x3", 0], ["sep_conv_3x3", 1], ["sep_conv_3x3", 0], ["sep_conv_3x3", 1],
               ["sep_conv_3x3", 1], ["skip_connect", 0], ["skip_connect", 0], ["dil_conv_3x3", 2]],
    "normal_concat": [2, 3, 4, 5],
    "reduce": [["max_pool_3x3", 0], ["max_pool_3x3", 1], ["skip_connect", 2], ["max_pool_3x3", 1],
               ["max_pool_3x3", 0], ["skip_connect", 2], ["skip_connect", 2], ["max_pool_3x3", 1]],
    "reduce_concat": [2, 3, 4, 5],
}
OTHER = dict(DARTS_V2, normal=[["none", 0], ["sep_conv_5x5", 1]] + DARTS_V2["normal"][2:])


def _record(net: dict, test_err: list[float], seed: int = 1, params: int = 1_234_567) -> dict:
    """One run in the published record layout (errors in %, raw parameter and FLOP counts)."""
    return {
        "job_id": 1000 + seed, "rng_seed": seed, "net": net,
        "optim": {"base_lr": 0.1, "wd": 5e-4, "max_ep": len(test_err), "lr_policy": "cos", "momentum": 0.9},
        "params": params, "flops": 98_765_432, "act_mem": 1.0, "exp_mem": 2.0, "iter_time": 0.05,
        "prec_time": {"train_fw_bw": 0.03, "test_fw": 0.01},
        "train_ep_top1": [e - 5 for e in test_err], "train_ep_loss": [1.0] * len(test_err),
        "test_ep_top1": test_err, "min_test_top1": min(test_err),
    }


def _cell_net(genotype: dict, width: int = 16, depth: int = 8) -> dict:
    return {"genotype": genotype, "width": width, "depth": depth, "aux": True, "drop_prob": 0.2}


@pytest.fixture
def nds_dir(tmp_path: Path) -> Path:
    root = tmp_path / "nds_data"
    root.mkdir()
    darts = [_record(_cell_net(DARTS_V2), [30.0, 10.0, 8.0], seed=1),
             _record(_cell_net(OTHER, 24, 12), [40.0, 12.0], seed=1, params=2_000_000),
             _record(_cell_net(DARTS_V2), [31.0, 9.0, 6.0], seed=2)]  # a rerun of the first
    (root / "DARTS.json").write_text(json.dumps(darts))
    resnext = {"top": [_record({"block_type": "res_bottleneck_block", "ds": [1, 2, 4], "ws": [64, 128, 256],
                                "ss": [1, 2, 2], "bot_muls": [1.0, 0.5, 0.25], "num_gs": [1, 2, 4]}, [7.0])],
               "mid": [_record({"block_type": "res_bottleneck_block", "ds": [2, 2, 2], "ws": [64, 64, 64],
                                "ss": [1, 2, 2], "bot_muls": [0.5, 0.5, 0.5], "num_gs": [4, 4, 4]}, [9.5])]}
    (root / "ResNeXt-A.json").write_text(json.dumps(resnext))
    vanilla = [_record({"block_type": "double_plain_block", "ds": [1, 3, 2], "ws": [16, 24, 32],
                        "ss": [1, 2, 2], "bot_muls": [], "num_gs": []}, [20.0, 15.0])]
    (root / "Vanilla_rng1.json").write_text(json.dumps(vanilla))
    return tmp_path


def test_darts_file_reruns_are_averaged(nds_dir: Path) -> None:
    table = load_nds_json(nds_dir / "nds_data" / "DARTS.json")
    assert table.space == "nds_darts" and len(table.ids) == 2
    space = get_space("nds_darts")
    assert table.ids[0].startswith("width=16;depth=8;normal=sep_conv_3x3~0+sep_conv_3x3~1|")
    assert table.ids[1].startswith("width=24;depth=12;normal=none~0+sep_conv_5x5~1|")
    assert all(space.arch_id(space.parse(i)) == i for i in table.ids)
    assert table.column("acc").tolist() == [93.0, 88.0]  # mean of 92 and 94; 100 - 12
    assert table.column("best_acc").tolist() == [93.0, 88.0]
    assert table.column("train_acc").tolist() == [98.0, 93.0]
    assert table.column("n_runs").tolist() == [2.0, 1.0]
    assert table.column("params_m").tolist() == [1.234567, 2.0]
    assert table.column("flops_m")[0] == pytest.approx(98.765432)
    assert table.names == list(NDS_OBJECTIVES)


def test_top_mid_files_and_anynet_spaces(nds_dir: Path) -> None:
    table = load_nds_json(nds_dir / "nds_data" / "ResNeXt-A.json", objectives=["acc"])
    assert table.ids == ["d=1,2,4;w=64,128,256;b=1,2,4;g=1,2,4", "d=2,2,2;w=64,64,64;b=2,2,2;g=4,4,4"]
    assert table.column("acc").tolist() == [93.0, 90.5]
    vanilla = load_nds_json(nds_dir / "nds_data" / "Vanilla_rng1.json", objectives=["acc", "n_runs"])
    assert vanilla.space == "nds_vanilla" and vanilla.ids == ["d=1,3,2;w=16,24,32"]
    assert len(read_nds_records(nds_dir / "nds_data" / "ResNeXt-A.json")) == 2


@pytest.mark.parametrize(("stem", "space"), [("DARTS", "nds_darts"), ("ENAS_fix-w-d", "nds_enas"),
                                             ("ResNet_reruns", "nds_resnet"), ("ResNeXt-B", "nds_resnext-b"),
                                             ("Vanilla_rng3", "nds_vanilla")])
def test_file_names_name_the_space(stem: str, space: str) -> None:
    assert nds_space_of(f"/x/{stem}.json") == space


@pytest.mark.parametrize(("stem", "names"), [
    ("DARTS_in", "ImageNet"), ("Vanilla_lr-wd_in", "ImageNet"), ("Vanilla_lr-wd", "variant 'lr-wd'"),
    ("ResNet-B", "no nasrlm space")])
def test_unsupported_files_are_refused(stem: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        nds_space_of(f"{stem}.json")


def test_bad_records_name_the_record(tmp_path: Path) -> None:
    path = tmp_path / "DARTS.json"
    wrong_concat = _record(_cell_net(dict(DARTS_V2, normal_concat=[5])), [9.0])
    path.write_text(json.dumps([_record(_cell_net(DARTS_V2), [9.0]), wrong_concat]))
    with pytest.raises(ValueError, match=r"record 1: .*normal_concat \[5\]"):
        load_nds_json(path)
    path.write_text(json.dumps([dict(_record(_cell_net(DARTS_V2), [9.0]), test_ep_top1=[])]))
    with pytest.raises(ValueError, match="record 0 has no test_ep_top1"):
        load_nds_json(path)
    path.write_text(json.dumps({"records": []}))
    with pytest.raises(ValueError, match="not an NDS file"):
        load_nds_json(path)
    resnet = tmp_path / "ResNet.json"
    resnet.write_text(json.dumps([_record({"block_type": "res_basic_block", "ds": [1, 1, 1], "ws": [16] * 3,
                                           "ss": [2, 2, 2]}, [9.0])]))
    with pytest.raises(ValueError, match=r"record 0: .*ss \[2, 2, 2\]"):
        load_nds_json(resnet)


def test_registered_table_loaders(nds_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(NDS_FILES) <= set(TABLE_LOADERS)
    assert [o.name for o in available_objectives("nds_darts", nds_dir)] == list(NDS_OBJECTIVES)
    assert available_objectives("nds_pnas", nds_dir) == []
    table = load_table("nds_darts", ["acc", "n_runs"], nds_dir)
    assert table.column("n_runs").tolist() == [2.0, 1.0]
    other = get_space("nds_darts").sample_ids(1, seed=9)[0]
    cpu = Objective("cpu", "ms", "measured", "test", False)
    picked = load_table("nds_darts", ["acc", "cpu"], nds_dir, ids=[other, table.ids[0]],
                        extra={"cpu": (cpu, {other: 1.5})})
    assert np.isnan(picked.column("acc")[0]) and picked.column("acc")[1] == 93.0
    assert picked.column("cpu")[0] == 1.5
    with pytest.raises(UnknownObjectiveError, match="did you mean 'acc'"):
        load_nds(["accc"], nds_dir, space="nds_darts")
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    with pytest.raises(DataFileNotFoundError, match="nds_data/PNAS.json"):
        load_table("nds_pnas", ["acc"], nds_dir)
