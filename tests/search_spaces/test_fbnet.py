"""FBNet (HW-NAS-Bench, CIFAR-100): conformance, ids, and fidelity to the published tables."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import shape_inference

from exporters import ModelBuilder, count_macs, count_parameters, materialize
from search_spaces import FBNet, FBNetArch, get_space
from search_spaces.fbnet import BLOCKS, LAYERS, NUM_LAYERS, _shuffle
from search_spaces.testing import SearchSpaceTests

#: Row 0 of fbnet/zero_cost.csv, copied by hand so that one check runs without the data directory.
ROW0 = "2 8 6 3 8 4 8 4 1 8 7 8 0 6 2 5 2 6 0 2 7 7"
ROW0_PARAMS = 2_447_972
#: Every layer ``skip``: stem, the six shape-changing 1×1 skip convs and the head (the fitted intercept).
ALL_SKIP_PARAMS = 780_660


class TestFBNet(SearchSpaceTests):
    space = FBNet()


@pytest.fixture(scope="module")
def space() -> FBNet:
    return FBNet()


@pytest.fixture(scope="module")
def zero_cost_subset(data_dir: Path) -> list[dict[str, str]]:
    """300 random rows of the 5,000 (every row agrees too; materialising them all takes minutes)."""
    with open(data_dir / "fbnet" / "zero_cost.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5000
    picked = np.random.default_rng(0).choice(len(rows), size=300, replace=False)
    return [rows[k] for k in picked]


def test_registered_under_its_name() -> None:
    assert isinstance(get_space("fbnet"), FBNet)


def test_size_and_layers(space: FBNet) -> None:
    assert space.size == 9**22
    assert len(LAYERS) == NUM_LAYERS == 22
    assert LAYERS[0] == (16, 16, 1) and LAYERS[1] == (16, 24, 1) and LAYERS[-1] == (184, 352, 1)


def test_numeric_form_round_trips(space: FBNet) -> None:
    arch = FBNetArch.from_op_indices(ROW0)
    assert " ".join(map(str, arch.op_indices)) == ROW0
    assert FBNetArch.from_op_indices(list(arch.op_indices)) == arch
    assert space.arch_id(arch).startswith("k3_e3-skip-k5_e3-k3_e6-skip-k5_e1-")
    assert space.parse(space.arch_id(arch)) == arch


def test_op_ids_follow_the_benchmark_names(data_dir: Path) -> None:
    """latency_ms.csv spells out each op_idx_list in names: our index order must give the same."""
    with open(data_dir / "fbnet" / "latency_ms.csv", newline="") as f:
        for row in csv.DictReader(f):
            assert FBNetArch.from_op_indices(row["op_idx_list"]).blocks == tuple(row["op_names"].split())


@pytest.mark.parametrize(
    ("bad", "names"),
    [
        ("-".join(["k3_e1"] * 21), "found 21 parts"),
        ("-".join(["k3_e1"] * 23), "found 23 parts"),
        ("-".join(["k3_e1"] * 5 + ["k7_e6"] + ["skip"] * 16), "'k7_e6' in layer 5"),
        ("-".join(["k3_e1"] * 21 + ["K3_E1"]), "'K3_E1' in layer 21"),
        ("-".join(["k3_e1"] * 10 + [""] + ["skip"] * 11), "'' in layer 10"),
        ("-".join(["k3_e1"] * 22) + " ", "'k3_e1 ' in layer 21"),
    ],
)
def test_malformed_ids_name_the_bad_part(space: FBNet, bad: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        space.parse(bad)


@pytest.mark.parametrize(
    ("bad", "names"),
    [("0 " * 21, "22 ids, got 21"), ("0 " * 21 + "9", "op id 9 in layer 21"), ("0 " * 21 + "x", "'x'")],
)
def test_malformed_op_indices_name_the_bad_part(bad: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        FBNetArch.from_op_indices(bad)


def test_known_parameter_counts(space: FBNet) -> None:
    """Works without the data directory."""
    assert count_parameters(space.to_onnx(FBNetArch.from_op_indices(ROW0))) == ROW0_PARAMS
    assert count_parameters(space.to_onnx(FBNetArch(("skip",) * 22))) == ALL_SKIP_PARAMS


def test_parameters_and_flops_match_the_benchmark(
    space: FBNet, zero_cost_subset: list[dict[str, str]]
) -> None:
    """``params`` exactly; ``flops`` exactly as our MACs plus one per element of every BatchNorm, ReLU,
    residual Add and depthwise-conv output, plus a constant 117,120 (head bookkeeping, the same for
    every architecture). The FLOP identity pins what parameters cannot: strides (the resolution of
    each layer) and where the ReLUs are, including after a shape-changing skip's 1×1 conv. Counted on
    shapes without weight data (what ``to_onnx`` fills in does not change a count; the test above
    counts two executable models)."""
    for row in zero_cost_subset:
        model = materialize(space.build_onnx(FBNetArch.from_op_indices(row["op_idx_list"])), weights=False)
        assert count_parameters(model) == int(float(row["params"])), row["op_idx_list"]
        assert float(row["flops"]) == count_macs(model) + _elementwise(model) + 117_120, row["op_idx_list"]


def _elementwise(model: onnx.ModelProto) -> int:
    graph = shape_inference.infer_shapes(model, strict_mode=True).graph
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in [*graph.value_info, *graph.output]}
    total = 0
    for node in graph.node:
        depthwise = node.op_type == "Conv" and any(a.name == "group" and a.i > 2 for a in node.attribute)
        if depthwise or node.op_type in ("BatchNormalization", "Relu", "Add"):
            total += math.prod(shapes[node.output[0]])
    return total


def test_resolution_per_stage(space: FBNet) -> None:
    """32×32 input: stride-1 stem and first two stages, then 16, 8, 8, 4, 4 pixels a side."""
    model = space.to_onnx(FBNetArch(("k3_e1",) * 22))
    graph = shape_inference.infer_shapes(model, strict_mode=True).graph
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in graph.value_info}
    adds = [shapes[n.output[0]] for n in graph.node if n.op_type == "Add"]
    # Residual layers: 0, then three of each middle stage (its first changes width).
    assert [tuple(s[1:]) for s in adds] == [(16, 32, 32)] + [(24, 32, 32)] * 3 + [(32, 16, 16)] * 3 + \
        [(64, 8, 8)] * 3 + [(112, 8, 8)] * 3 + [(184, 4, 4)] * 3


def test_channel_shuffle_matches_shufflenet() -> None:
    """Ours equals ``x.view(n, g, c // g, h, w).transpose(1, 2).reshape(n, c, h, w)``."""
    b = ModelBuilder("shuffle", domain="t")
    y = b.main.call(_shuffle(b, 2), "x")
    model = materialize(b.build((1, 6, 2, 3), y, (1, 6, 2, 3)))
    onnx.checker.check_model(model, full_check=True)
    x = np.arange(36, dtype=np.float32).reshape(1, 6, 2, 3)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": x})
    np.testing.assert_array_equal(out, x.reshape(1, 2, 3, 2, 3).transpose(0, 2, 1, 3, 4).reshape(1, 6, 2, 3))


def test_text_defines_each_block_once(space: FBNet) -> None:
    arch = FBNetArch(("k3_e1_g2",) * 22)
    text = space.to_text(arch)
    assert text.count("k3_e1_g2_24 (x) =>") == 1 and text.count("= fbnet.k3_e1_g2_24 (") == 3
    # 12 distinct (C_in, C_out, stride) layer shapes, each block definition calling the one shuffle.
    assert text.count("(x) =>") == 12 + 3 and text.count("= fbnet.shuffle2 (") == 12
    # Identity skips vanish; a shape-changing skip is a 1×1 conv block.
    text = space.to_text(FBNetArch(("skip",) * 22))
    assert "skip_16_24 (x) =>" in text and "skip_24_32_s2 (x) =>" in text and "skip_24 " not in text


def test_every_block_runs_in_every_layer_kind(space: FBNet) -> None:
    """Each block at least once in a residual, a widening and a strided layer, executed end to end."""
    for k, block in enumerate(BLOCKS):
        blocks = [BLOCKS[(k + i) % len(BLOCKS)] for i in range(NUM_LAYERS)]
        model = space.to_onnx(FBNetArch(tuple(blocks)))
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        (out,) = session.run(None, {"x": np.zeros(space.input_shape, dtype=np.float32)})
        assert out.shape == (1, 100) and np.all(np.isfinite(out)), block
