"""NB301 table (NASLib's 725 DARTS genotypes) keyed by nb301 ids, and our network against its counts."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import shape_inference

from exporters import count_macs, count_parameters, materialize
from nasrlm.data import DataFileNotFoundError, Objective, UnknownObjectiveError
from nasrlm.data._nb301 import NB301_OBJECTIVES, ZERO_COST_JSON, available_nb301_objectives, load_nb301
from nasrlm.data._tables import TABLE_LOADERS, load_table
from search_spaces.nds import NB301

#: NASLib's compact op order (naslib/search_spaces/nasbench301/conversions.py).
COMPACT_OPS = ("max_pool_3x3", "avg_pool_3x3", "skip_connect", "sep_conv_3x3", "sep_conv_5x5", "dil_conv_3x3",
               "dil_conv_5x5")
#: Per-architecture-constant part of NASLib's FLOP count that the identity below leaves over.
FLOPS_CONSTANT = 565_760


@pytest.fixture(scope="module")
def raw(data_dir: Path) -> dict[str, dict]:
    path = data_dir / ZERO_COST_JSON
    if not path.is_file():
        pytest.skip(f"benchmark data not found: {path}")
    with open(path) as f:
        return json.load(f)["cifar10"]


@pytest.fixture(scope="module")
def sample(raw: dict[str, dict]) -> list[dict]:
    rows = list(raw.values())
    return [rows[k] for k in np.random.default_rng(0).choice(len(rows), size=100, replace=False)]


def _affine_bn_channels(compact: list[list[tuple[int, int]]]) -> int:
    """Channels of the BatchNorms inside cell operations of the C=32, 8-cell network (an independent
    count from the genotype): sep conv 2 BNs, dil conv 1, stride-2 skip (FactorizedReduce) 1, pools 0."""
    total = 0
    for cell_index in range(8):
        reduction = cell_index in (2, 5)
        c = 32 * 2 ** ((cell_index >= 2) + (cell_index >= 5))
        for inp, op in compact[reduction]:
            name = COMPACT_OPS[op]
            bns = 2 if name.startswith("sep") else 1 if name.startswith("dil") else 0
            if name == "skip_connect" and reduction and inp < 2:
                bns = 1
            total += bns * c
    return total


def test_registered_as_a_table_loader() -> None:
    assert TABLE_LOADERS["nb301"] == (load_nb301, available_nb301_objectives)


def test_all_725_rows_load_with_valid_distinct_ids(data_dir: Path, raw: dict[str, dict]) -> None:
    table = load_nb301(["acc", "params_m", "flops_m"], data_dir)
    assert table.space == "nb301" and len(table.ids) == 725 == len(set(table.ids))
    space = NB301()
    assert all(space.arch_id(space.parse(i)) == i for i in table.ids)
    assert table.column("acc").min() > 91 and table.column("acc").max() < 95
    # keyed right: each record's own numbers, found through an id computed here from its key
    for key, record in list(raw.items())[:50]:
        row = table.ids.index(space.arch_id(space.from_compact(ast.literal_eval(key))))
        assert table.values[row].tolist() == [record["val_accuracy"], record["params"]["score"],
                                              record["flops"]["score"]]
    # rows follow NASLib's idx
    first = next(r for r in raw.values() if r["idx"] == "0")
    assert table.ids[0] == space.arch_id(space.from_compact(first["arch"]))


def test_params_are_ours_without_affine_cell_op_batchnorms(sample: list[dict]) -> None:
    """100 random rows (all 725 agree, checked once offline): our DARTS network has affine BatchNorm in
    every cell operation, NASLib's has none, and neither counts an auxiliary head."""
    space = NB301()
    for record in sample:
        model = materialize(space.build_onnx(space.from_compact(record["arch"])), weights=False)
        compact = ast.literal_eval(record["arch"])
        expected = round(record["params"]["score"] * 1e6)
        assert count_parameters(model) - 2 * _affine_bn_channels(compact) == expected, record["arch"]


def test_flops_are_macs_plus_elementwise_work(sample: list[dict]) -> None:
    """NASLib's FLOPs = MACs + 1 per BatchNorm and ReLU output element + (k²+1) per k×k pooling output
    element + a constant. Pins the resolution of every op, i.e. which ops have stride 2."""
    space = NB301()
    for record in sample[:15]:
        model = materialize(space.build_onnx(space.from_compact(record["arch"])), weights=False)
        flops = round(record["flops"]["score"] * 1e6)
        assert count_macs(model) + _elementwise(model) + FLOPS_CONSTANT == flops, record["arch"]


def _elementwise(model: onnx.ModelProto) -> int:
    graph = shape_inference.infer_shapes(model, strict_mode=True).graph
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in graph.value_info}
    total = 0
    for node in graph.node:
        size = math.prod(shapes.get(node.output[0], [0]))
        if node.op_type in ("BatchNormalization", "Relu"):
            total += size
        elif node.op_type in ("MaxPool", "AveragePool"):
            k = next(a.ints for a in node.attribute if a.name == "kernel_shape")
            total += size * (k[0] * k[1] + 1)
    return total


def test_ids_and_extra_columns(data_dir: Path) -> None:
    ids = load_nb301(["acc"], data_dir).ids[:3]
    other = NB301().arch_id(NB301().sample(np.random.default_rng(5)))
    measured = Objective("cpu", "ms", "measured here", "test", False)
    table = load_nb301(["acc", "cpu"], data_dir, ids=[*ids, other], extra={"cpu": (measured, {other: 2.0})})
    assert np.isnan(table.column("acc")[3]) and not np.isnan(table.column("acc")[:3]).any()
    assert table.column("cpu")[3] == 2.0 and np.isnan(table.column("cpu")[:3]).all()
    assert load_table("nb301", ["acc"], data_dir, ids=ids).column("acc").tolist() == \
        table.column("acc")[:3].tolist()


def test_errors_name_the_problem(data_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(UnknownObjectiveError, match="did you mean 'acc'"):
        load_nb301(["accc"], data_dir)
    with pytest.raises(ValueError, match="non-canonical|malformed NB301 id"):
        load_nb301(["acc"], data_dir, ids=["normal=oops"])
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    with pytest.raises(DataFileNotFoundError, match="nb301/zero_cost_725.json"):
        load_nb301(["acc"])
    assert available_nb301_objectives(tmp_path) == []
    assert available_nb301_objectives(data_dir) == list(NB301_OBJECTIVES.values())


def test_a_mis_keyed_file_fails_loudly(tmp_path: Path, raw: dict[str, dict]) -> None:
    key, record = next(iter(raw.items()))
    (tmp_path / "nb301").mkdir()
    bad = {"cifar10": {key: dict(record, arch="[[(0, 0)]]")}}
    (tmp_path / ZERO_COST_JSON).write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="different arch field"):
        load_nb301(["acc"], tmp_path)
