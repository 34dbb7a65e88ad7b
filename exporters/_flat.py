"""A structural model read once into plain Python: its local functions expanded, its weights as shapes.

Everything the free labels need (parameters, multiply–accumulates, the paths of the graph) is read off
the graph ``onnx.inliner`` would produce, but reading protobuf messages field by field from Python is
what made the labels slow: a model's blocks repeat (within one model and across a space's models), and
each copy was read again. Here every function body is parsed once per content into a
:class:`_Template` (kept in a bounded cache), and a model is expanded from its templates into a
:class:`FlatGraph`: one record per operator node, values named by integers, weights declared by shape.

Models whose functions take attribute parameters are inlined by ``onnx.inliner`` first and then read
the same way: the expansion does not substitute attributes. Nodes with subgraphs (``If``, ``Loop``) are
kept as single nodes, as the inliner keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx.inliner
from onnx import TensorProto, helper, numpy_helper

from exporters._builder import PARAM_DOMAIN, PARAM_OP

#: Function bodies parsed, by content; a space's models share most of them (stems, heads, edges).
_TEMPLATE_CACHE_SIZE = 4096
_templates: dict[bytes, _Template] = {}

#: ``FlatGraph.producer`` of a value that comes from a graph input, and of one no node computes
#: (a weight, an initializer, an input left empty).
SOURCE, NO_NODE = -1, -2


@dataclass(frozen=True)
class _Node:
    """One node of a template, as read from its proto."""

    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    has_subgraph: bool


@dataclass(frozen=True)
class _Template:
    """A graph or function body: its formal inputs and outputs and its nodes, in order."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[_Node, ...]


@dataclass
class FlatNode:
    """An operator node of the expanded graph; its inputs and outputs are value ids."""

    op_type: str
    domain: str
    attrs: dict[str, Any]
    inputs: list[int]
    outputs: list[int]


@dataclass
class FlatGraph:
    """The expanded graph of a model: what ``onnx.inliner`` would give, read into plain Python.

    Values are integers. ``producer[v]`` is the index of the node computing value ``v``, :data:`SOURCE`
    for a graph input and :data:`NO_NODE` for a weight or initializer. Weights (``param.Tensor`` outputs
    and initializers) are not nodes: ``weights`` maps each to its shape and ONNX element type, in
    declaration order. ``constants`` holds the values of ``Constant`` nodes' outputs.
    """

    nodes: list[FlatNode] = field(default_factory=list)
    producer: list[int] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    #: declared shape of each graph input (None where a dimension is not a fixed number)
    input_shapes: dict[int, list[int] | None] = field(default_factory=dict)
    weights: dict[int, tuple[list[int], int]] = field(default_factory=dict)
    constants: dict[int, np.ndarray] = field(default_factory=dict)
    #: whether a node has a subgraph (``If``, ``Loop``, ``Scan``), whose reads are not followed here
    has_subgraphs: bool = False

    def new_value(self, producer: int) -> int:
        self.producer.append(producer)
        return len(self.producer) - 1


class _NotExpandable(Exception):
    """The model uses something the template expansion does not follow; inline it with onnx first."""


def flatten(model: onnx.ModelProto) -> FlatGraph:
    """The model's graph with every local function call expanded, as a :class:`FlatGraph`."""
    try:
        return _flatten(model)
    except _NotExpandable:
        return _flatten(onnx.inliner.inline_local_functions(model))


def _flatten(model: onnx.ModelProto) -> FlatGraph:
    functions = {(f.domain, f.name): f for f in model.functions}
    flat = FlatGraph()
    graph = model.graph
    env: dict[str, int] = {}
    initialized = {init.name for init in graph.initializer}
    for init in graph.initializer:
        value = env[init.name] = flat.new_value(NO_NODE)
        flat.weights[value] = (list(init.dims), init.data_type)
    for vi in graph.input:
        if vi.name in initialized:
            continue
        value = env[vi.name] = flat.new_value(SOURCE)
        flat.inputs.append(value)
        dims = vi.type.tensor_type.shape.dim
        known = all(d.HasField("dim_value") for d in dims) and vi.type.tensor_type.HasField("shape")
        flat.input_shapes[value] = [d.dim_value for d in dims] if known else None
    main = _Template((), tuple(o.name for o in graph.output), tuple(_read_node(n) for n in graph.node))
    outputs = _expand(main, env, flat, functions, {})
    flat.outputs = [v for v in outputs if v is not None]
    return flat


def _expand(template: _Template, env: dict[str, int], flat: FlatGraph,
            functions: dict[tuple[str, str], onnx.FunctionProto],
            parsed: dict[tuple[str, str], _Template]) -> list[int | None]:
    """Append ``template``'s nodes to ``flat`` with its names bound by ``env`` (changed in place);
    returns the value ids of its outputs (None for an output nothing computes)."""
    for node in template.nodes:
        key = (node.domain, node.op_type)
        inputs = [env.get(name, -1) if name else -1 for name in node.inputs]
        if key in functions:
            callee = parsed.get(key) or parsed.setdefault(key, template_of(functions[key]))
            inner = {formal: v for formal, v in zip(callee.inputs, inputs, strict=False) if v >= 0}
            results = _expand(callee, inner, flat, functions, parsed)
            for name, value in zip(node.outputs, results, strict=False):
                if name and value is not None:
                    env[name] = value
        elif node.domain == PARAM_DOMAIN and node.op_type == PARAM_OP:
            shape = [int(d) for d in node.attrs["shape"]]
            dtype = int(node.attrs.get("dtype", TensorProto.FLOAT))
            for name in node.outputs:
                value = env[name] = flat.new_value(NO_NODE)
                flat.weights[value] = (shape, dtype)
        else:
            index = len(flat.nodes)
            outputs = []
            for name in node.outputs:
                value = flat.new_value(index)
                outputs.append(value)
                if name:
                    env[name] = value
            flat.has_subgraphs |= node.has_subgraph
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                constant = _constant_value(node.attrs)
                if constant is not None:
                    flat.constants[outputs[0]] = constant
            flat.nodes.append(FlatNode(node.op_type, node.domain, node.attrs,
                                       inputs, outputs))
    return [env.get(name) for name in template.outputs]


def template_of(function: onnx.FunctionProto) -> _Template:
    """The parsed body of ``function``, read once per content."""
    key = function.SerializeToString()
    template = _templates.get(key)
    if template is None:
        if function.attribute or function.attribute_proto:
            raise _NotExpandable(f"function {function.name} has attribute parameters")
        if len(_templates) >= _TEMPLATE_CACHE_SIZE:
            del _templates[next(iter(_templates))]  # the oldest
        template = _templates[key] = _Template(tuple(function.input), tuple(function.output),
                                               tuple(_read_node(n) for n in function.node))
    return template


def _read_node(node: onnx.NodeProto) -> _Node:
    attrs = {}
    for attribute in node.attribute:
        if attribute.ref_attr_name:
            raise _NotExpandable(f"node {node.name or node.op_type} refers to a function attribute")
        attrs[attribute.name] = helper.get_attribute_value(attribute)
    subgraph = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
    return _Node(node.op_type, node.domain, tuple(node.input), tuple(node.output), attrs, subgraph)


def _constant_value(attrs: dict[str, Any]) -> np.ndarray | None:
    """The value of a ``Constant`` node from its attributes (None for a sparse one)."""
    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    for name, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                        ("value_int", np.int64), ("value_ints", np.int64)):
        if name in attrs:
            return np.asarray(attrs[name], dtype=dtype)
    return None
