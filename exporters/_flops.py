"""Multiply–accumulate count of an executable model, from its graph alone.

A free label (no training, no hardware) for pre-training the regression model. Only Conv, Gemm and
MatMul count, which is why NAS-Bench-201's published "FLOPs" (thop, which also counts pooling and
normalisation) are a few percent higher; the ranking is what matters for pre-training.
"""

from __future__ import annotations

import math

import onnx
from onnx import shape_inference


def count_macs(model: onnx.ModelProto) -> int:
    """Multiply–accumulates of Conv, Gemm and MatMul nodes at the declared input shape.

    Needs fully known shapes: run on an executable model (``materialize``) with a static input.
    """
    inferred = shape_inference.infer_shapes(model, strict_mode=True)
    graph = inferred.graph
    shapes: dict[str, list[int]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    total = 0
    for node in graph.node:
        if node.op_type == "Conv":
            out, weight = shapes[node.output[0]], shapes[node.input[1]]
            total += math.prod(out) * math.prod(weight[1:])  # weight[1] is C_in / group already
        elif node.op_type == "Gemm":
            a, b = shapes[node.input[0]], shapes[node.input[1]]
            trans_a = any(x.name == "transA" and x.i for x in node.attribute)
            m, k = (a[1], a[0]) if trans_a else (a[0], a[1])
            n = b[0] if any(x.name == "transB" and x.i for x in node.attribute) else b[1]
            total += m * k * n
        elif node.op_type == "MatMul":
            out, a = shapes[node.output[0]], shapes[node.input[0]]
            total += math.prod(out) * a[-1]
    return total
