"""The one-read description of a graph (parameters, MACs, graph labels) against the slow routes it replaced:
ONNX's inliner and shape inference, and the values the labels had before (bit for bit)."""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import onnx.inliner
import pytest
from onnx import TensorProto, helper

import exporters._flat as flat_module
from exporters import FEATURE_NAMES, ModelBuilder, count_macs, count_parameters, describe_graph, materialize
from exporters._cache import BoundedCache
from exporters._flops import _count_macs_onnx
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, SUMMED_LABELS, free_labels
from search_spaces import available_spaces, get_space

#: sha256 (first 32 hex digits) of the float64 rows of ``free_labels(space, ids, graph=True)`` for the
#: first 12 of ``space.sample_ids(40, seed=7)``, computed by the labels' code before the one-read
#: description (commit 5bc9bdf): the new code must give the same values, bit for bit. The ImageNet NDS
#: spaces (``_in``) came later: their digests are the current code's when they were added. The labels added
#: since (:data:`~nasrlm.free_labels.SUMMED_LABELS`, version 7) are left out: every earlier one is unchanged.
BEFORE = {
    "fbnet": "2997072b7afe1296a53101f84cdb0082",
    "nb101": "2c17408717dd4b7b54f9471d305cec9e",
    "nb201": "1a92cf4788bdf9ef5f6606e0a5ae1438",
    "nb301": "ed54f775440034896dfe560eff97885a",
    "nds_amoeba": "20755ab52c2fa8bac7b6467602318bd6",
    "nds_amoeba_in": "ea0ca19169272d8d66c4a04275090b6f",
    "nds_darts": "9acc96d1472a0a426de63a31c9ce51b4",
    "nds_darts_in": "7a036e357bf1049521bcd6281f8d67c4",
    "nds_enas": "3aada7859be81c90cc134d30d2b53880",
    "nds_enas_in": "9058eb9f371b403ba1a148df8e6c7786",
    "nds_nasnet": "81a159f8c04a45f018f566e6e7d66579",
    "nds_nasnet_in": "6782891a9230b0c5e5c1eda3f8ec7058",
    "nds_pnas": "64742c5b69c9319094cab428ac399489",
    "nds_pnas_in": "9ce90af5c635923b1ff86d630e6c1eb1",
    "nds_resnet": "602626ccd56993dc04887b797273b939",
    "nds_resnet_in": "efcc6e2012da30930bf6e6295456d97f",
    "nds_resnext-a": "01bca3b0790c8f0378d5cf3f01a51b6f",
    "nds_resnext-a_in": "5cce0f2cded8f62df40733acc1648370",
    "nds_resnext-b": "45658fbdc0ca60d85acf1fed540a84ec",
    "nds_resnext-b_in": "9226bdcb4305a4ba5f3f820fcba17dd1",
    "nds_vanilla": "e3192e6f8cf58089f2e9823d62b11a53",
    "nds_vanilla_in": "57ea0d9190bd64ce8328642a0fbdf120",
    "ofa_mbv3": "c20e61b90fa8ee3ca4e3dfaded742f26",
    "ofa_proxyless": "34f4fb45b5934f163db964e5d019a52d",
    "ofa_resnet50": "392e3fb0be3d85491ff190047ecc8a9f",
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_labels_are_bit_for_bit_what_they_were(name: str) -> None:
    space = get_space(name)
    ids = space.sample_ids(40, seed=7)[:12]
    labels = free_labels(space, ids, graph=True, cache=None, jobs=1)
    labels = labels[:, [k for k, o in enumerate(ALL_FREE_OBJECTIVES) if o.name not in SUMMED_LABELS]]
    digest = hashlib.sha256(np.ascontiguousarray(labels, dtype="<f8").tobytes()).hexdigest()[:32]
    assert digest == BEFORE[name]


def test_every_built_in_space_is_covered() -> None:
    assert set(BEFORE) == set(available_spaces())


@pytest.mark.parametrize("name", available_spaces())
def test_the_expansion_agrees_with_onnx_inliner_and_shape_inference(name: str, monkeypatch) -> None:
    space = get_space(name)
    for arch_id in space.sample_ids(3, seed=11):
        model = space.build_onnx(space.parse(arch_id))
        fast = describe_graph(model)
        assert fast.macs == _count_macs_onnx(model)
        assert fast.parameters == count_parameters(materialize(model, weights=False))
        inlined = describe_graph(onnx.inliner.inline_local_functions(model))  # no functions left to expand
        paths = [n for n in FEATURE_NAMES if not n.startswith("block")]
        assert [fast.features[n] for n in paths] == [inlined.features[n] for n in paths]
        with monkeypatch.context() as m:  # every function read through onnx.inliner, as before
            m.setattr(flat_module, "_templates", BoundedCache(0))
            m.setattr(flat_module, "template_of", _refusing)
            import exporters._graph as graph_module

            m.setattr(graph_module, "template_of", _refusing)
            m.setattr(graph_module, "_body_cache", BoundedCache(0))
            assert describe_graph(model) == fast


def _refusing(function: onnx.FunctionProto) -> None:
    raise flat_module.NotExpandable("as a model with attribute parameters would")


def _tiny(op: str) -> onnx.ModelProto:
    """x (1x3x8x8) -> conv 3x3 (4 channels) -> ``op`` -> conv 1x1 -> y."""
    b = ModelBuilder("tiny", "tiny")
    y = b.main.conv(b.main.op(op, b.main.conv("x", 3, 4, 3)), 4, 2, 1)
    return b.build([1, 3, 8, 8], y, [1, 2, 8, 8])


def test_an_operator_without_a_shape_rule_is_counted_by_onnx_shape_inference(monkeypatch) -> None:
    model = _tiny("Softsign")  # no rule in exporters._shapes: ONNX's shape inference answers
    called = []
    real = _count_macs_onnx

    def spying(m: onnx.ModelProto) -> int:
        called.append(True)
        return real(m)

    import exporters._flops as flops

    monkeypatch.setattr(flops, "_count_macs_onnx", spying)
    assert count_macs(model) == 3 * 4 * 9 * 64 + 4 * 2 * 64
    assert called


def test_a_function_with_attribute_parameters_is_read_through_the_inliner() -> None:
    scaled = helper.make_function("f", "scaled", ["a"], ["b"], [
        helper.make_node("Constant", [], ["k"], value_float=1.0),
        helper.make_node("LeakyRelu", ["a"], ["b"], alpha=0.0, domain=""),
    ], [helper.make_opsetid("", 18)], attributes=["alpha"])
    scaled.node[1].attribute[0].CopyFrom(onnx.AttributeProto(name="alpha", ref_attr_name="alpha",
                                                               type=onnx.AttributeProto.FLOAT))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         helper.make_node("scaled", ["c"], ["y"], domain="f", alpha=0.1)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108)])
    model = helper.make_model(graph, functions=[scaled],
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("f", 1)])
    described = describe_graph(model)
    assert described.parameters == 108 and described.macs == 4 * 27 * 64
    assert described.features["conv3_nodes"] == 1 and described.features["blocks"] == 1


def test_a_node_with_a_subgraph_is_one_node_and_macs_come_from_onnx() -> None:
    branch = helper.make_graph([helper.make_node("Identity", ["c"], ["o"])], "branch", [],
                               [helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, 4, 8, 8])])
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         helper.make_node("Constant", [], ["t"], value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
         helper.make_node("If", ["t"], ["y"], then_branch=branch, else_branch=branch)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    described = describe_graph(model)
    assert described.macs == 4 * 27 * 64  # the conv feeds the branches: live, through the subgraph's read
    assert described.features["conv3_nodes"] == 0  # paths follow a node's inputs, not its subgraphs' reads


@pytest.mark.parametrize(("op", "inputs", "attrs"), [
    ("MaxPool", (), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", (), {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("GlobalAveragePool", (), {}),
    ("Transpose", (), {"perm": [0, 1, 3, 2]}),
])
def test_shape_rules_agree_with_onnx(op: str, inputs: tuple, attrs: dict) -> None:
    b = ModelBuilder("tiny", "tiny")
    h = b.main.conv("x", 3, 4, 3)
    h = b.main.op(op, h, *inputs, **attrs)
    h = b.main.op("Flatten", h)
    size = {"MaxPool": 4 * 4 * 4, "AveragePool": 4 * 4 * 4, "GlobalAveragePool": 4}.get(op, 4 * 64)
    w = b.main.param(size, 5)
    y = b.main.op("MatMul", h, w)
    model = b.build([1, 3, 8, 8], y, [1, 5])
    assert count_macs(model) == _count_macs_onnx(model)
