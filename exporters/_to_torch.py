"""Run an executable ONNX model as a trainable ``torch.nn.Module``.

Every search space builds its networks once, as ONNX; :func:`onnx_to_torch` turns that same model into
a module whose parameters are the model's weights, so the network a search found can be trained (and
exported again) without a second definition that could disagree with the first. The module walks the
graph node by node in ``forward``; ONNX ``BatchNormalization`` becomes batch normalisation that uses
batch statistics and updates its running ones in training mode, as ``torch.nn.BatchNorm2d`` does.

Weights that are floating point become parameters, except BatchNorm running mean and variance
(buffers, as in torch); ``Constant`` nodes and integer initializers become non-persistent buffers.
Shapes, slice bounds and clip limits must be constants, as they are in every model ``ModelBuilder`` or
:func:`~exporters.torch_to_onnx` writes. ``torch`` is imported here only, so ``import exporters``
stays torch-free.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper
from torch import nn

__all__ = ["OnnxModule", "SUPPORTED_OPS", "onnx_to_torch"]

_BN_STATS = (3, 4)  # BatchNormalization inputs: X, scale, B, input_mean, input_var
_ABSENT = np.empty(0)  # an optional input left out (empty name)


def onnx_to_torch(model: onnx.ModelProto) -> OnnxModule:
    """A trainable module computing what ``model`` computes (one input, its first output).

    ``model`` must be executable: local functions inlined and every weight an initializer (what
    ``SearchSpace.to_onnx`` and :func:`~exporters.materialize` return). Raises ``NotImplementedError``
    naming the first node whose operator is not in :data:`SUPPORTED_OPS`.
    """
    return OnnxModule(model)


class OnnxModule(nn.Module):
    """An ONNX graph as a module: weights as parameters and buffers, nodes run in graph order."""

    def __init__(self, model: onnx.ModelProto) -> None:
        super().__init__()
        graph = model.graph
        if model.functions:
            raise ValueError("inline the model's local functions first (exporters.materialize does)")
        weights = {init.name for init in graph.initializer}
        inputs = [i.name for i in graph.input if i.name not in weights]
        if len(inputs) != 1:
            raise ValueError(f"a model with exactly one input is needed, this one has {len(inputs)}: "
                             f"{inputs}")
        self.input_name, self.output_name = inputs[0], graph.output[0].name
        stats = {node.input[i] for node in graph.node if node.op_type == "BatchNormalization"
                 for i in _BN_STATS if i < len(node.input)}
        self._tensors: dict[str, str] = {}  # ONNX value name -> attribute holding it
        self._constants: dict[str, np.ndarray] = {}  # values known before the first forward
        for init in graph.initializer:
            value = numpy_helper.to_array(init)
            self._constants[init.name] = value  # its value now; a parameter's may change with training
            if np.issubdtype(value.dtype, np.floating) and init.name not in stats:
                self._add(init.name, nn.Parameter(torch.from_numpy(value.copy())))
            else:
                self._add(init.name, torch.from_numpy(value.copy()), persistent=init.name in stats)
        self._steps: list[tuple[Callable[..., Any], list[str], list[str]]] = []
        for node in graph.node:
            if node.op_type == "Constant":
                value = _constant_value(node)
                self._constants[node.output[0]] = value
                self._add(node.output[0], torch.from_numpy(np.array(value)), persistent=False)
                continue
            build = _OPS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
            if build is None:
                raise NotImplementedError(
                    f"ONNX operator {node.op_type!r} (node {node.name or node.output[0]!r}) is not supported "
                    f"by onnx_to_torch; supported: {', '.join(SUPPORTED_OPS)}")
            if len([o for o in node.output if o]) > 1:
                raise NotImplementedError(f"{node.op_type} node {node.name or node.output[0]!r} has several "
                                          "outputs; onnx_to_torch runs nodes with one")
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            static = [self._constants.get(name) if name else _ABSENT for name in node.input]
            self._steps.append((build(self, attrs, static), list(node.input), list(node.output)))

    @property
    def onnx_names(self) -> dict[str, str]:
        """The ONNX name of each weight and constant, by the attribute that holds it here."""
        return {attr: name for name, attr in self._tensors.items()}

    def _add(self, onnx_name: str, value: torch.Tensor, *, persistent: bool = True) -> None:
        safe = re.sub(r"\W", "_", onnx_name) or "_"
        if safe[0].isdigit():
            safe = "_" + safe
        while hasattr(self, safe):
            safe += "_"
        if isinstance(value, nn.Parameter):
            self.register_parameter(safe, value)
        else:
            self.register_buffer(safe, value, persistent=persistent)
        self._tensors[onnx_name] = safe

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values: dict[str, Any] = {name: getattr(self, attr) for name, attr in self._tensors.items()}
        values[self.input_name] = x
        for run, inputs, outputs in self._steps:
            values[outputs[0]] = run(*(values[name] if name else None for name in inputs))
        return values[self.output_name]


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    attr = node.attribute[0]
    value = helper.get_attribute_value(attr)
    if attr.name == "value":
        return numpy_helper.to_array(value)
    dtypes = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
              "value_ints": np.int64}
    if attr.name not in dtypes:
        raise NotImplementedError(f"Constant node {node.name or node.output[0]!r}: attribute {attr.name!r}")
    return np.array(value, dtype=dtypes[attr.name])


def _needs(static: Sequence[np.ndarray | None], k: int, op: str, what: str) -> np.ndarray | None:
    """The constant value of input ``k`` (``None`` where the input is absent); an error if not constant."""
    if k >= len(static) or static[k] is _ABSENT:
        return None
    if static[k] is None:
        raise NotImplementedError(f"{op}: its {what} must be a constant or an initializer")
    return static[k]


def _padding(pads: Sequence[int] | None, rank: int) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """Symmetric padding for torch's ``padding=``, or zeros and an ``F.pad`` tuple where it is not."""
    pads = list(pads or [0] * (2 * rank))
    begins, ends = pads[:rank], pads[rank:]
    if begins == ends:
        return tuple(begins), None
    extra: list[int] = []
    for b, e in zip(reversed(begins), reversed(ends), strict=True):  # F.pad counts from the last axis
        extra += [b, e]
    return (0,) * rank, tuple(extra)


def _no_auto_pad(attrs: dict[str, Any], op: str) -> None:
    auto = attrs.get("auto_pad", b"NOTSET")
    if (auto.decode() if isinstance(auto, bytes) else auto) != "NOTSET":
        raise NotImplementedError(f"{op}: auto_pad={auto!r}; give explicit pads")


def _conv(module: OnnxModule, attrs: dict[str, Any], static: list) -> Callable[..., torch.Tensor]:
    _no_auto_pad(attrs, "Conv")
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        rank = w.dim() - 2
        padding, extra = _padding(attrs.get("pads"), rank)
        if extra is not None:
            x = F.pad(x, extra)
        return conv[rank](x, w, b, stride=attrs.get("strides", 1), padding=padding,
                          dilation=attrs.get("dilations", 1), groups=attrs.get("group", 1))
    return run


def _pool(kind: str) -> Callable[..., Callable[..., torch.Tensor]]:
    def build(module: OnnxModule, attrs: dict[str, Any], static: list) -> Callable[..., torch.Tensor]:
        _no_auto_pad(attrs, kind)
        kernel = list(attrs["kernel_shape"])
        rank = len(kernel)
        padding, extra = _padding(attrs.get("pads"), rank)
        strides = list(attrs.get("strides", [1] * rank))
        ceil = bool(attrs.get("ceil_mode", 0))
        if kind == "MaxPool":
            pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[rank]
            dilation = list(attrs.get("dilations", [1] * rank))

            def run(x: torch.Tensor) -> torch.Tensor:
                if extra is not None:
                    x = F.pad(x, extra, value=-math.inf)
                return pool(x, kernel, strides, padding, dilation, ceil_mode=ceil)
            return run
        average = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[rank]
        include_pad = bool(attrs.get("count_include_pad", 0))
        if extra is not None and not include_pad:
            raise NotImplementedError("AveragePool with uneven pads that are not counted")

        def average_run(x: torch.Tensor) -> torch.Tensor:
            if extra is not None:
                x = F.pad(x, extra)
            return average(x, kernel, strides, padding, ceil_mode=ceil, count_include_pad=include_pad)
        return average_run
    return build


def _batch_norm(module: OnnxModule, attrs: dict[str, Any], static: list) -> Callable[..., torch.Tensor]:
    eps, momentum = float(attrs.get("epsilon", 1e-5)), float(attrs.get("momentum", 0.9))

    def run(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, mean: torch.Tensor,
            var: torch.Tensor) -> torch.Tensor:
        # ONNX keeps momentum * running + (1 - momentum) * batch; torch weighs the batch by its momentum
        # (and, as torch does, the running variance takes the batch's unbiased variance)
        return F.batch_norm(x, mean, var, scale, bias, training=module.training, momentum=1 - momentum,
                            eps=eps)
    return run


def _gemm(module: OnnxModule, attrs: dict[str, Any], static: list) -> Callable[..., torch.Tensor]:
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    trans_a, trans_b = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))

    def run(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        y = (a.t() if trans_a else a) @ (b.t() if trans_b else b)
        if alpha != 1.0:
            y = alpha * y
        return y if c is None else y + (beta * c if beta != 1.0 else c)
    return run


def _clip(module: OnnxModule, attrs: dict[str, Any], static: list) -> Callable[..., torch.Tensor]:
    low, high = _needs(static, 1, "Clip", "min"), _needs(static, 2, "Clip", "max")
    lo = float(low) if low is not None else attrs.get("min")
    hi = float(high) if high is not None else attrs.get("max")
    return lambda x, *_: torch.clamp(x, lo, hi)


def _reshape(module: OnnxModule, attrs: dict[str, Any], static: list) -> Callable[..., torch.Tensor]:
    shape = [int(s) for s in _needs(static, 1, "Reshape", "shape")]  # type: ignore[union-attr]
    keep_zero = bool(attrs.get("allowzero", 0))

    def run(x: torch.Tensor, _: Any) -> torch.Tensor:
        return x.reshape([x.shape[i] if s == 0 and not keep_zero else s for i, s in enumerate(shape)])
    return run


def _slice(module: OnnxModule, attrs: dict[str, Any], static: list) -> Callable[..., torch.Tensor]:
    starts = [int(v) for v in _needs(static, 1, "Slice", "starts")]  # type: ignore[union-attr]
    ends = [int(v) for v in _needs(static, 2, "Slice", "ends")]  # type: ignore[union-attr]
    axes_value, steps_value = _needs(static, 3, "Slice", "axes"), _needs(static, 4, "Slice", "steps")
    axes = [int(v) for v in axes_value] if axes_value is not None else list(range(len(starts)))
    steps = [int(v) for v in steps_value] if steps_value is not None else [1] * len(starts)
    if any(s < 1 for s in steps):
        raise NotImplementedError("Slice with steps below 1")

    def run(x: torch.Tensor, *_: Any) -> torch.Tensor:
        index = [slice(None)] * x.dim()
        for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
            index[axis] = slice(start, end, step)
        return x[tuple(index)]
    return run


def _flatten(module: OnnxModule, attrs: dict[str, Any], static: list) -> Callable[..., torch.Tensor]:
    axis = int(attrs.get("axis", 1))
    return lambda x: x.reshape(math.prod(x.shape[:axis]), -1)


_Run = Callable[..., torch.Tensor]


def _simple(fn: _Run) -> Callable[..., _Run]:
    return lambda module, attrs, static: fn


def _with_attrs(fn: Callable[[dict[str, Any]], _Run]) -> Callable[..., _Run]:
    return lambda module, attrs, static: fn(attrs)


def _sum(*xs: torch.Tensor) -> torch.Tensor:
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total


_OPS: dict[str, Callable[[OnnxModule, dict[str, Any], list], Callable[..., Any]]] = {
    "Add": _simple(torch.add),
    "AveragePool": _pool("AveragePool"),
    "BatchNormalization": _batch_norm,
    "Clip": _clip,
    "Concat": _with_attrs(lambda a: lambda *xs: torch.cat(xs, dim=int(a["axis"]))),
    "Conv": _conv,
    "Div": _simple(torch.div),
    "Flatten": _flatten,
    "Gemm": _gemm,
    "GlobalAveragePool": _simple(lambda x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True)),
    "HardSigmoid": _with_attrs(lambda a: lambda x: torch.clamp(float(a.get("alpha", 0.2)) * x
                                                               + float(a.get("beta", 0.5)), 0.0, 1.0)),
    "HardSwish": _simple(F.hardswish),
    "Identity": _simple(lambda x: x),
    "MatMul": _simple(torch.matmul),
    "MaxPool": _pool("MaxPool"),
    "Mul": _simple(torch.mul),
    "Relu": _simple(F.relu),
    "Reshape": _reshape,
    "Sigmoid": _simple(torch.sigmoid),
    "Slice": _slice,
    "Sub": _simple(torch.sub),
    "Sum": _simple(_sum),
    "Tanh": _simple(torch.tanh),
    "Transpose": _with_attrs(lambda a: lambda x: x.permute(list(a["perm"])) if "perm" in a
                             else x.permute(list(reversed(range(x.dim()))))),
}
#: ONNX operators :func:`onnx_to_torch` runs (``Constant`` besides: folded when the module is built).
SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(_OPS))
