"""A structural model read once into plain Python: its local functions expanded, its weights as shapes.

Everything the free labels need (parameters, multiply–accumulates, the paths of the graph) is read off
the graph ``onnx.inliner`` would produce, but reading protobuf messages field by field from Python is
what made the labels slow: a model's blocks repeat (within one model and across a space's models), and
each copy was read again. Here every function body is parsed once per content into a
:class:`_Template` and expanded once per content and callees into a :class:`_Fragment` (both kept in
bounded caches); a model's graph is its main graph with each call replaced by a copy of the callee's
fragment, renumbered: a :class:`FlatGraph`, one record per operator node, values named by integers,
weights declared by shape.

Models whose functions take attribute parameters are inlined by ``onnx.inliner`` first and then read
the same way: the expansion does not substitute attributes. Nodes with subgraphs (``If``, ``Loop``) are
kept as single nodes, as the inliner keeps them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx.inliner
from onnx import TensorProto, helper, numpy_helper

from exporters._builder import PARAM_DOMAIN, PARAM_OP
from exporters._cache import BoundedCache

#: Function bodies parsed, by content; a space's models share most of them (stems, heads, edges).
_templates: BoundedCache = BoundedCache(4096)

#: ``FlatGraph.producer`` of a value that comes from a graph input (or a function body's formal input,
#: in the graph of that body alone), and of one no node computes (a weight, an initializer).
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
    #: a ``param.Tensor`` node's shape and element type
    param: tuple[list[int], int] | None
    #: a ``Constant`` node's value
    constant: np.ndarray | None


@dataclass(frozen=True)
class _Template:
    """A graph or function body: its formal inputs and outputs and its nodes, in order."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[_Node, ...]
    #: a number no other template parsed in this process has
    serial: int
    #: the serialized body less its name, its weights' shapes and the names of the functions or custom
    #: operators it calls (in domains other than ONNX's): what its paths depend on, but for its callees
    structure: bytes


@dataclass(slots=True)
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
        """A new value id, computed by node ``producer`` (or SOURCE, NO_NODE)."""
        self.producer.append(producer)
        return len(self.producer) - 1


class NotExpandable(Exception):
    """The model uses something the template expansion does not follow; inline it with onnx first."""


def flatten(model: onnx.ModelProto) -> FlatGraph:
    """The model's graph with every local function call expanded, as a :class:`FlatGraph`."""
    try:
        return _flatten(model)
    except NotExpandable:
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
    main = _Template((), tuple(o.name for o in graph.output), tuple(_read_node(n) for n in graph.node),
                     -1, b"")
    outputs = _expand(main, env, flat, functions, {})
    flat.outputs = [v for v in outputs if v is not None]
    return flat


@dataclass
class _Fragment:
    """A function body expanded once, its values numbered from 0: first its formal inputs, then what
    its nodes compute (its own and its callees'); pasted into a graph by :func:`_paste`. Its ``graph``
    is the body as a graph of its own, the formal inputs its inputs (never to be changed: shared)."""

    inputs: int
    graph: FlatGraph
    outputs: list[int | None]
    serial: int


#: Function bodies expanded, by template and the fragments of their callees.
_fragments: BoundedCache = BoundedCache(4096)
_serials = itertools.count()


def _expand(template: _Template, env: dict[str, int], flat: FlatGraph,
            functions: dict[tuple[str, str], onnx.FunctionProto],
            bound: dict[tuple[str, str], _Fragment]) -> list[int | None]:
    """Append ``template``'s nodes to ``flat`` with its names bound by ``env`` (changed in place);
    returns the value ids of its outputs (None for an output nothing computes). ``bound``: the
    fragments of the model's functions met so far."""
    producer = flat.producer
    for node in template.nodes:
        inputs = [env.get(name, -1) if name else -1 for name in node.inputs]
        key = (node.domain, node.op_type)
        if key in functions:
            results = _paste(_fragment_of(key, functions, bound), inputs, flat)
            for name, value in zip(node.outputs, results, strict=False):
                if name and value is not None:
                    env[name] = value
        elif node.param is not None:
            for name in node.outputs:
                value = env[name] = len(producer)
                producer.append(NO_NODE)
                flat.weights[value] = node.param
        else:
            index = len(flat.nodes)
            outputs = list(range(len(producer), len(producer) + len(node.outputs)))
            producer.extend([index] * len(outputs))
            for name, value in zip(node.outputs, outputs, strict=True):
                if name:
                    env[name] = value
            if node.has_subgraph:
                flat.has_subgraphs = True
            if node.constant is not None:
                flat.constants[outputs[0]] = node.constant
            flat.nodes.append(FlatNode(node.op_type, node.domain, node.attrs, inputs, outputs))
    return [env.get(name) for name in template.outputs]


def flatten_function(model: onnx.ModelProto, name: str, domain: str) -> FlatGraph:
    """The body of local function ``domain.name`` of ``model`` (its calls expanded) as a graph of its own:
    the function's inputs are its inputs, its outputs its outputs. Shared: not to be changed.

    Raises:
        NotExpandable: the function or one it calls takes attribute parameters.
    """
    functions = {(f.domain, f.name): f for f in model.functions}
    return _fragment_of((domain, name), functions, {}).graph


def _fragment_of(key: tuple[str, str], functions: dict[tuple[str, str], onnx.FunctionProto],
                 bound: dict[tuple[str, str], _Fragment]) -> _Fragment:
    """The expanded body of function ``key`` of a model, built once per content and callees."""
    if key in bound:
        return bound[key]
    template = template_of(functions[key])
    callees = [_fragment_of((n.domain, n.op_type), functions, bound).serial
               for n in template.nodes if (n.domain, n.op_type) in functions]
    identity = (template.serial, *callees)
    fragment = _fragments.get(identity)
    if fragment is None:
        graph = FlatGraph(producer=[SOURCE] * len(template.inputs), inputs=list(range(len(template.inputs))))
        inner = {name: k for k, name in enumerate(template.inputs)}
        outputs = _expand(template, inner, graph, functions, bound)
        graph.outputs = [v for v in outputs if v is not None]
        fragment = _fragments[identity] = _Fragment(len(template.inputs), graph, outputs, next(_serials))
    bound[key] = fragment
    return fragment


def _paste(fragment: _Fragment, inputs: list[int], flat: FlatGraph) -> list[int | None]:
    """Append a copy of ``fragment`` to ``flat``, its formal inputs bound to ``inputs`` (-1: none);
    returns the value ids of its outputs."""
    part, first_node = fragment.graph, len(flat.nodes)
    bound = [*inputs[: fragment.inputs], *[-1] * (fragment.inputs - len(inputs))]
    ids = [*bound, *range(len(flat.producer), len(flat.producer) + len(part.producer) - fragment.inputs)]
    flat.producer.extend([p + first_node if p >= 0 else p for p in part.producer[fragment.inputs:]])
    flat.nodes.extend([FlatNode(n.op_type, n.domain, n.attrs, [ids[v] if v >= 0 else -1 for v in n.inputs],
                                [ids[v] for v in n.outputs]) for n in part.nodes])
    for value, weight in part.weights.items():
        flat.weights[ids[value]] = weight
    for value, constant in part.constants.items():
        flat.constants[ids[value]] = constant
    flat.has_subgraphs |= part.has_subgraphs
    return [ids[v] if v is not None else None for v in fragment.outputs]


def template_of(function: onnx.FunctionProto) -> _Template:
    """The parsed body of ``function``, read once per content."""
    key = function.SerializeToString()
    template = _templates.get(key)
    if template is None:
        if function.attribute or function.attribute_proto:
            raise NotExpandable(f"function {function.name} has attribute parameters")
        template = _templates[key] = _Template(tuple(function.input), tuple(function.output),
                                               tuple(_read_node(n) for n in function.node),
                                               next(_serials), _structure(function))
    return template


def _structure(function: onnx.FunctionProto) -> bytes:
    stripped = onnx.FunctionProto()
    stripped.CopyFrom(function)
    stripped.name = ""
    for node in stripped.node:
        if node.domain == PARAM_DOMAIN and node.op_type == PARAM_OP:
            kept = [a for a in node.attribute if a.name != "shape"]
            del node.attribute[:]
            node.attribute.extend(kept)
        elif node.domain not in ("", "ai.onnx"):
            node.op_type = ""
    return stripped.SerializeToString()


def _read_node(node: onnx.NodeProto) -> _Node:
    attrs = {}
    for attribute in node.attribute:
        if attribute.ref_attr_name:  # in a function body read as a graph of its own: nothing to fill it
            continue
        attrs[attribute.name] = helper.get_attribute_value(attribute)
    subgraph = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
    param = constant = None
    if node.domain == PARAM_DOMAIN and node.op_type == PARAM_OP:
        param = ([int(d) for d in attrs["shape"]], int(attrs.get("dtype", TensorProto.FLOAT)))
    elif node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        constant = _constant_value(attrs)
    return _Node(node.op_type, node.domain, tuple(node.input), tuple(node.output), attrs, subgraph,
                 param, constant)


def _constant_value(attrs: dict[str, Any]) -> np.ndarray | None:
    """The value of a ``Constant`` node from its attributes (None for a sparse one)."""
    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    for name, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                        ("value_int", np.int64), ("value_ints", np.int64)):
        if name in attrs:
            return np.asarray(attrs[name], dtype=dtype)
    return None
