"""Multiply–accumulates and trainable parameters of a model, from its graph alone.

Free labels (no training, no hardware) for pre-training the regression model. Only Conv, Gemm and
MatMul count as multiply–accumulates, which is why NAS-Bench-201's published "FLOPs" (thop, which also
counts pooling and normalisation) are a few percent higher; the ranking is what matters for pre-training.
Both work on structural models (weights as ``param.Tensor`` placeholders, blocks as local functions) and
on executable ones alike, read once into a :class:`~exporters._flat.FlatGraph`.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import onnx
from onnx import helper, shape_inference

from exporters._flat import FlatGraph, FlatNode, flatten
from exporters._materialize import materialize
from exporters._shapes import UnknownShape, infer_shapes

#: Inputs of BatchNormalization that hold running statistics, not trainable parameters.
_BN_STATS = (3, 4)


def count_macs(model: onnx.ModelProto, *, onnx_shapes: bool = False) -> int:
    """Multiply–accumulates of the Conv, Gemm and MatMul nodes the outputs depend on, at the declared
    input shape.

    Nodes whose results never reach an output are not counted: they change nothing a runtime must
    compute. (NAS-Bench-201 cells whose output edges are all ``none`` keep their convolutions in the
    graph and in the published parameter counts, but HW-NAS-Bench measured them at chance-level cells'
    latency, under 1 ms on pixel3 against 3-36 ms for the rest.)

    Needs fully known shapes: a static input shape. Shapes come from the rules of
    :mod:`exporters._shapes` (ONNX's shape inference where they do not reach); ``onnx_shapes``: from
    ONNX's shape inference on the inlined model always (slower: what the rules are checked against).
    """
    return _count_macs_onnx(model) if onnx_shapes else macs_of(flatten(model), model)


def count_parameters(model: onnx.ModelProto) -> int:
    """Trainable parameters, counted the way PyTorch counts them.

    Every floating-point weight counts once (each call of a function that declares weights has its own),
    except BatchNorm running mean/variance (buffers in PyTorch) — so the number is comparable with the
    ``params`` columns that benchmarks publish.
    """
    return parameters_of(flatten(model))


def parameters_of(flat: FlatGraph) -> int:
    """:func:`count_parameters` of a flattened model."""
    stats = {node.inputs[i] for node in flat.nodes if node.op_type == "BatchNormalization"
             for i in _BN_STATS if i < len(node.inputs)}
    return sum(math.prod(shape) for value, (shape, dtype) in flat.weights.items()
               if value not in stats and _is_float(dtype))


@cache
def _is_float(dtype: int) -> bool:
    return bool(np.issubdtype(helper.tensor_dtype_to_np_dtype(dtype), np.floating))


def macs_of(flat: FlatGraph, model: onnx.ModelProto) -> int:
    """:func:`count_macs` of ``model``, flattened as ``flat``; ONNX shape inference where the shape
    rules of :mod:`exporters._shapes` do not reach."""
    if flat.has_subgraphs:  # a subgraph's reads from outside it decide what is live: let ONNX read them
        return _count_macs_onnx(model)
    try:
        shapes = infer_shapes(flat)
    except UnknownShape:
        return _count_macs_onnx(model)
    return sum(_node_macs(node.op_type, bool(node.attrs.get("transA", 0)), bool(node.attrs.get("transB", 0)),
                          shapes[node.outputs[0]], shapes[node.inputs[0]], shapes[node.inputs[1]])
               for node in live_nodes(flat) if node.op_type in _COUNTED)


def live_nodes(flat: FlatGraph) -> list[FlatNode]:
    """The nodes of ``flat`` (in order) that some graph output needs."""
    needed = set(flat.outputs)
    live = []
    for node in reversed(flat.nodes):
        if any(v in needed for v in node.outputs):
            live.append(node)
            needed.update(node.inputs)
    return live[::-1]


def _count_macs_onnx(model: onnx.ModelProto) -> int:
    """:func:`count_macs` through ONNX shape inference on the inlined model with weights declared."""
    inferred = shape_inference.infer_shapes(materialize(model, weights=False), strict_mode=True)
    graph = inferred.graph
    live = _live_proto_nodes(graph)
    shapes: dict[str, list[int]] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    return sum(_node_macs(node.op_type, any(x.name == "transA" and x.i for x in node.attribute),
                          any(x.name == "transB" and x.i for x in node.attribute),
                          shapes[node.output[0]], shapes[node.input[0]], shapes[node.input[1]])
               for node in live if node.op_type in _COUNTED)


#: The operators whose multiply-accumulates count.
_COUNTED = frozenset({"Conv", "Gemm", "MatMul"})


def _node_macs(op_type: str, trans_a: bool, trans_b: bool, output: list[int], first: list[int],
               second: list[int]) -> int:
    """Multiply–accumulates of one Conv, Gemm or MatMul node, from its output's and inputs' shapes."""
    if op_type == "Conv":
        return math.prod(output) * math.prod(second[1:])  # the weight's dim 1 is C_in / group already
    if op_type == "Gemm":
        m, k = (first[1], first[0]) if trans_a else (first[0], first[1])
        return m * k * (second[0] if trans_b else second[1])
    return math.prod(output) * first[-1]  # MatMul


def _live_proto_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The nodes of ``graph`` that some graph output needs, subgraphs' reads from outside included."""
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
