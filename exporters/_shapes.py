"""Static tensor shapes of a :class:`~exporters._flat.FlatGraph`, for the operators our spaces use.

Counting multiply–accumulates needs the shape of every convolution's output, which ONNX shape inference
gives after the model is inlined and its weights declared as initializers: three passes through protobuf
messages per model. The operators of image networks follow a handful of shape rules, applied here in one
pass over the flat graph. An operator without a rule here, or a shape that is not a fixed number, raises
:class:`UnknownShape`, and the caller falls back on ONNX shape inference, so no model goes uncounted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from exporters._flat import FlatGraph, FlatNode


class UnknownShape(Exception):
    """A shape this module cannot work out (an operator without a rule, a dynamic dimension)."""


Shape = list[int]


def infer_shapes(flat: FlatGraph) -> dict[int, Shape]:
    """Value id → shape, for every value the graph's nodes compute and every weight and input."""
    shapes: dict[int, Shape] = {v: shape for v, (shape, _) in flat.weights.items()}  # never changed
    for value, shape in flat.input_shapes.items():
        if shape is None:
            raise UnknownShape("a graph input has a dimension that is not a fixed number")
        shapes[value] = shape
    for value, constant in flat.constants.items():
        shapes[value] = list(constant.shape)
    for node in flat.nodes:
        if node.op_type == "Constant":
            if node.outputs[0] not in shapes:
                raise UnknownShape("a Constant without a dense value")
            continue
        rule = _RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if rule is None:
            raise UnknownShape(f"no shape rule for {node.domain or 'ai.onnx'}.{node.op_type}")
        try:
            ins = [shapes[v] if v >= 0 else None for v in node.inputs]
        except KeyError:
            raise UnknownShape(f"an input of {node.op_type} has no known shape") from None
        out = rule(node, ins, flat)
        for value in node.outputs[:1] if node.op_type in _FIRST_OUTPUT_ONLY else node.outputs:
            shapes[value] = out
    return shapes


def _attr(node: FlatNode, name: str, default: Any) -> Any:
    return node.attrs.get(name, default)


def _same(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    return ins[0]


def _broadcast(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    first, *rest = [s for s in ins if s is not None]
    if all(s == first for s in rest):
        return first
    return list(np.broadcast_shapes(*(tuple(s) for s in (first, *rest))))


def _window(node: FlatNode, spatial: list[int], kernel: list[int]) -> list[int]:
    """Output sizes of a sliding window (convolution, pooling) over ``spatial``."""
    rank = len(spatial)
    strides = list(_attr(node, "strides", [1] * rank))
    dilations = list(_attr(node, "dilations", [1] * rank))
    auto_pad = _attr(node, "auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return [-(-size // stride) for size, stride in zip(spatial, strides, strict=True)]
    pads = [0] * (2 * rank) if auto_pad == "VALID" else list(_attr(node, "pads", [0] * (2 * rank)))
    out = []
    for axis in range(rank):
        span = spatial[axis] + pads[axis] + pads[axis + rank] - dilations[axis] * (kernel[axis] - 1) - 1
        out.append(span // strides[axis] + 1)
    return out


def _conv(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x, w = ins[0], ins[1]
    kernel = list(_attr(node, "kernel_shape", w[2:]))
    return [x[0], w[0], *_window(node, x[2:], kernel)]


def _pool(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x = ins[0]
    if _attr(node, "ceil_mode", 0):
        raise UnknownShape("pooling with ceil_mode")  # ONNX versions differ on its last window
    return [x[0], x[1], *_window(node, x[2:], list(node.attrs["kernel_shape"]))]


def _global_pool(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x = ins[0]
    return [x[0], x[1], *([1] * (len(x) - 2))]


def _concat(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    shapes = [s for s in ins if s is not None]
    axis = node.attrs["axis"] % len(shapes[0])
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return out


def _flatten(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x = ins[0]
    axis = _attr(node, "axis", 1) % (len(x) + 1)
    return [math.prod(x[:axis]), math.prod(x[axis:])]


def _gemm(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    a, b = ins[0], ins[1]
    m = a[1] if _attr(node, "transA", 0) else a[0]
    n = b[0] if _attr(node, "transB", 0) else b[1]
    return [m, n]


def _matmul(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    a, b = ins[0], ins[1]
    if len(a) < 2 or len(b) < 2:
        raise UnknownShape("MatMul of a vector")
    batch = list(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])))
    return [*batch, a[-2], b[-1]]


def _transpose(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x = ins[0]
    perm = _attr(node, "perm", list(reversed(range(len(x)))))
    return [x[p] for p in perm]


def _constant_input(node: FlatNode, flat: FlatGraph, position: int) -> np.ndarray | None:
    if position >= len(node.inputs) or node.inputs[position] < 0:
        return None
    value = flat.constants.get(node.inputs[position])
    if value is None:
        raise UnknownShape(f"input {position} of {node.op_type} is not a Constant")
    return value


def _required_input(node: FlatNode, flat: FlatGraph, position: int) -> np.ndarray:
    value = _constant_input(node, flat, position)
    if value is None:
        raise UnknownShape(f"{node.op_type} without input {position} (an older opset's attribute)")
    return value


def _reshape(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x = ins[0]
    target = [int(d) for d in _required_input(node, flat, 1).reshape(-1)]
    if not _attr(node, "allowzero", 0):
        target = [x[i] if d == 0 else d for i, d in enumerate(target)]
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        target[target.index(-1)] = math.prod(x) // known
    return target


def _slice(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x = list(ins[0])
    starts = _required_input(node, flat, 1).reshape(-1)
    ends = _required_input(node, flat, 2).reshape(-1)
    axes = _constant_input(node, flat, 3)
    steps = _constant_input(node, flat, 4)
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes.reshape(-1)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps.reshape(-1)]
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis %= len(x)
        x[axis] = len(range(*slice(int(start), int(end), step).indices(x[axis])))
    return x


def _pad(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x = list(ins[0])
    pads = _constant_input(node, flat, 1)
    if pads is None or _constant_input(node, flat, 3) is not None:
        raise UnknownShape("Pad without constant pads, or with axes")
    pads = [int(p) for p in pads.reshape(-1)]
    rank = len(x)
    return [x[i] + pads[i] + pads[i + rank] for i in range(rank)]


def _reduce(node: FlatNode, ins: list[Shape | None], flat: FlatGraph) -> Shape:
    x = ins[0]
    axes = _constant_input(node, flat, 1)
    axes = _attr(node, "axes", None) if axes is None else [int(a) for a in axes.reshape(-1)]
    if axes is None:
        if _attr(node, "noop_with_empty_axes", 0):
            return x
        axes = list(range(len(x)))
    axes = {a % len(x) for a in axes}
    keep = _attr(node, "keepdims", 1)
    return [1 if i in axes else d for i, d in enumerate(x) if keep or i not in axes]


_UNARY = ("Relu", "Sigmoid", "HardSigmoid", "HardSwish", "Clip", "Identity", "Tanh", "LeakyRelu", "Elu",
          "Selu", "Softmax", "LogSoftmax", "Neg", "Exp", "Abs", "Sqrt", "Dropout", "BatchNormalization",
          "InstanceNormalization", "LayerNormalization", "Swish", "Mish", "Gelu", "PRelu", "Erf", "Cast")
_BROADCAST = ("Add", "Mul", "Sub", "Div", "Sum", "Max", "Min", "Mean", "Pow")
_RULES: dict[str, Callable[[FlatNode, list[Shape | None], FlatGraph], Shape]] = {
    **dict.fromkeys(_UNARY, _same), **dict.fromkeys(_BROADCAST, _broadcast),
    "Conv": _conv, "AveragePool": _pool, "MaxPool": _pool, "LpPool": _pool,
    "GlobalAveragePool": _global_pool, "GlobalMaxPool": _global_pool, "GlobalLpPool": _global_pool,
    "Concat": _concat, "Flatten": _flatten, "Gemm": _gemm, "MatMul": _matmul, "Transpose": _transpose,
    "Reshape": _reshape, "Slice": _slice, "Pad": _pad, "ReduceMean": _reduce, "ReduceMax": _reduce,
    "ReduceSum": _reduce,
}
#: Operators whose later outputs (a mask, an index, training statistics) have other shapes; only the first
#: output gets one here, and a node reading a later one is left to ONNX shape inference.
_FIRST_OUTPUT_ONLY = frozenset({"Dropout", "MaxPool", "BatchNormalization", "LayerNormalization"})
