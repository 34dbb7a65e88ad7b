"""NDS json loader, on fixture files written here in the published format, and on the six published
ImageNet files where the data directory has them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nasrlm.data import DataFileNotFoundError, Objective, UnknownObjectiveError
from nasrlm.data._nds import (
    NDS_FILES,
    NDS_IMAGENET_OBJECTIVES,
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
                                             ("Vanilla_rng3", "nds_vanilla"), ("DARTS_in", "nds_darts_in"),
                                             ("DARTS_fix-w-d_in", "nds_darts_in"), ("PNAS_in", "nds_pnas_in"),
                                             ("ResNeXt-A_in", "nds_resnext-a_in")])
def test_file_names_name_the_space(stem: str, space: str) -> None:
    assert nds_space_of(f"/x/{stem}.json") == space


@pytest.mark.parametrize(("stem", "names"), [
    ("Vanilla_lr-wd_in", "variant 'lr-wd'.*lr-wd sweeps vary the training"),
    ("DARTS_lr-wd", "variant 'lr-wd'.*lr-wd sweeps vary the training"),
    ("DARTS_in_rng1", "variant 'in_rng1'"),
    ("ResNet-B", "no nasrlm space"), ("ResNet-B_in", "no nasrlm space for NDS file 'ResNet-B_in'")])
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


def test_imagenet_files_read_into_the_imagenet_spaces(nds_dir: Path) -> None:
    """An ``_in`` file: its records become ids of the ``_in`` space, stem entry removed (AnyNet), with the
    columns of a CIFAR file, described as ImageNet's."""
    net = {"block_type": "res_bottleneck_block", "ds": [1, 2, 2, 2], "ws": [64, 16, 128, 128],
           "ss": [8, 1, 2, 2], "bot_muls": [1.0, 0.25, 0.5, 0.25], "num_gs": [1, 2, 4, 2]}
    path = nds_dir / "nds_data" / "ResNeXt-A_in.json"
    path.write_text(json.dumps([_record(net, [60.0, 50.0, 55.0]), _record(net, [70.0, 45.0], seed=2)]))
    table = load_nds_json(path)
    assert table.space == "nds_resnext-a_in" and table.ids == ["d=2,2,2;w=16,128,128;b=4,2,4;g=2,4,2"]
    assert table.column("acc").tolist() == [50.0]  # the mean of 100 - 55 and 100 - 45 (last epochs)
    assert table.column("best_acc").tolist() == [52.5]  # the mean of 100 - 50 and 100 - 45
    assert [o.description for o in table.objectives][:2] == [
        "ImageNet top-1 test accuracy after the last epoch, NDS training",
        "ImageNet top-1 test accuracy of the best epoch, NDS training"]
    assert list(NDS_IMAGENET_OBJECTIVES) == list(NDS_OBJECTIVES)
    assert load_table("nds_resnext-a_in", ["acc", "n_runs"], nds_dir).column("n_runs").tolist() == [2.0]
    assert available_objectives("nds_darts_in", nds_dir) == []  # DARTS.json holds CIFAR-10 networks
    with pytest.raises(ValueError, match=r"record 0: .*ws \[32, 16, 128, 128\]; its first entry"):
        path.write_text(json.dumps([_record(dict(net, ws=[32, 16, 128, 128]), [60.0])]))
        load_nds_json(path)


@pytest.mark.parametrize(("stem", "space", "rows"), [
    ("DARTS_in", "nds_darts_in", 121), ("DARTS_fix-w-d_in", "nds_darts_in", 499),
    ("ENAS_in", "nds_enas_in", 117),
    ("NASNet_in", "nds_nasnet_in", 122), ("ResNeXt-A_in", "nds_resnext-a_in", 130),
    ("ResNeXt-B_in", "nds_resnext-b_in", 164)])
def test_published_imagenet_files(data_dir: Path, stem: str, space: str, rows: int) -> None:
    path = data_dir / "nds_data" / f"{stem}.json"
    if not path.is_file():
        pytest.skip(f"NDS ImageNet file not found: {path}")
    records = read_nds_records(path)
    table = load_nds_json(path, objectives=["acc", "best_acc", "params_m", "n_runs"])
    assert table.space == space and len(table.ids) == rows == len(records)  # one record per architecture
    first = records[0]
    assert table.values[0].tolist() == [100 - first["test_ep_top1"][-1], 100 - first["min_test_top1"],
                                        first["params"] / 1e6, 1.0]
    if "fix-w-d" not in stem:  # what nasrlm data reads for the space
        assert load_table(space, ["acc"], data_dir).ids == table.ids
