"""``onnx_to_torch`` on hand-built graphs (every space's networks: its conformance suite)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from exporters import SUPPORTED_OPS, onnx_to_torch

RNG = np.random.default_rng(0)


def _model(nodes: list[onnx.NodeProto], weights: dict[str, np.ndarray], channels: int = 2,
           size: int = 5) -> onnx.ModelProto:
    """A graph from ``x`` (batch N, ``channels``, ``size`` x ``size``) to ``y``."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v.astype(np.float32) if v.dtype.kind == "f" else v, k)
         for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _both(model: onnx.ModelProto, batch: int = 3) -> tuple[np.ndarray, np.ndarray]:
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = RNG.standard_normal((batch, *dims[1:])).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        got = onnx_to_torch(model).eval()(torch.from_numpy(x)).numpy()
    return got, session.run(None, {"x": x})[0]


def test_uneven_padding_strides_and_groups_match_onnxruntime() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[0, 1, 2, 1], strides=[2, 1], group=2),
        helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[3, 3], pads=[1, 0, 0, 1]),
        helper.make_node("AveragePool", ["m"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1],
                         count_include_pad=1, ceil_mode=1),
    ]
    got, expected = _both(_model(nodes, {"w": RNG.standard_normal((4, 1, 3, 3))}))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_constant_shapes_slices_and_permutations_keep_any_batch_size() -> None:
    ints = {"shape": np.array([0, 0, -1], dtype=np.int64), "starts": np.array([1], dtype=np.int64),
            "ends": np.array([2**31 - 1], dtype=np.int64), "axes": np.array([2], dtype=np.int64)}
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Slice", ["r", "starts", "ends", "axes"], ["s"]),
        helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Constant", [], ["six"], value_float=6.0),
        helper.make_node("Constant", [], ["zero"], value_float=0.0),
        helper.make_node("Clip", ["t", "zero", "six"], ["c"]),
        helper.make_node("HardSigmoid", ["c"], ["h"], alpha=1 / 6, beta=0.5),
        helper.make_node("Flatten", ["h"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc", "b"], ["y"], transB=1, alpha=0.5),
    ]
    model = _model(nodes, {**ints, "fc": RNG.standard_normal((7, 48)), "b": RNG.standard_normal(7)})
    for batch in (1, 4):
        got, expected = _both(model, batch)
        assert got.shape == (batch, 7)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_batch_norm_learns_and_keeps_running_statistics_as_torch_does() -> None:
    weights = {"scale": np.ones(2), "bias": np.zeros(2), "mean": np.zeros(2), "var": np.ones(2)}
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], momentum=0.75)
    module = onnx_to_torch(_model([node], weights))
    assert {n for n, _ in module.named_parameters()} == {"scale", "bias"}  # the statistics are buffers
    assert {"mean", "var"} <= set(module.state_dict())
    x = torch.randn(8, 2, 5, 5) * 3 + 1
    y = module.train()(x)
    assert torch.allclose(y.mean(dim=(0, 2, 3)), torch.zeros(2), atol=1e-5)  # batch statistics
    np.testing.assert_allclose(module.mean.numpy(), 0.25 * x.mean(dim=(0, 2, 3)).numpy(), rtol=1e-5)
    module.eval()
    expected = (x - module.mean[None, :, None, None]) / torch.sqrt(module.var[None, :, None, None] + 1e-5)
    assert torch.allclose(module(x), expected, atol=1e-5)


def test_weights_are_parameters_that_train() -> None:
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    module = onnx_to_torch(_model(nodes, {"w": RNG.standard_normal((3, 2, 3, 3)), "b": np.zeros(3)}))
    assert module.onnx_names == {"w": "w", "b": "b"}
    optimiser = torch.optim.SGD(module.parameters(), lr=0.1)
    x = torch.randn(4, 2, 5, 5)
    losses = []
    for _ in range(3):
        loss = module(x).square().mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[2] < losses[0]


def test_unsupported_operators_and_models_are_named() -> None:
    node = helper.make_node("LRN", ["x"], ["y"], size=3, name="norm1")
    with pytest.raises(NotImplementedError, match=r"'LRN' \(node 'norm1'\).*supported: Add"):
        onnx_to_torch(_model([node], {}))
    assert "LRN" not in SUPPORTED_OPS and "Conv" in SUPPORTED_OPS
    function = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                                    [helper.make_opsetid("", 18)])
    with_function = _model([helper.make_node("f", ["x"], ["y"], domain="local")], {})
    with_function.functions.append(function)
    with pytest.raises(ValueError, match="inline the model's local functions"):
        onnx_to_torch(with_function)


def test_clip_bounds_may_be_initializers_or_left_out() -> None:
    weights = {"low": np.array(-0.5), "high": np.array(0.5)}
    both = [helper.make_node("Clip", ["x", "low", "high"], ["y"])]
    upper_only = [helper.make_node("Clip", ["x", "", "high"], ["y"])]
    for nodes in (both, upper_only):
        got, expected = _both(_model(nodes, weights))
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_nodes_with_several_outputs_are_refused_not_run_half() -> None:
    node = helper.make_node("MaxPool", ["x"], ["y", "indices"], kernel_shape=[2, 2], name="pool")
    with pytest.raises(NotImplementedError, match="MaxPool node 'pool' has several outputs"):
        onnx_to_torch(_model([node], {}))
