"""Build structural ONNX models directly with ``onnx.helper`` — fast, and with readable structure.

A *structural* model is ordinary ONNX with two conventions (see :mod:`exporters._materialize`):

* repeated blocks are ONNX local functions, defined once and called from the main graph;
* weights are ``param.Tensor <shape = [...]>`` placeholder nodes instead of initializers, so that
  functions can own their weights and the text carries shapes but no values.

Building with ``onnx.helper`` instead of tracing ``torch`` per architecture is what makes exporting a
thousand architectures take seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import onnx
from onnx import TensorProto, helper

#: Domain of the weight placeholder op; one node may declare several tensors of the same shape.
PARAM_DOMAIN = "param"
PARAM_OP = "Tensor"
#: Default standard opset for models we build.
DEFAULT_OPSET = 18


class _Scope:
    """Collects the nodes of one graph or function and hands out fresh value names."""

    def __init__(self, model: ModelBuilder, inputs: Sequence[str]) -> None:
        self.model = model
        self.inputs = list(inputs)
        self.nodes: list[onnx.NodeProto] = []
        self._count = 0

    def _fresh(self, n: int) -> list[str]:
        names = [f"v{self._count + i}" for i in range(n)]
        self._count += n
        return names

    def op(self, op_type: str, *inputs: str, n_out: int = 1, domain: str = "", **attrs) -> str | list[str]:
        """Append one node; returns its output name (or names when ``n_out > 1``)."""
        outputs = self._fresh(n_out)
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, domain=domain or None, **attrs))
        return outputs[0] if n_out == 1 else outputs

    def param(self, *shape: int, n: int = 1) -> str | list[str]:
        """Declare ``n`` weight tensors of ``shape`` (float32) — values come at materialisation."""
        return self.op(PARAM_OP, n_out=n, domain=PARAM_DOMAIN, shape=list(shape))

    def conv(self, x: str, c_in: int, c_out: int, kernel: int | tuple[int, int] = 1,
             stride: int | tuple[int, int] = 1, *, groups: int = 1, dilation: int = 1,
             bias: bool = False) -> str:
        """A 2-D convolution with "same" padding (``dilation * (k - 1) // 2`` per side) and its weights.

        Attributes left at their ONNX defaults are omitted, so texts stay short and canonical.
        """
        kernel = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
        stride = (stride, stride) if isinstance(stride, int) else tuple(stride)
        pads = [dilation * (k - 1) // 2 for k in kernel]
        attrs: dict[str, list[int] | int] = {"kernel_shape": list(kernel)}
        if any(pads):
            attrs["pads"] = pads + pads
        if stride != (1, 1):
            attrs["strides"] = list(stride)
        if dilation != 1:
            attrs["dilations"] = [dilation, dilation]
        if groups != 1:
            attrs["group"] = groups
        weights = [self.param(c_out, c_in // groups, *kernel)] + ([self.param(c_out)] if bias else [])
        return self.op("Conv", x, *weights, **attrs)

    def call(self, function: str, *inputs: str, n_out: int = 1) -> str | list[str]:
        """Call a local function previously defined with :meth:`ModelBuilder.function`."""
        return self.op(function, *inputs, n_out=n_out, domain=self.model.domain)


class ModelBuilder:
    """Assembles a main graph plus the local functions it calls (each defined once, by name)."""

    def __init__(self, name: str, domain: str, opset: int = DEFAULT_OPSET) -> None:
        self.name = name
        self.domain = domain
        self.opset = opset
        self._functions: dict[str, onnx.FunctionProto] = {}
        self.main = _Scope(self, ["x"])

    def function(self, name: str, n_inputs: int, body: Callable[..., str | Sequence[str]]) -> str:
        """Define function ``name`` once; ``body(scope, *input_names)`` returns its output name(s).

        Later calls with the same name reuse the definition, which is how a repeated block ends up
        appearing once in the text however deep the network is.
        """
        if name not in self._functions:
            scope = _Scope(self, [f"i{k}" for k in range(n_inputs)])
            out = body(scope, *scope.inputs)
            outputs = [out] if isinstance(out, str) else list(out)
            self._functions[name] = helper.make_function(
                self.domain, name, scope.inputs, outputs, scope.nodes, self._opset_imports()
            )
        return name

    def _opset_imports(self) -> list[onnx.OperatorSetIdProto]:
        return [helper.make_opsetid("", self.opset), helper.make_opsetid(PARAM_DOMAIN, 1),
                helper.make_opsetid(self.domain, 1)]

    def build(self, input_shape: Sequence[int], output: str, output_shape: Sequence[int]) -> onnx.ModelProto:
        """The finished structural model with float32 input ``x`` and output ``output``."""
        graph = helper.make_graph(
            self.main.nodes,
            self.name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(input_shape))],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, list(output_shape))],
        )
        model = helper.make_model(graph, opset_imports=self._opset_imports(),
                                  functions=list(self._functions.values()))
        model.ir_version = 10
        return model
