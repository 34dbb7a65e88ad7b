"""Canonical text: faithful, deterministic, compact, and parseable back."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from exporters import ModelBuilder, canonicalize, count_parameters, from_text, materialize, to_text


def _flat_model(conv_name: str = "/features/0/Conv", weight_seed: int = 0) -> onnx.ModelProto:
    """A model as an exporter writes it: initializers, generated names, doc strings."""
    rng = np.random.default_rng(weight_seed)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "features.0.weight"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "features.0.bias"),
        numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape_const"),
    ]
    nodes = [
        helper.make_node("Conv", ["input.1", "features.0.weight", "features.0.bias"], ["/features/0/out"],
                         name=conv_name, kernel_shape=[3, 3], pads=[1, 1, 1, 1], doc_string="conv here"),
        helper.make_node("Relu", ["/features/0/out"], ["/relu/out"], name="/relu/Relu"),
        helper.make_node("GlobalAveragePool", ["/relu/out"], ["/pool/out"], name="/pool"),
        helper.make_node("Reshape", ["/pool/out", "shape_const"], ["logits"], name="/reshape"),
    ]
    graph = helper.make_graph(nodes, "torch_jit", [helper.make_tensor_value_info("input.1", 1, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("logits", 1, [1, 4])], inits)
    graph.value_info.append(helper.make_tensor_value_info("/relu/out", 1, [1, 4, 8, 8]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="pytorch")
    model.ir_version = 10
    return model


def test_names_weights_and_metadata_are_canonicalised() -> None:
    text = to_text(_flat_model())
    for leaked in ("/features", "features.0", "pytorch", "conv here", "input.1", "/relu"):
        assert leaked not in text
    assert "param.Tensor <shape = [4,3,3,3]>" in text
    assert "dtype: int = 7" in text or "dtype = 7" in text  # the int64 constant keeps its type
    assert text == to_text(_flat_model(conv_name="other", weight_seed=1)), "values and names must not matter"


def test_text_parses_back_into_the_same_graph() -> None:
    model = _flat_model()
    text = to_text(model)
    rebuilt = materialize(from_text(text))
    onnx.checker.check_model(rebuilt, full_check=True)
    assert to_text(rebuilt) == text
    assert [n.op_type for n in rebuilt.graph.node] == [n.op_type for n in model.graph.node]
    shapes = [tuple(i.dims) for i in model.graph.initializer]
    assert [tuple(i.dims) for i in rebuilt.graph.initializer] == shapes
    conv = next(n for n in rebuilt.graph.node if n.op_type == "Conv")
    assert helper.get_attribute_value(conv.attribute[0]) == [3, 3]


def test_string_attributes_keep_their_commas() -> None:
    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [2])],
                              [helper.make_tensor_value_info("y", 1, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    meta = helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT)
    meta.attribute.append(helper.make_attribute("note", "a, b"))
    model.graph.node.insert(0, meta)
    assert '"a, b"' in to_text(model)


def test_functions_are_printed_once_and_inline_to_a_runnable_model() -> None:
    b = ModelBuilder("toy", domain="toy")

    def block(f, x):
        y = f.op("Conv", x, f.param(3, 3, 1, 1), kernel_shape=[1, 1])
        return f.op("BatchNormalization", y, *f.param(3, n=4))

    name = b.function("block", 1, block)
    y = "x"
    for _ in range(6):
        y = b.main.call(name, y)
    structural = b.build((1, 3, 4, 4), y, (1, 3, 4, 4))
    text = to_text(structural)
    assert text.count("block (x) =>") == 1 and text.count("= toy.block (") == 6
    model = materialize(structural, seed=3)
    onnx.checker.check_model(model, full_check=True)
    assert count_parameters(model) == 6 * (9 + 2 * 3)  # BN running stats are not trainable
    assert len(model.graph.initializer) == 6 * 5
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    out = session.run(None, {"x": np.ones((1, 3, 4, 4), np.float32)})[0]
    assert out.shape == (1, 3, 4, 4) and np.isfinite(out).all()


def test_materialize_is_seeded() -> None:
    b = ModelBuilder("toy", domain="toy")
    y = b.main.op("Conv", "x", b.main.param(2, 3, 1, 1), kernel_shape=[1, 1])
    structural = b.build((1, 3, 2, 2), y, (1, 2, 2, 2))

    def weights(seed: int) -> bytes:
        return materialize(structural, seed=seed).graph.initializer[0].SerializeToString()

    assert weights(0) == weights(0) != weights(1)


def test_canonicalize_leaves_its_input_alone() -> None:
    model = _flat_model()
    before = model.SerializeToString()
    canonicalize(model)
    assert model.SerializeToString() == before


def test_count_macs_counts_conv_and_gemm() -> None:
    from exporters import count_macs

    b = ModelBuilder("toy", domain="toy")
    y = b.main.op("Conv", "x", b.main.param(8, 3, 3, 3), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = b.main.op("Flatten", b.main.op("GlobalAveragePool", y), axis=1)
    y = b.main.op("Gemm", y, b.main.param(10, 8), b.main.param(10), transB=1)
    model = materialize(b.build((1, 3, 16, 16), y, (1, 10)))
    assert count_macs(model) == 16 * 16 * 8 * 27 + 8 * 10


def test_count_macs_skips_nodes_no_output_needs() -> None:
    from exporters import count_macs

    b = ModelBuilder("toy", domain="toy")
    dead = b.main.op("Conv", "x", b.main.param(4, 3, 1, 1), kernel_shape=[1, 1])  # never used
    b.main.op("Relu", dead)
    y = b.main.op("Mul", "x", b.main.op("Constant", value_float=0.0))  # NB201's all-'none' node
    y = b.main.op("Flatten", b.main.op("GlobalAveragePool", y), axis=1)
    y = b.main.op("Gemm", y, b.main.param(10, 3), transB=1)
    assert count_macs(materialize(b.build((1, 3, 8, 8), y, (1, 10)))) == 3 * 10


def test_materialize_without_weights_counts_the_same() -> None:
    from exporters import count_macs, count_parameters, materialize
    from search_spaces import get_space

    space = get_space("nb201")
    for arch_id in space.sample_ids(3, seed=5):
        structural = space.build_onnx(space.parse(arch_id))
        shapes_only, executable = materialize(structural, weights=False), materialize(structural)
        assert all(not init.raw_data and not init.float_data for init in shapes_only.graph.initializer)
        assert count_parameters(shapes_only) == count_parameters(executable) > 0
        assert count_macs(shapes_only) == count_macs(executable) > 0


def test_conv_writes_same_padding_and_only_non_default_attributes() -> None:
    b = ModelBuilder("toy", domain="toy")
    plain = b.main.conv("x", 4, 8)
    strided = b.main.conv(plain, 8, 8, 3, 2, groups=8, bias=True)
    y = b.main.conv(strided, 8, 8, (1, 5), (1, 1), dilation=2)
    attrs = {n.output[0]: {a.name: helper.get_attribute_value(a) for a in n.attribute}
             for n in b.main.nodes if n.op_type == "Conv"}
    assert attrs[plain] == {"kernel_shape": [1, 1]}
    assert attrs[strided] == {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "group": 8}
    assert attrs[y] == {"kernel_shape": [1, 5], "pads": [0, 4, 0, 4], "dilations": [2, 2]}
    model = materialize(b.build((1, 4, 8, 8), y, (1, 8, 4, 4)))
    assert count_parameters(model) == 4 * 8 + (8 * 9 + 8) + 8 * 8 * 5
    out = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.ones((1, 4, 8, 8), np.float32)})[0]
    assert out.shape == (1, 8, 4, 4)
