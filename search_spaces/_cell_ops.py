"""Operations, stems and heads of the NDS cell networks (:mod:`search_spaces.nds`): ONNX local functions.

Each operation is an :class:`OpSpec` in :data:`OPS`, built by the function registered for its kind; the
module docstring of :mod:`search_spaces.nds` states what each computes and where that was read. Blocks
are defined once per distinct shape (their names carry the shape), so a deep network prints each once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exporters import ModelBuilder

_BIG = 2**31 - 1  # "to the end" for Slice

# --- operations: one spec per name, built by the function registered for its kind -------------------
@dataclass(frozen=True)
class OpSpec:
    """How a named cell operation is built: its ``kind`` and kernel / dilation."""

    kind: str  # none | pool | skip | conv | conv_fact | sep | dil
    k: int = 0
    dilation: int = 1
    pool: str = ""  # ONNX pooling op for kind "pool"


OPS: dict[str, OpSpec] = {
    "none": OpSpec("none"),
    "avg_pool_3x3": OpSpec("pool", 3, pool="AveragePool"),
    "max_pool_3x3": OpSpec("pool", 3, pool="MaxPool"),
    "max_pool_5x5": OpSpec("pool", 5, pool="MaxPool"),
    "max_pool_7x7": OpSpec("pool", 7, pool="MaxPool"),
    "skip_connect": OpSpec("skip"),
    "conv_1x1": OpSpec("conv", 1),
    "conv_3x3": OpSpec("conv", 3),
    "conv_3x1_1x3": OpSpec("conv_fact", 3),
    "conv_7x1_1x7": OpSpec("conv_fact", 7),
    "sep_conv_3x3": OpSpec("sep", 3),
    "sep_conv_5x5": OpSpec("sep", 5),
    "sep_conv_7x7": OpSpec("sep", 7),
    "dil_conv_3x3": OpSpec("dil", 3, 2),
    "dil_conv_5x5": OpSpec("dil", 5, 2),
    "dil_sep_conv_3x3": OpSpec("sep", 3, 2),
}


# --- blocks: ONNX local functions, one per distinct shape, and inline ops -------------------------------
def _bn(f, x: str, c: int) -> str:
    return f.op("BatchNormalization", x, *f.param(c, n=4))


def _suffix(c_in: int, c_out: int, stride: int) -> str:
    return (f"{c_in}" if c_in == c_out else f"{c_in}_{c_out}") + (f"_s{stride}" if stride != 1 else "")


def cifar_stem(b: ModelBuilder, c: int) -> str:
    """3×3 conv 3→c (stride 1), BN: pycls' and DARTS' ``NetworkCIFAR`` stem, no ReLU."""
    def body(f, x):
        return _bn(f, f.conv(x, 3, c, 3), c)
    return b.function(f"stem_{c}", 1, body)


def imagenet_stems(b: ModelBuilder, c: int) -> tuple[str, str]:
    """DARTS' ``NetworkImageNet`` stems, each a stride-2 step: ``stem0`` is 3×3 conv 3→c/2, BN, ReLU, 3×3
    conv c/2→c, BN (224 → 56 pixels); ``stem1`` is ReLU, 3×3 conv c→c, BN (56 → 28)."""
    def body0(f, x):
        y = f.op("Relu", _bn(f, f.conv(x, 3, c // 2, 3, 2), c // 2))
        return _bn(f, f.conv(y, c // 2, c, 3, 2), c)

    def body1(f, x):
        return _bn(f, f.conv(f.op("Relu", x), c, c, 3, 2), c)
    return b.function(f"stem0_{c}", 1, body0), b.function(f"stem1_{c}", 1, body1)


def relu_conv_bn(b: ModelBuilder, c_in: int, c_out: int, k: int = 1, stride: int = 1) -> str:
    def body(f, x):
        return _bn(f, f.conv(f.op("Relu", x), c_in, c_out, k, stride), c_out)
    return b.function(f"conv_{k}x{k}_{_suffix(c_in, c_out, stride)}", 1, body)


def factorized_reduce(b: ModelBuilder, c_in: int, c_out: int) -> str:
    """ReLU, then 1×1 stride-2 convs of the input and of the input shifted by one pixel (padded with one
    zero row and column at the end, as pycls does), each to ``c_out / 2`` channels; concat; BN."""
    def body(f, x):
        y = f.op("Relu", x)
        half = c_out // 2
        a = f.op("Conv", y, f.param(half, c_in, 1, 1), kernel_shape=[1, 1], strides=[2, 2])
        shifted = f.op("Slice", y, f.op("Constant", value_ints=[1, 1]),
                       f.op("Constant", value_ints=[_BIG, _BIG]), f.op("Constant", value_ints=[2, 3]))
        z = f.op("Conv", shifted, f.param(half, c_in, 1, 1), kernel_shape=[1, 1], strides=[2, 2],
                 pads=[0, 0, 1, 1])
        return _bn(f, f.op("Concat", a, z, axis=1), c_out)
    return b.function(f"factorized_reduce_{_suffix(c_in, c_out, 1)}", 1, body)


def head(b: ModelBuilder, c: int, num_classes: int) -> str:
    """Global average pool, then a linear layer c→``num_classes`` with bias (DARTS' ImageNet head pools
    7×7 with AvgPool2d(7): the same on its 7×7 maps)."""
    def body(f, x):
        y = f.op("Flatten", f.op("GlobalAveragePool", x), axis=1)
        return f.op("Gemm", y, f.param(num_classes, c), f.param(num_classes), transB=1)
    return b.function(f"head_{c}", 1, body)


def _op_none(b: ModelBuilder, f, x: str, spec: OpSpec, c: int, stride: int) -> str:
    if stride != 1:
        x = f.op("Slice", x, f.op("Constant", value_ints=[0, 0]), f.op("Constant", value_ints=[_BIG, _BIG]),
                 f.op("Constant", value_ints=[2, 3]), f.op("Constant", value_ints=[stride, stride]))
    return f.op("Mul", x, f.op("Constant", value_float=0.0))


def _op_pool(b: ModelBuilder, f, x: str, spec: OpSpec, c: int, stride: int) -> str:
    p = spec.k // 2
    attrs: dict[str, Any] = {"kernel_shape": [spec.k, spec.k], "pads": [p, p, p, p]}
    if stride != 1:
        attrs["strides"] = [stride, stride]
    return f.op(spec.pool, x, **attrs)  # AveragePool's count_include_pad defaults to 0, as in pycls


def _op_skip(b: ModelBuilder, f, x: str, spec: OpSpec, c: int, stride: int) -> str:
    return x if stride == 1 else f.call(factorized_reduce(b, c, c), x)


def _op_conv(b: ModelBuilder, f, x: str, spec: OpSpec, c: int, stride: int) -> str:
    return f.call(relu_conv_bn(b, c, c, spec.k, stride), x)


def _op_conv_fact(b: ModelBuilder, f, x: str, spec: OpSpec, c: int, stride: int) -> str:
    def body(g, y):
        y = g.conv(g.op("Relu", y), c, c, (1, spec.k), (1, stride))
        return _bn(g, g.conv(y, c, c, (spec.k, 1), (stride, 1)), c)
    name = f"conv_{spec.k}x1_1x{spec.k}_{_suffix(c, c, stride)}"
    return f.call(b.function(name, 1, body), x)


def _op_sep(b: ModelBuilder, f, x: str, spec: OpSpec, c: int, stride: int) -> str:
    def half(g, y, s):
        y = g.conv(g.op("Relu", y), c, c, spec.k, s, dilation=spec.dilation, groups=c)
        return _bn(g, g.conv(y, c, c), c)

    def body(g, y):
        return half(g, half(g, y, stride), 1)
    dil = "dil_" if spec.dilation != 1 else ""
    name = f"{dil}sep_conv_{spec.k}x{spec.k}_{_suffix(c, c, stride)}"
    return f.call(b.function(name, 1, body), x)


def _op_dil(b: ModelBuilder, f, x: str, spec: OpSpec, c: int, stride: int) -> str:
    def body(g, y):
        y = g.conv(g.op("Relu", y), c, c, spec.k, stride, dilation=spec.dilation, groups=c)
        return _bn(g, g.conv(y, c, c), c)
    return f.call(b.function(f"dil_conv_{spec.k}x{spec.k}_{_suffix(c, c, stride)}", 1, body), x)


_OP_BUILDERS: dict[str, Callable[..., str]] = {
    "none": _op_none, "pool": _op_pool, "skip": _op_skip, "conv": _op_conv, "conv_fact": _op_conv_fact,
    "sep": _op_sep, "dil": _op_dil,
}


def apply_op(b: ModelBuilder, f, x: str, op: str, c: int, stride: int) -> str:
    """The cell operation named ``op`` (a key of :data:`OPS`) on ``x`` of ``c`` channels, in scope ``f``."""
    spec = OPS[op]
    return _OP_BUILDERS[spec.kind](b, f, x, spec, c, stride)
