"""Turn a structural model into an executable one."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx.inliner
from onnx import TensorProto, helper, numpy_helper

from exporters._builder import PARAM_DOMAIN, PARAM_OP


def materialize(model: onnx.ModelProto, seed: int = 0, *, weights: bool = True) -> onnx.ModelProto:
    """Inline local functions and replace every ``param.Tensor`` placeholder by an initializer.

    Weights are drawn from ``numpy.random.default_rng(seed)`` in placeholder order — He-normal for
    tensors of rank ≥ 2, uniform in [0.5, 1.5) for vectors (so BatchNorm variances stay positive) —
    so the same structural model and seed always give byte-identical weights. The result passes
    ``onnx.checker.check_model(full_check=True)`` and runs in onnxruntime.

    ``weights=False`` declares each initializer's type and shape but gives it no data: not executable,
    but shape inference, :func:`count_parameters` and ``count_macs`` work on it, several times faster.
    """
    model = onnx.inliner.inline_local_functions(model) if model.functions else _copy(model)
    rng = np.random.default_rng(seed)
    graph = model.graph
    kept: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.domain == PARAM_DOMAIN and node.op_type == PARAM_OP:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            shape = [int(d) for d in attrs["shape"]]
            dtype = helper.tensor_dtype_to_np_dtype(int(attrs.get("dtype", TensorProto.FLOAT)))
            for name in node.output:
                if weights:
                    graph.initializer.append(numpy_helper.from_array(_draw(rng, shape, dtype), name))
                else:
                    declared = graph.initializer.add()
                    declared.name, declared.data_type = name, int(attrs.get("dtype", TensorProto.FLOAT))
                    declared.dims.extend(shape)
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    used = {node.domain for node in graph.node}
    imports = [o for o in model.opset_import if o.domain == "" or o.domain in used]
    del model.opset_import[:]
    model.opset_import.extend(imports)
    return model


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _draw(rng: np.random.Generator, shape: list[int], dtype: np.dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        return np.zeros(shape, dtype=dtype)
    if len(shape) >= 2:
        fan_in = math.prod(shape[1:]) or 1
        return (rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(dtype)
    return rng.uniform(0.5, 1.5, size=shape).astype(dtype)
