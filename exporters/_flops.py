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
    """Multiply–accumulates of the Conv, Gemm and MatMul nodes the outputs depend on, at the declared
    input shape.

    Nodes whose results never reach an output are not counted: they change nothing a runtime must
    compute. (NAS-Bench-201 cells whose output edges are all ``none`` keep their convolutions in the
    graph and in the published parameter counts, but HW-NAS-Bench measured them at chance-level cells'
    latency, under 1 ms on pixel3 against 3-36 ms for the rest.)

    Needs fully known shapes: run on an executable model (``materialize``) with a static input.
    """
    inferred = shape_inference.infer_shapes(model, strict_mode=True)
    graph = inferred.graph
    live = live_nodes(graph)
    shapes: dict[str, list[int]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    total = 0
    for node in live:
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


def live_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The nodes of ``graph`` (topologically ordered, as ONNX requires) that some graph output needs."""
    needed = {o.name for o in graph.output}
    live = []
    for node in reversed(graph.node):
        if any(name in needed for name in node.output):
            live.append(node)
            needed.update(node.input)
            for attribute in node.attribute:  # names a subgraph (If, Loop, Scan) reads from outside it
                if attribute.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                    for subgraph in [attribute.g, *attribute.graphs]:
                        needed.update(name for n in subgraph.node for name in n.input)
    return live[::-1]
