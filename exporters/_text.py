"""Canonical ONNX text: the string the regression model reads.

Faithful (every node, attribute and declared shape; weights as ``param.Tensor`` shape declarations),
deterministic (canonical value names, no node names or doc strings) and compact (repeated blocks are
local functions printed once; attribute type annotations and indentation dropped). Intermediate
shapes are not printed: ``onnx.shape_inference`` recovers them from the declared ones.
"""

from __future__ import annotations

import re

import onnx
import onnx.parser
import onnx.printer
from onnx import helper

from exporters._builder import PARAM_DOMAIN, PARAM_OP
from exporters._cache import BoundedCache

# "kernel_shape: ints = [3, 3]" -> "kernel_shape = [3, 3]": the parser reads integer literals back as
# ints. Float and string annotations stay ("value_float: float = 0" would come back as an int).
_ATTR_TYPE = re.compile(r"(\w+): (?:ints|int) = ")
_INDENT = re.compile(r"^\s+", re.MULTILINE)
# ", " -> "," except inside string literals.
_COMMA_SPACE = re.compile(r'"[^"]*"|, ')


def to_text(model: onnx.ModelProto) -> str:
    """Canonical text of a structural or executable model (initializers become placeholders)."""
    model = canonicalize(model)
    text = onnx.printer.to_text(model)
    text = _ATTR_TYPE.sub(r"\1 = ", text)
    text = _INDENT.sub("", text)
    text = text.replace("<\n", "<").replace("\n>", ">").replace(",\n", ",").replace(")\n{", ") {")
    text = text.replace(",opset_import: []>", ">")
    return _COMMA_SPACE.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else ",", text)


def from_text(text: str) -> onnx.ModelProto:
    """Parse canonical text back into a structural model (``materialize`` makes it executable).

    Functions printed without their own opset imports share the model's, as :func:`canonicalize`
    left them.
    """
    model = onnx.parser.parse_model(text)
    for function in model.functions:
        if not function.opset_import:
            function.opset_import.extend(model.opset_import)
    return model


def canonicalize(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with weights as placeholders and every name, doc string and extra field normalised."""
    out = onnx.ModelProto()
    out.ir_version = model.ir_version
    out.opset_import.extend(model.opset_import)
    graph = out.graph
    graph.CopyFrom(model.graph)
    if graph.initializer:
        _initializers_to_placeholders(graph)
        if not any(o.domain == PARAM_DOMAIN for o in out.opset_import):
            out.opset_import.append(helper.make_opsetid(PARAM_DOMAIN, 1))
    del graph.value_info[:], graph.metadata_props[:]
    graph.ClearField("doc_string")
    _rename(graph.node, graph.input, graph.output)
    header = sorted(map(_opset_key, out.opset_import))
    for function in model.functions:
        key = (function.SerializeToString(), tuple(header))
        canonical = _functions.get(key)
        if canonical is None:
            canonical = _functions[key] = _canonical_function(function, header)
        out.functions.add().CopyFrom(canonical)
    return out


#: Functions in canonical form, by content and the model's opset imports: a space's models share most.
_functions: BoundedCache = BoundedCache(4096)


def _canonical_function(function: onnx.FunctionProto, header: list[tuple[str, int]]) -> onnx.FunctionProto:
    f = onnx.FunctionProto()
    f.CopyFrom(function)
    f.ClearField("doc_string")
    if sorted(map(_opset_key, f.opset_import)) == header:
        del f.opset_import[:]  # printed once, in the model header
    del f.value_info[:]
    inputs, outputs = list(f.input), list(f.output)
    mapping = _rename(f.node, inputs, outputs)
    del f.input[:], f.output[:]
    f.input.extend(mapping[n] for n in inputs)
    f.output.extend(mapping[n] for n in outputs)
    return f


def _opset_key(opset: onnx.OperatorSetIdProto) -> tuple[str, int]:
    return opset.domain, opset.version


def _initializers_to_placeholders(graph: onnx.GraphProto) -> None:
    """Replace each initializer by a shape-only ``param.Tensor`` node placed before its first use."""
    inits = {init.name: init for init in graph.initializer}
    graph_inputs = {vi.name for vi in graph.input}
    nodes: list[onnx.NodeProto] = []
    declared: set[str] = set()
    for node in graph.node:
        for name in node.input:
            if name in inits and name not in declared and name not in graph_inputs:
                declared.add(name)
                init = inits[name]
                attrs = {"shape": list(init.dims)}
                if init.data_type != onnx.TensorProto.FLOAT:
                    attrs["dtype"] = init.data_type
                nodes.append(helper.make_node(PARAM_OP, [], [name], domain=PARAM_DOMAIN, **attrs))
        nodes.append(node)
    del graph.initializer[:]
    del graph.node[:]
    graph.node.extend(nodes)


def _rename(nodes, inputs, outputs) -> dict[str, str]:
    """Rename values in order of appearance: inputs ``x``/``x1``…, weights ``w…``, others ``t…``.

    Outputs of the scope are renamed ``y``/``y1``…. Works for graphs (ValueInfo lists) and
    functions (name lists); subgraphs of control-flow ops are left as they are.
    """
    def name_of(item) -> str:
        return item if isinstance(item, str) else item.name

    out_names = [name_of(o) for o in outputs]
    mapping: dict[str, str] = {"": ""}
    for k, item in enumerate(inputs):
        mapping[name_of(item)] = "x" if k == 0 else f"x{k}"
    for k, name in enumerate(out_names):
        mapping.setdefault(name, "y" if k == 0 else f"y{k}")
    counters = {"w": 0, "t": 0}
    for node in nodes:
        node.ClearField("name")
        node.ClearField("doc_string")
        node.ClearField("metadata_props")
        is_param = node.domain == PARAM_DOMAIN and node.op_type == PARAM_OP
        for name in node.output:
            if name not in mapping:
                prefix = "w" if is_param else "t"
                mapping[name] = f"{prefix}{counters[prefix]}"
                counters[prefix] += 1
    for node in nodes:
        new_in, new_out = [mapping.get(n, n) for n in node.input], [mapping[n] for n in node.output]
        del node.input[:], node.output[:]
        node.input.extend(new_in)
        node.output.extend(new_out)
    for item in list(inputs) + list(outputs):
        if not isinstance(item, str):
            item.name = mapping[item.name]
    return mapping
