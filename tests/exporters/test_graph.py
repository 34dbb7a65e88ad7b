"""Structural graph labels: exact values on small hand-built graphs, and finite values on every space."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from exporters import FEATURE_NAMES, graph_features, materialize
from exporters._graph import FAMILIES
from search_spaces import available_spaces, get_space


def _model(nodes: list[onnx.NodeProto], weights: list[str]) -> onnx.ModelProto:
    inits = [helper.make_tensor(w, TensorProto.FLOAT, [1], [1.0]) for w in weights]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph)


def _residual_block(extra: list[onnx.NodeProto] = ()) -> onnx.ModelProto:
    """x -> conv3x3 -> relu -> (conv1x1 | skip) -> add -> avgpool -> gemm -> y: two paths."""
    return _model([
        helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["c2"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["c2", "r"], ["a"]),
        *extra,
        helper.make_node("AveragePool", ["a"], ["p"], kernel_shape=[2, 2]),
        helper.make_node("Gemm", ["p", "w3"], ["y"]),
    ], ["w1", "w2", "w3", "w4"])


def test_counts_on_a_residual_block() -> None:
    f = graph_features(_residual_block())
    assert list(f) == list(FEATURE_NAMES)
    assert f["log10_paths"] == pytest.approx(math.log10(2))
    assert (f["compute_path_min"], f["compute_path_max"], f["compute_path_mean"]) == (2, 3, 2.5)
    stats = ("nodes", "path_mean", "path_min", "path_max")
    assert [f[f"conv1_{s}"] for s in stats] == [1, 0.5, 0, 1]
    assert [f[f"conv3_{s}"] for s in stats] == [1, 1, 1, 1]
    assert f["pool_path_mean"] == f["fc_path_mean"] == 1 and f["dwconv_nodes"] == 0
    # cut at conv3x3, relu, add, pool and gemm: the skip segment has two paths, one through the 1x1 conv
    assert (f["segments"], f["segment_paths"]) == (5, 6)
    assert (f["segment_paths_conv1"], f["segment_paths_conv3"], f["segment_paths_compute"]) == (1, 1, 3)


def test_dead_nodes_count_only_among_all_nodes_and_grouped_convolutions_are_their_own_family() -> None:
    dead = helper.make_node("Conv", ["r", "w4"], ["unused"], kernel_shape=[3, 3])
    with_dead, without = graph_features(_residual_block([dead])), graph_features(_residual_block())
    assert with_dead == {**without, "conv3_all": without["conv3_all"] + 1}
    assert [without[f"{family}_all"] for family in FAMILIES] == [1, 1, 0, 0, 1, 1]
    grouped = _model([helper.make_node("Conv", ["x", "w1"], ["c"], kernel_shape=[3, 3], group=4),
                      helper.make_node("Conv", ["c", "w2"], ["y"], kernel_shape=[7, 7])], ["w1", "w2"])
    f = graph_features(grouped)
    assert (f["dwconv_nodes"], f["conv5_nodes"], f["conv3_nodes"], f["compute_path_max"]) == (1, 1, 0, 2)


def test_a_graph_whose_output_ignores_its_input_has_no_paths() -> None:
    assert set(graph_features(_model([helper.make_node("Identity", ["w1"], ["y"])], ["w1"])).values()) == {0}
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    killed = _model([helper.make_node("Constant", [], ["z"], value=zero),  # NB201's none edge: x * 0
                     helper.make_node("Mul", ["x", "z"], ["m"]),
                     helper.make_node("Conv", ["m", "w1"], ["y"], kernel_shape=[3, 3])], ["w1"])
    assert graph_features(killed)["log10_paths"] == 0 and graph_features(killed)["conv3_nodes"] == 0
    assert graph_features(killed)["conv3_all"] == 1  # the network still computes it


def test_a_nb201_cell_counts_an_operation_no_output_depends_on_among_all_nodes() -> None:
    space = get_space("nb201")
    def read(arch_id: str) -> dict[str, float]:
        return graph_features(materialize(space.build_onnx(space.parse(arch_id)), weights=False))
    # a 3x3 convolution into node 1, which has no edge out: dead in every one of the 15 cells
    dead = read("|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    skip = read("|none~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    assert dead["conv3_nodes"] == skip["conv3_nodes"] and dead["conv3_all"] == skip["conv3_all"] + 15


@pytest.mark.parametrize("name", available_spaces())
def test_every_space_has_finite_graph_labels_that_vary(name: str) -> None:
    space = get_space(name)
    rows = [graph_features(materialize(space.build_onnx(space.parse(i)), weights=False))
            for i in space.sample_ids(4, seed=0)]
    values = np.array([[r[n] for n in FEATURE_NAMES] for r in rows])
    assert np.isfinite(values).all() and values[:, FEATURE_NAMES.index("compute_path_max")].min() >= 1
    assert (values.std(axis=0) > 0).any(), f"{name}: four random architectures read the same"


def test_blocks_are_the_main_graph_calls_of_local_functions() -> None:
    """x -> cell -> cell -> y, each cell a 3x3 convolution beside a skip: two paths a cell, one skip-only."""
    model = _skip_and_conv_cells()
    f = graph_features(model)
    assert (f["blocks"], f["block_paths"], f["block_paths_conv3"], f["block_paths_pool"]) == (2, 4, 2, 0)
    assert (f["block_compute_min"], f["block_compute_max"]) == (0, 2)  # each cell: a skip-only path, one conv
    assert f["log10_paths"] == pytest.approx(math.log10(4)) and f["compute_path_max"] == 2
    assert graph_features(materialize(model, weights=False))["blocks"] == 0  # inlined: no blocks left


def test_block_pairs_count_the_order_of_families_along_a_blocks_paths() -> None:
    """One block: x -> conv1x1 -> conv3x3 -> maxpool -> add <- (the conv1x1) -> y: two paths."""
    weight = helper.make_tensor("value", TensorProto.FLOAT, [1], [1.0])
    block = helper.make_function("my", "block", ["x"], ["y"], [
        helper.make_node("Constant", [], ["w"], value=weight),
        helper.make_node("Conv", ["x", "w"], ["c1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r"]),
        helper.make_node("Conv", ["r", "w"], ["c3"], kernel_shape=[3, 3]),
        helper.make_node("MaxPool", ["c3"], ["p"], kernel_shape=[3, 3]),
        helper.make_node("Add", ["p", "r"], ["y"]),
    ], [helper.make_opsetid("", 18)])
    pairs = _pairs(_calls(block, 1))
    assert pairs == {"start_conv1": 2, "conv1_conv3": 1, "conv3_pool": 1, "pool_end": 1, "conv1_end": 1}
    # a block whose input reaches its output past every family: one start_end per such path
    assert graph_features(_skip_and_conv_cells())["block_pair_start_end"] == 2


def test_block_pairs_count_paths_not_links() -> None:
    """x -> Add(x, x) -> conv3x3 -> y, and x * 0 -> pool -> into the sum: the sum reads x twice, so two
    paths reach the convolution (and its output is the block's); the pooling branch carries no path."""
    weight = helper.make_tensor("value", TensorProto.FLOAT, [1], [1.0])
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    block = helper.make_function("my", "block", ["x"], ["y"], [
        helper.make_node("Constant", [], ["w"], value=weight),
        helper.make_node("Constant", [], ["z"], value=zero),
        helper.make_node("Mul", ["x", "z"], ["dead"]),
        helper.make_node("MaxPool", ["dead"], ["p"], kernel_shape=[3, 3]),
        helper.make_node("Sum", ["x", "x", "p"], ["s"]),
        helper.make_node("Conv", ["s", "w"], ["y"], kernel_shape=[3, 3]),
    ], [helper.make_opsetid("", 18)])
    assert _pairs(_calls(block, 2)) == {"start_conv3": 4, "conv3_end": 4}  # two paths a block, two blocks


@pytest.mark.parametrize("name", ["nb201", "nb101", "fbnet"])
def test_block_pairs_leave_and_reach_every_block_path_once(name: str) -> None:
    """Every path across a block leaves its input once and reaches its output once."""
    space = get_space(name)
    for arch_id in space.sample_ids(3, seed=1):
        f = graph_features(space.build_onnx(space.parse(arch_id)))
        starts = sum(f[f"block_pair_start_{b}"] for b in (*FAMILIES, "end"))
        ends = sum(f[f"block_pair_{a}_end"] for a in ("start", *FAMILIES))
        assert starts == ends == f["block_paths"] > 0


def _skip_and_conv_cells() -> onnx.ModelProto:
    weight = helper.make_tensor("value", TensorProto.FLOAT, [1], [1.0])
    cell = helper.make_function("my", "cell", ["x"], ["y"], [
        helper.make_node("Constant", [], ["w"], value=weight),
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3]),
        helper.make_node("Add", ["c", "x"], ["y"]),
    ], [helper.make_opsetid("", 18)])
    return _calls(cell, 2)


def _calls(function: onnx.FunctionProto, count: int) -> onnx.ModelProto:
    """x -> function -> ... -> function -> y: ``count`` calls in a chain, the only nodes of the main graph."""
    names = ["x", *(f"h{k}" for k in range(1, count)), "y"]
    nodes = [helper.make_node(function.name, [a], [b], domain=function.domain) for a, b in pairwise(names)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid(function.domain, 1)]
    return helper.make_model(graph, functions=[function], opset_imports=opsets)


def _pairs(model: onnx.ModelProto) -> dict[str, float]:
    """The model's nonzero ``block_pair_*`` labels, by the pair's names (``start_conv1``)."""
    return {k.removeprefix("block_pair_"): v for k, v in graph_features(model).items()
            if k.startswith("block_pair_") and v}
