"""Structural counts of an executable model's graph: operator families along its input→output paths.

Strong predictors of NAS-Bench accuracy are built from features like these (GRAF, ICML 2024: operation
counts on input→output paths, the shortest and longest path). Here they are read off any ONNX graph,
with no knowledge of the search space it came from, so every space gets them for free: the regression
model learns to read the graph by predicting them, and the prior takes them as inputs.

A *path* is a chain of live nodes from a graph input to a graph output along tensors (weights are not
path sources, and no path passes through a product with a constant zero, how NB201 writes a ``none``
edge into an otherwise unconnected node). For each operator family the features say how many such
nodes there are, and how many a path meets: on average over all paths, at least and at most. Path
counts grow exponentially with depth in stacked cells, so they are reported as a base-10 logarithm.

A model built with local functions (as :class:`~exporters.ModelBuilder` writes repeated blocks, and every
built-in space does: NB201's cells, FBNet's blocks) is also read block by block: for each call of a
function in the main graph, the paths through that function's body from its inputs to its outputs,
and how many of them meet each family; summed over the calls. That is a cell's own path structure
(e.g. how many of its paths are only skips and pooling), which whole-graph counts blur: paths multiply
across stacked cells. Per block, too, the *order* of families along its paths: how often a node of one
family is followed by a node of another, with no node of any family between them (``block_pair_a_b``;
``start`` and ``end`` stand for the block's inputs and outputs, so ``block_pair_start_end`` counts the
paths that meet no family at all). A path ``conv1 → conv3 → pool`` adds one to ``start_conv1``,
``conv1_conv3``, ``conv3_pool`` and ``pool_end``. Counts of operators per path say *what* a cell
computes; these pairs say in which order, which is what path encodings of NAS-Bench-101 cells add.

Last, per family, every node of the graph (``{family}_all``), live or not. Paths leave out a branch whose
value no output depends on (in NB201, an operation into a node with no live edge out), but the network a
device runs computes it, and published latencies count it: NB201's eyeriss and fpga latencies are a sum
over every edge's operation, live or not (experiments/README.md, "Under a latency budget").
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import onnx
from onnx import helper, numpy_helper

from exporters._builder import PARAM_DOMAIN
from exporters._cache import BoundedCache
from exporters._flat import (
    NO_NODE,
    SOURCE,
    FlatGraph,
    FlatNode,
    NotExpandable,
    flatten,
    flatten_function,
    template_of,
)
from exporters._flops import macs_of, parameters_of

#: Function bodies whose block features are kept, by structure: a space's models share most of their
#: blocks (stems, heads, reductions), so a batch of them reads each shared body once.
_body_cache: BoundedCache = BoundedCache(4096)

#: Operator families, in feature order. Compute families (convolutions, fully connected) also make up
#: the path lengths.
FAMILIES = ("conv1", "conv3", "conv5", "dwconv", "fc", "pool")
_COMPUTE = frozenset({"conv1", "conv3", "conv5", "dwconv", "fc"})
_POOLS = frozenset({"AveragePool", "MaxPool", "LpPool"})

#: Names of :func:`graph_features`' values, in order.
FEATURE_NAMES: tuple[str, ...] = (
    "log10_paths", "compute_path_min", "compute_path_max", "compute_path_mean",
    *(f"{family}_{stat}" for family in FAMILIES for stat in ("nodes", "path_mean", "path_min", "path_max")),
    "segments", "segment_paths", *(f"segment_paths_{family}" for family in (*FAMILIES, "compute")),
    "blocks", "block_paths", *(f"block_paths_{family}" for family in (*FAMILIES, "compute")),
    "block_compute_min", "block_compute_max",
    *(f"block_pair_{a}_{b}" for a in ("start", *FAMILIES) for b in (*FAMILIES, "end")),
    *(f"{family}_all" for family in FAMILIES),
)


def _is_zero_constant(node: FlatNode) -> bool:
    """Whether ``node`` is a Constant whose value is all zeros (e.g. NB201's ``none`` edge: ``x * 0``)."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
        return False
    for value in node.attrs.values():
        if isinstance(value, onnx.TensorProto):
            return not numpy_helper.to_array(value).any()
        if isinstance(value, (int, float)):
            return value == 0
        if isinstance(value, (list, tuple)):
            return bool(value) and not any(value)
    return False


def family(node: FlatNode) -> str | None:
    """The operator family of ``node`` (see :data:`FAMILIES`), or None for everything else.

    Convolutions are split by kernel (1, 3, 5 and wider) and whether they are grouped (depthwise and
    grouped convolutions read few input channels each); global pooling is not a family (it ends every
    network the same way).
    """
    if node.op_type == "Conv":
        if int(node.attrs.get("group", 1)) > 1:
            return "dwconv"
        kernel = max(int(k) for k in node.attrs.get("kernel_shape", [1]))
        return "conv1" if kernel <= 1 else "conv3" if kernel <= 3 else "conv5"
    if node.op_type in ("Gemm", "MatMul"):
        return "fc"
    if node.op_type in _POOLS:
        return "pool"
    return None


def graph_features(model: onnx.ModelProto, flat: FlatGraph | None = None) -> dict[str, float]:
    """:data:`FEATURE_NAMES` → value, for a structural or executable model (local functions allowed).

    A model whose output does not depend on its input has no paths: its path features are all 0.

    Whole-graph features count along complete input→output paths. Stacked cells multiply paths, so the
    ``segment_*`` features also cut the graph at every node that all paths pass through (between cells,
    at a stem or a head) and add up what each segment holds: how many paths cross it, and how many of
    those meet at least one node of each family. That recovers a cell's own path counts (e.g. a cell
    path made only of skips and pooling) without knowing where its cells are. Every value is finite;
    a family absent from the graph has zeros. ``flat``: the model already flattened, to read it once.
    """
    flat = flat if flat is not None else flatten(model)
    out = _path_features(_Dag(flat))
    out.update(_block_features(model))
    out.update(_all_counts(flat))
    return {name: float(out[name]) for name in FEATURE_NAMES}


def _path_features(dag: _Dag) -> dict[str, float]:
    """The whole-graph and segment features of a flattened model."""
    paths_in, paths_out, ends = dag.paths_in, dag.paths_out, dag.ends  # every node kept is on a path
    total = sum(paths_in[k] for k in ends)
    if total == 0:  # the output does not depend on the input (NB201 cells of none edges): no paths
        return dict.fromkeys(FEATURE_NAMES, 0.0)
    weight = dag.weight

    out: dict[str, float] = {"log10_paths": math.log10(total)}
    names = ("compute", *FAMILIES)
    bounds = dag.fewest_and_most([weight[f] for f in names], ends)
    for f, (low, high) in zip(names, bounds, strict=True):
        through = sum(paths_in[k] * paths_out[k] * weight[f][k] for k in range(dag.size))
        out[f"{f}_path_mean"] = through / total
        out[f"{f}_path_min"] = low
        out[f"{f}_path_max"] = high
        out[f"{f}_nodes"] = sum(weight[f])

    # segments: between consecutive cut nodes (those on every path), each node in exactly one
    cuts = [k for k in range(dag.size) if paths_in[k] * paths_out[k] == total]
    if len(ends) > 1 or not cuts or cuts[-1] not in ends:
        cuts.append(_Dag.END)
    out["segments"] = len(cuts)
    out["segment_paths"] = 0
    for f in names:
        out[f"segment_paths_{f}"] = 0
    begin = _Dag.SOURCE
    for cut in cuts:
        paths, *avoiding = dag.paths_between(begin, cut, [None, *(weight[f] for f in names)])
        out["segment_paths"] += paths
        for f, other in zip(names, avoiding, strict=True):
            out[f"segment_paths_{f}"] += paths - other
        begin = cut
    return out


def _all_counts(flat: FlatGraph) -> dict[str, float]:
    """Per family, every node of the graph, whether or not an output depends on it or reads it at all."""
    counts = dict.fromkeys(FAMILIES, 0)
    for node in flat.nodes:
        fam = family(node)
        if fam is not None:
            counts[fam] += 1
    return {f"{fam}_all": float(count) for fam, count in counts.items()}


def _block_features(model: onnx.ModelProto) -> dict[str, float]:
    """Per call of a local function in the main graph, the paths across the function's body (nested
    functions inlined) and those that meet each family; summed over the calls (all 0 without any)."""
    functions = {(f.domain, f.name): f for f in model.functions}
    out: dict[str, float] = {name: 0 for name in FEATURE_NAMES if name.startswith("block")}
    keys: dict[tuple[str, str], bytes] = {}
    for node in model.graph.node:
        key = (node.domain, node.op_type)
        if key not in functions:
            continue
        out["blocks"] += 1
        for name, value in _body_features(model, key, functions, keys).items():
            out[name] += value
    return out


def _called(function: onnx.FunctionProto, functions: dict[tuple[str, str], onnx.FunctionProto]
            ) -> list[onnx.FunctionProto]:
    """The local functions ``function`` calls, directly or not."""
    found: dict[tuple[str, str], onnx.FunctionProto] = {}
    stack = [function]
    while stack:
        for node in stack.pop().node:
            key = (node.domain, node.op_type)
            if key in functions and key not in found:
                found[key] = functions[key]
                stack.append(functions[key])
    return list(found.values())


def _body_features(model: onnx.ModelProto, key: tuple[str, str],
                   functions: dict[tuple[str, str], onnx.FunctionProto],
                   keys: dict[tuple[str, str], bytes]) -> dict[str, float]:
    """The block features of one function's body (see :func:`_block_features`; ``functions``: the model's
    local functions by key; ``keys``: their structure keys, filled in as they are met), read once per
    structure: the same cell at two widths is read once."""
    structure = _structure_key(key, functions, keys)
    features = _body_cache.get(structure)
    if features is None:
        try:
            body = flatten_function(model, key[1], key[0])
        except NotExpandable:
            function = functions[key]
            body = flatten(_as_model(model, function, _called(function, functions)))
        features = _body_cache[structure] = _read_body(body)
    return features


def _structure_key(key: tuple[str, str], functions: dict[tuple[str, str], onnx.FunctionProto],
                   keys: dict[tuple[str, str], bytes]) -> bytes:
    """A digest of what a function's block features depend on: its body less its name and its weights'
    shapes, and the same of every function it calls, in order (a body names its callees, whose names
    may say their widths)."""
    if key not in keys:
        function = functions[key]
        try:
            digest = hashlib.sha1(template_of(function).structure)
        except NotExpandable:  # read through onnx.inliner: every byte of the body counts
            digest = hashlib.sha1(function.SerializeToString())
        for node in function.node:
            if node.domain not in ("", "ai.onnx", PARAM_DOMAIN):
                callee = (node.domain, node.op_type)
                digest.update(_structure_key(callee, functions, keys) if callee in functions
                              else f"{node.domain}.{node.op_type}".encode())
        keys[key] = digest.digest()
    return keys[key]


def _as_model(model: onnx.ModelProto, function: onnx.FunctionProto, called: list[onnx.FunctionProto]
              ) -> onnx.ModelProto:
    """``function``'s body as a model of its own: its inputs are the graph's inputs, its outputs the
    graph's outputs."""
    graph = helper.make_graph([], function.name,
                              [helper.make_value_info(name, onnx.TypeProto()) for name in function.input],
                              [helper.make_value_info(name, onnx.TypeProto()) for name in function.output])
    graph.node.extend(function.node)
    return helper.make_model(graph, opset_imports=list(model.opset_import), functions=called)


def _read_body(body: FlatGraph) -> dict[str, float]:
    """The block features of a function's body, flattened as a graph of its own."""
    dag = _Dag(body)
    weight = dag.weight
    paths, *avoiding = dag.paths_between(_Dag.SOURCE, _Dag.END, [None, *weight.values()])
    out = {"block_paths": paths}
    for f, other in zip(weight, avoiding, strict=True):
        out[f"block_paths_{f}"] = paths - other
    [(low, high)] = dag.fewest_and_most([weight["compute"]], dag.ends)
    out["block_compute_min"], out["block_compute_max"] = low, high
    out.update(dag.family_pairs())
    return out


class _Dag:
    """The nodes of a flattened graph that lie on an input→output path, as a DAG over node indices in
    topological order. Nodes on no path (weights, constants, what no output needs, what only a product
    with zero reaches) change no feature, and neither do those that pass one input on unchanged in
    family, so both are left out: what remains is what the features count."""

    SOURCE, END = -1, -2  # a virtual node before the graph inputs, and one after the graph outputs

    def __init__(self, flat: FlatGraph) -> None:
        producer = flat.producer
        # per node, the nodes it reads from (SOURCE for a graph input), once per input tensor; a node
        # whose output is identically zero reads from none, so no path passes through it
        parents: list[list[int]] = []
        zero = [False] * len(flat.nodes)
        for k, node in enumerate(flat.nodes):
            reads = [p for p in (producer[v] for v in node.inputs if v >= 0) if p != NO_NODE]
            if node.op_type == "Constant":
                zero[k] = _is_zero_constant(node)
            elif node.op_type == "Mul":
                zero[k] = any(p != SOURCE and zero[p] for p in reads)
            parents.append([] if zero[k] else reads)
        ends = [producer[v] for v in flat.outputs if producer[v] >= 0]
        paths_in = _count_in(parents)
        paths_out = _count_out(parents, ends)
        total = sum(paths_in[k] for k in ends)
        end_set = set(ends)
        # Kept: the nodes on a path, less those that only pass their one input on (no family, one
        # parent, not on every path, no output): each feature is the same without them.
        rep: dict[int, int] = {SOURCE: SOURCE}  # a kept node's new index; a passing node's stand-in
        self.families: list[str | None] = []
        self.parents: list[list[int]] = []
        #: per node, the paths from the graph inputs to it and from it to the graph outputs (the same
        #: as in the whole graph: the nodes left out only passed paths on)
        self.paths_in: list[int] = []
        self.paths_out: list[int] = []
        for k, reads in enumerate(parents):
            if not (paths_in[k] and paths_out[k]):
                continue
            fam = family(flat.nodes[k])
            reads = [rep[p] for p in reads if p in rep]
            if (fam is None and len(reads) == 1 and k not in end_set
                    and paths_in[k] * paths_out[k] != total):
                rep[k] = reads[0]
                continue
            rep[k] = len(self.parents)
            self.parents.append(reads)
            self.families.append(fam)
            self.paths_in.append(paths_in[k])
            self.paths_out.append(paths_out[k])
        #: per family (and ``compute``, every convolution and fully connected layer): 1 at its nodes
        self.weight = {f: [int(fam == f) for fam in self.families] for f in FAMILIES}
        self.weight["compute"] = [int(fam in _COMPUTE) for fam in self.families]
        #: the nodes producing graph outputs, once per output
        self.ends = [rep[k] for k in ends if k in rep]
        self.size = len(self.parents)

    def family_pairs(self) -> dict[str, int]:
        """``block_pair_{a}_{b}`` → how often, over all input→output paths, a node of family ``a`` (or
        the inputs, ``start``) is followed by one of family ``b`` (or the outputs, ``end``) with no node
        of any family between them. Every key of :data:`FEATURE_NAMES` of that form is present."""
        names = ("start", *FAMILIES)
        out = {f"block_pair_{a}_{b}": 0 for a in names for b in (*FAMILIES, "end")}
        paths_in, paths_out = self.paths_in, self.paths_out
        passes = [f not in FAMILIES for f in self.families]  # a pair's path may run on through it
        for begin in (self.SOURCE, *(k for k, through in enumerate(passes) if not through)):
            before = 1 if begin == self.SOURCE else paths_in[begin]
            if before == 0:
                continue
            a = "start" if begin == self.SOURCE else self.families[begin]
            # paths from ``begin`` that meet no family node before their last node
            direct = [0] * self.size
            for k in range(begin + 1, self.size):
                direct[k] = sum(1 if p == begin else direct[p] if p > begin and passes[p] else 0
                                for p in self.parents[k])
                if direct[k] and not passes[k]:
                    out[f"block_pair_{a}_{self.families[k]}"] += before * direct[k] * paths_out[k]
            for k in self.ends:
                if k == begin:
                    out[f"block_pair_{a}_end"] += before
                elif passes[k]:
                    out[f"block_pair_{a}_end"] += before * direct[k]
        return out

    def fewest_and_most(self, weights: list[list[int]], at: list[int]) -> list[tuple[float, float]]:
        """For each of ``weights`` (a number per node), the least and the most total weight on a path from
        the inputs to any of the nodes ``at`` (inclusive; both 0 where ``at`` is empty); all weights in
        one pass over the graph."""
        source = [0] * len(weights)
        adds = [[(j, a) for j, a in enumerate(row) if a] for row in zip(*weights, strict=True)]
        low: list[list[float]] = []
        high: list[list[float]] = []
        for parents, add in zip(self.parents, adds, strict=True):
            if len(parents) == 1:  # most nodes: the parent's rows, shared where nothing is added
                p = parents[0]
                lo, hi = (source, source) if p == self.SOURCE else (low[p], high[p])
            else:  # every node kept has a parent: it is on a path
                lo = list(map(min, *(source if p == self.SOURCE else low[p] for p in parents)))
                hi = list(map(max, *(source if p == self.SOURCE else high[p] for p in parents)))
            if add:
                lo, hi = list(lo), list(hi)
                for j, a in add:
                    lo[j] += a
                    hi[j] += a
            low.append(lo)
            high.append(hi)
        if not at:
            return [(0, 0)] * len(weights)
        return [(min(low[k][j] for k in at), max(high[k][j] for k in at)) for j in range(len(weights))]

    def paths_between(self, begin: int, end: int, blocked: list[list[int] | None]) -> list[int]:
        """For each of ``blocked`` (1 at the nodes a path may not pass; ``None``: no node), the paths from
        node ``begin`` (or SOURCE) to node ``end`` (or END: the graph outputs) that pass through no
        blocked node after ``begin`` (``end`` included); all in one pass over the graph."""
        last = self.size - 1 if end == self.END else end
        sets = range(len(blocked))
        stoppers = [(j, b) for j, b in zip(sets, blocked, strict=True) if b is not None]
        start = [1] * len(blocked)
        counts = [[0] * len(blocked)] * self.size  # a node at or before ``begin``: no path from it
        for k in range(begin + 1, last + 1):
            row = [0] * len(blocked)
            for p in self.parents[k]:
                if p >= begin:
                    row = [a + b for a, b in zip(row, start if p == begin else counts[p], strict=True)]
            for j, b in stoppers:
                if b[k]:
                    row[j] = 0
            counts[k] = row
        if end != self.END:
            return counts[end]
        return [sum(counts[k][j] for k in self.ends) for j in sets]


def _count_in(parents: list[list[int]]) -> list[int]:
    """Per node of a DAG given by its ``parents`` (SOURCE for the inputs), the paths from the inputs."""
    counts = [0] * len(parents)
    for k, reads in enumerate(parents):
        counts[k] = sum(1 if p == SOURCE else counts[p] for p in reads)
    return counts


def _count_out(parents: list[list[int]], ends: list[int]) -> list[int]:
    """Per node, the paths to the outputs (``ends``: the nodes producing them, once per output)."""
    out = [0] * len(parents)
    for k in ends:
        out[k] += 1
    for k in reversed(range(len(parents))):
        if out[k]:
            for p in parents[k]:
                if p != SOURCE:
                    out[p] += out[k]
    return out


@dataclass(frozen=True)
class GraphDescription:
    """What the graph of a model says of it, read once: :func:`describe_graph`."""

    #: trainable parameters (:func:`~exporters.count_parameters`)
    parameters: int
    #: multiply–accumulates (:func:`~exporters.count_macs`)
    macs: int
    #: :func:`graph_features`, or None where they were not asked for
    features: dict[str, float] | None


def describe_graph(model: onnx.ModelProto, *, features: bool = True) -> GraphDescription:
    """Parameters, multiply–accumulates and (with ``features``) :func:`graph_features` of a structural
    or executable model, its graph read once for all three."""
    flat = flatten(model)
    return GraphDescription(parameters_of(flat), macs_of(flat, model),
                            graph_features(model, flat) if features else None)
