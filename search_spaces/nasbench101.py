"""NAS-Bench-101: the exact benchmark network (Ying et al., ICML 2019), built directly in ONNX.

Follows google-research/nasbench (``model_spec.py``, ``graph_util.py``, ``model_builder.py``,
``base_ops.py``). A cell is a DAG of at most 7 vertices and 9 edges given by an upper-triangular
adjacency matrix; vertex 0 is the input, the last vertex the output, and every interior vertex is one
of ``conv3x3-bn-relu``, ``conv1x1-bn-relu`` or ``maxpool3x3``. Vertices not on an input→output path
are pruned away, as ``ModelSpec`` does.

Macro skeleton: 3×3 conv–BN–ReLU stem with 128 channels; three stacks of three cells at 128, 256 and
512 channels, a 2×2 stride-2 max pool before the second and third stack; global average pool; dense
layer to 10 classes. Input 1×3×32×32. Every convolution is bias-free and followed by BatchNorm with
scale and shift (both trainable, as in TensorFlow) and ReLU, so trainable-parameter counts equal the
published ``trainable_parameters``.

Identity. Isomorphic cells are one benchmark entry, and the benchmark stores for each the relabelling
that ``generate_graphs.py`` met first: the smallest edge bit mask (bit ``x + y(y-1)/2`` for edge
``x→y``), then the smallest list of interior op codes. :meth:`NasBench101.canonical` computes exactly
that representative, so **ids are isomorphism-invariant** and equal the benchmark's stored
``module_adjacency``/``module_operations``. This matters for fidelity, not just naming: channel
splitting gives the extra channels to the lowest-numbered vertices, so two relabellings of one cell
can differ in parameter count, and the benchmark's count is the one of its representative.

Id format: the pruned adjacency rows as 0/1 digits joined by ``.``, a ``|``, then the vertex
operations joined by ``,``; e.g. a single 3×3 conv between input and output is
``010.001.000|input,conv3x3-bn-relu,output``. :meth:`NasBench101.parse` also accepts any valid spec
in this format (unpruned, other vertex order) and returns its canonical cell.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from exporters import ModelBuilder
from search_spaces._base import SearchSpace

if TYPE_CHECKING:
    import optuna

INPUT = "input"
OUTPUT = "output"
#: The benchmark's ``available_ops`` in its order: the index is the op's label in the module hash.
OPS: tuple[str, ...] = ("conv3x3-bn-relu", "conv1x1-bn-relu", "maxpool3x3")
#: Hash labels of the input and output vertices (``ModelSpec.hash_spec``).
INPUT_LABEL, OUTPUT_LABEL = -1, -2
MAX_VERTICES = 7
MAX_EDGES = 9
STEM_CHANNELS = 128
NUM_STACKS = 3
CELLS_PER_STACK = 3
NUM_CLASSES = 10
#: Number of distinct cells (isomorphism classes) in the benchmark.
NUM_CELLS = 423_624
#: Upper-triangular positions (x, y) of a 7-vertex matrix in ``suggest``'s parameter order.
EDGE_SLOTS: tuple[tuple[int, int], ...] = tuple(
    (x, y) for x in range(MAX_VERTICES) for y in range(x + 1, MAX_VERTICES)
)


@dataclass(frozen=True)
class NB101Cell:
    """A cell spec: square 0/1 upper-triangular adjacency plus one op name per vertex.

    Any well-formed spec is accepted (also unpruned or invalid ones, as ``ModelSpec`` accepts them);
    :meth:`NasBench101.canonical` prunes, checks and relabels it. Sequences and numpy arrays are
    normalised to tuples so cells hash and compare by value.
    """

    matrix: tuple[tuple[int, ...], ...]
    ops: tuple[str, ...]

    def __post_init__(self) -> None:
        matrix = tuple(tuple(int(v) for v in row) for row in np.asarray(self.matrix).tolist())
        ops = tuple(str(op) for op in self.ops)
        n = len(matrix)
        if not 2 <= n <= MAX_VERTICES or any(len(row) != n for row in matrix):
            raise ValueError(f"an NB101 adjacency must be square with 2 to {MAX_VERTICES} rows, got {matrix}")
        if any(v not in (0, 1) for row in matrix for v in row):
            raise ValueError(f"an NB101 adjacency holds only 0 and 1, got {matrix}")
        if any(matrix[x][y] for x in range(n) for y in range(x + 1)):
            raise ValueError(f"an NB101 adjacency must be strictly upper-triangular, got {matrix}")
        if len(ops) != n:
            raise ValueError(f"{n} vertices need {n} ops, got {len(ops)}: {ops}")
        if ops[0] != INPUT or ops[-1] != OUTPUT:
            raise ValueError(f"the first op must be {INPUT!r} and the last {OUTPUT!r}, got {ops}")
        for op in ops[1:-1]:
            if op not in OPS:
                raise ValueError(f"unknown NB101 operation {op!r}; expected one of {', '.join(OPS)}")
        object.__setattr__(self, "matrix", matrix)
        object.__setattr__(self, "ops", ops)

    @property
    def num_vertices(self) -> int:
        return len(self.ops)

    @property
    def num_edges(self) -> int:
        return sum(map(sum, self.matrix))


# --- graph utilities, following model_spec.py and graph_util.py ----------------------------------
def prune(cell: NB101Cell) -> NB101Cell | None:
    """``ModelSpec._prune``: keep the vertices on an input→output path; ``None`` if there is none."""
    m, n = cell.matrix, cell.num_vertices
    from_input, frontier = {0}, [0]
    while frontier:
        top = frontier.pop()
        for v in range(top + 1, n):
            if m[top][v] and v not in from_input:
                from_input.add(v)
                frontier.append(v)
    to_output, frontier = {n - 1}, [n - 1]
    while frontier:
        top = frontier.pop()
        for v in range(top):
            if m[v][top] and v not in to_output:
                to_output.add(v)
                frontier.append(v)
    keep = sorted(from_input & to_output)
    if len(keep) < 2:  # the input does not reach the output
        return None
    return NB101Cell(tuple(tuple(m[x][y] for y in keep) for x in keep), tuple(cell.ops[v] for v in keep))


def invalid_reason(cell: NB101Cell) -> str | None:
    """Why the benchmark's ``is_valid`` rejects ``cell`` (after pruning), or ``None`` if it accepts it."""
    pruned = prune(cell)
    if pruned is None:
        return "the input is not connected to the output"
    if pruned.num_edges > MAX_EDGES:
        return f"{pruned.num_edges} edges after pruning (at most {MAX_EDGES})"
    return None


def hash_labels(cell: NB101Cell) -> list[int]:
    """The integer labels ``ModelSpec.hash_spec`` hashes: input -1, output -2, ops by index in :data:`OPS`."""
    return [INPUT_LABEL] + [OPS.index(op) for op in cell.ops[1:-1]] + [OUTPUT_LABEL]


def hash_module(matrix: Sequence[Sequence[int]], labeling: Sequence[int]) -> str:
    """``graph_util.hash_module``: Weisfeiler-Lehman-style MD5 hash, invariant under relabelling.

    Reproduced string for string (``str`` of Python-int tuples and lists) so that the digests equal
    the benchmark's keys. ``matrix`` is square, of 0/1 entries (lists, tuples or a numpy array), with one
    label per vertex; anything else raises ``ValueError``.
    """
    n = len(matrix)
    if len(labeling) != n or any(len(row) != n or any(x not in (0, 1) for x in row) for row in matrix):
        raise ValueError(f"hash_module: a square 0/1 matrix and one label per vertex, got {n} rows and "
                         f"{len(labeling)} labels")
    return _wl_hash(*_neighbours(matrix), tuple(int(x) for x in labeling))


def _neighbours(matrix: Sequence[Sequence[int]]) -> tuple[_Lists, _Lists]:
    """Each vertex's predecessors and successors in ``matrix``, as :func:`_wl_hash` reads them."""
    n = len(matrix)
    preds = tuple(tuple(w for w in range(n) if matrix[w][v]) for v in range(n))
    succs = tuple(tuple(w for w in range(n) if matrix[v][w]) for v in range(n))
    return preds, succs


#: one tuple of vertex indices per vertex
_Lists = tuple[tuple[int, ...], ...]


def _wl_hash(preds: Sequence[Sequence[int]], succs: Sequence[Sequence[int]], labels: Sequence[int]) -> str:
    """:func:`hash_module` of the graph given by each vertex's predecessors and successors (Python ints:
    their ``str`` is hashed)."""
    n = len(labels)
    hashes = [_first_hash(len(succs[v]), len(preds[v]), labels[v]) for v in range(n)]
    for _ in range(n):
        hashes = [_md5("".join(sorted([hashes[w] for w in preds[v]])) + "|"
                       + "".join(sorted([hashes[w] for w in succs[v]])) + "|" + hashes[v])
                  for v in range(n)]
    return _md5(str(sorted(hashes)))


@cache
def _first_hash(out_degree: int, in_degree: int, label: int) -> str:
    """A vertex's hash before the first round: of its (out-degree, in-degree, label) tuple."""
    return _md5(str((out_degree, in_degree, label)))


def module_hashes(part: int = 0, parts: int = 1) -> Iterator[tuple[str, tuple[int, int, tuple[int, ...]]]]:
    """``(module hash, key)`` of every cell, ``NasBench101.cell_of(key)`` builds the cell (canonical).

    ``parts > 1``: only the cells of every ``parts``-th edge mask from the ``part``-th on, so that
    ``parts`` processes share the space, each building the graphs of its own masks alone. The hash is
    computed from the mask's predecessor lists, shared by all of its labellings: over twice as fast as
    enumerating the cells and hashing each one's matrix.
    """
    if not 0 <= part < parts:
        raise ValueError(f"part {part} of {parts}: expected 0 <= part < parts")
    for n, bits, interiors in itertools.islice(_cell_classes(), part, None, parts):
        preds, succs = _neighbours(_matrix_of(n, bits))
        for interior in interiors:
            yield _wl_hash(preds, succs, (INPUT_LABEL, *interior, OUTPUT_LABEL)), (n, bits, interior)


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def _bit(x: int, y: int) -> int:
    """Bit of edge x→y in ``graph_util.gen_is_edge_fn``'s mask (column-major upper triangle)."""
    return x + y * (y - 1) // 2


@cache
def _interior_orders(n: int) -> tuple[tuple[int, ...], ...]:
    """Every relabelling ``new = order[old]`` that fixes the input and output of an n-vertex cell."""
    return tuple((0, *p, n - 1) for p in itertools.permutations(range(1, n - 1)))


def canonical_relabelling(cell: NB101Cell) -> NB101Cell:
    """The relabelling of ``cell`` (assumed pruned) that ``generate_graphs.py`` stores for its class.

    Among the relabellings that keep the matrix upper-triangular, the benchmark enumerates edge bit
    masks in increasing order and, per mask, op labellings in ``itertools.product`` order, and keeps
    the first one of each hash; the minimum of (mask, interior labels) is that one.
    """
    n = cell.num_vertices
    edges = [(x, y) for x in range(n) for y in range(x + 1, n) if cell.matrix[x][y]]
    labels = hash_labels(cell)
    best: tuple[int, tuple[int, ...]] | None = None
    for order in _interior_orders(n):
        if any(order[x] > order[y] for x, y in edges):
            continue
        new_labels = [0] * n
        for v, label in enumerate(labels):
            new_labels[order[v]] = label
        key = (sum(1 << _bit(order[x], order[y]) for x, y in edges), tuple(new_labels[1:-1]))
        if best is None or key < best:
            best = key
    assert best is not None  # the identity always qualifies
    return _cell_from_key(n, *best)


def canonical_id(cell: NB101Cell) -> str:
    """The id of a cell that is its own canonical representative (as :meth:`NasBench101.enumerate`
    yields them): :meth:`NasBench101.arch_id` without looking for the representative first."""
    rows = ".".join("".join(map(str, row)) for row in cell.matrix)
    return f"{rows}|{','.join(cell.ops)}"


def _cell_from_key(n: int, bits: int, interior: Sequence[int]) -> NB101Cell:
    return NB101Cell(_matrix_of(n, bits), (INPUT, *(OPS[k] for k in interior), OUTPUT))


def _matrix_of(n: int, bits: int) -> tuple[tuple[int, ...], ...]:
    """The n-vertex upper-triangular adjacency matrix of edge mask ``bits`` (see :func:`_bit`)."""
    return tuple(tuple(int(x < y and (bits >> _bit(x, y)) & 1) for y in range(n)) for x in range(n))


def compute_vertex_channels(input_channels: int, output_channels: int,
                            matrix: Sequence[Sequence[int]]) -> list[int]:
    """``model_builder.compute_vertex_channels``: split the output channels over the output's inputs.

    Vertices feeding the output share its channels (the first ones get one extra where the split is
    uneven); every other interior vertex takes the maximum of its successors.
    """
    n = len(matrix)
    channels = [0] * n
    channels[0], channels[n - 1] = input_channels, output_channels
    if n == 2:
        return channels
    fan_in = sum(matrix[v][n - 1] for v in range(1, n))  # the input's edge to the output is a projection
    interior, correction = divmod(output_channels, fan_in)
    for v in range(1, n - 1):
        if matrix[v][n - 1]:
            channels[v] = interior
            if correction:
                channels[v] += 1
                correction -= 1
    for v in range(n - 3, 0, -1):
        if not matrix[v][n - 1]:
            for dst in range(v + 1, n - 1):
                if matrix[v][dst]:
                    channels[v] = max(channels[v], channels[dst])
    return channels


# --- the space ---------------------------------------------------------------------------------
class NasBench101(SearchSpace[NB101Cell]):
    """NAS-Bench-101 cell space: 423,624 cells in the exact benchmark network (CIFAR-10, 32×32).

    ``sample`` draws like the benchmark's random search: a random 7-vertex spec (each of the 21 edges
    with probability 1/2, each op with 1/3), rejected until valid. That is uniform over valid *specs*,
    not over the distinct cells: pruning makes small cells far likelier (about 0.2 % of draws keep
    all 7 vertices, against 85 % of the 423,624 cells). ``enumerate`` yields every cell in the
    benchmark's generation order (about 20 s).
    """

    name = "nb101"
    input_shape = (1, 3, 32, 32)

    # --- cells ------------------------------------------------------------------------------
    def canonical(self, arch: NB101Cell) -> NB101Cell:
        """Pruned, checked and relabelled to the benchmark's stored representative (see module doc)."""
        return canonical_relabelling(_checked_prune(arch))

    def is_valid(self, arch: NB101Cell) -> bool:
        """What the benchmark's ``NASBench.is_valid`` answers for this spec."""
        return invalid_reason(arch) is None

    def module_hash(self, arch: NB101Cell) -> str:
        """The benchmark's key for ``arch`` (``ModelSpec.hash_spec`` of the pruned spec)."""
        pruned = _checked_prune(arch)
        return hash_module(pruned.matrix, hash_labels(pruned))

    # --- identity -------------------------------------------------------------------------
    def arch_id(self, arch: NB101Cell) -> str:
        return canonical_id(self.canonical(arch))

    def parse(self, arch_id: str) -> NB101Cell:
        if not isinstance(arch_id, str):
            raise ValueError(f"an NB101 id is a string, got {type(arch_id).__name__}")
        parts = arch_id.split("|")
        if len(parts) != 2:
            raise ValueError(f"malformed NB101 id {arch_id!r}: expected '<rows>|<ops>' with exactly one '|'")
        rows, ops = parts[0].split("."), parts[1].split(",")
        n = len(rows)
        if not 2 <= n <= MAX_VERTICES:
            raise ValueError(f"malformed NB101 id {arch_id!r}: {n} rows, expected 2 to {MAX_VERTICES}")
        for row in rows:
            if len(row) != n or set(row) - {"0", "1"}:
                raise ValueError(f"malformed NB101 id {arch_id!r}: row {row!r} should be {n} digits 0/1")
        if len(ops) != n:
            raise ValueError(f"malformed NB101 id {arch_id!r}: {n} rows but {len(ops)} ops")
        try:
            cell = NB101Cell(tuple(tuple(int(c) for c in row) for row in rows), tuple(ops))
            return self.canonical(cell)
        except ValueError as err:
            raise ValueError(f"malformed NB101 id {arch_id!r}: {err}") from None

    # --- drawing ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> NB101Cell:
        while True:
            matrix = np.triu(rng.integers(2, size=(MAX_VERTICES, MAX_VERTICES)), 1)
            interior = rng.integers(len(OPS), size=MAX_VERTICES - 2)
            cell = NB101Cell(matrix, (INPUT, *(OPS[k] for k in interior), OUTPUT))
            if self.is_valid(cell):
                return self.canonical(cell)

    def suggest(self, trial: optuna.Trial) -> NB101Cell:
        """21 edge bits ``edge_x_y`` and 5 ops ``op_v``; an invalid spec is repaired, never rejected.

        Repair is a pure function of the parameters, so every assignment maps to one valid cell. If
        the input does not reach the output, each interior vertex without an in-edge gets one from
        the input and each without an out-edge one to the output. Then, while the pruned cell has
        more than 9 edges, the edge with the highest bit (``x + y(y-1)/2``) whose removal keeps every
        vertex is removed, or failing that, the highest one that keeps the cell connected. Valid
        specs are used as they are.
        """
        n = MAX_VERTICES
        matrix = [[0] * n for _ in range(n)]
        for x, y in EDGE_SLOTS:
            matrix[x][y] = int(trial.suggest_categorical(f"edge_{x}_{y}", (0, 1)))
        ops = (INPUT, *(trial.suggest_categorical(f"op_{v}", OPS) for v in range(1, n - 1)), OUTPUT)
        return self.canonical(_repair(NB101Cell(matrix, ops)))

    def params_of(self, arch: NB101Cell) -> dict[str, Any]:
        """The canonical cell in the 7-vertex slots: its output on vertex 6, unused vertices unconnected
        (``suggest`` prunes them; their ops are the first of :data:`OPS`)."""
        cell = self.canonical(arch)
        n = cell.num_vertices
        slot = [*range(n - 1), MAX_VERTICES - 1]  # vertex v of the cell sits on slot[v]
        matrix = [[0] * MAX_VERTICES for _ in range(MAX_VERTICES)]
        for x in range(n):
            for y in range(x + 1, n):
                matrix[slot[x]][slot[y]] = cell.matrix[x][y]
        ops = [*cell.ops[1:-1], *[OPS[0]] * (MAX_VERTICES - n)]
        return {**{f"edge_{x}_{y}": matrix[x][y] for x, y in EDGE_SLOTS},
                **{f"op_{v}": ops[v - 1] for v in range(1, MAX_VERTICES - 1)}}

    def enumerate(self) -> Iterator[NB101Cell]:
        """All 423,624 cells, each as its canonical representative, in ``generate_graphs.py`` order."""
        for n, bits, interiors in _cell_classes():
            for interior in interiors:
                yield _cell_from_key(n, bits, interior)

    def cell_of(self, key: tuple[int, int, tuple[int, ...]]) -> NB101Cell:
        """The cell of a :func:`module_hashes` key: (vertices, edge mask, interior op codes)."""
        return _cell_from_key(*key)

    @property
    def size(self) -> int:
        return NUM_CELLS

    # --- ONNX ------------------------------------------------------------------------------
    def build_onnx(self, arch: NB101Cell) -> onnx.ModelProto:
        return _network(self.canonical(arch), self.input_shape)

    def build_spec_onnx(self, arch: NB101Cell) -> onnx.ModelProto:
        """The pruned spec in its *own* vertex order, as ``model_builder`` builds a ModelSpec handed to it.

        :meth:`build_onnx` builds the benchmark's representative instead. The two differ only where
        uneven channel splits land on other vertices, e.g. NASLib's tables measure networks built
        from specs in their own order, so their parameter counts are this method's.
        """
        return _network(_checked_prune(arch), self.input_shape)


def _checked_prune(arch: NB101Cell) -> NB101Cell:
    reason = invalid_reason(arch)
    if reason is not None:
        raise ValueError(f"invalid NB101 cell ({reason}): {arch}")
    pruned = prune(arch)
    assert pruned is not None
    return pruned


def _network(cell: NB101Cell, input_shape: tuple[int, ...]) -> onnx.ModelProto:
    """``model_builder.build_model_fn``'s network around a pruned cell, in the cell's vertex order."""
    b = ModelBuilder("nb101", domain="nb101")
    main = b.main
    x = main.call(_conv_bn_relu(b, input_shape[1], STEM_CHANNELS, 3), "x")
    channels = STEM_CHANNELS
    for stack in range(NUM_STACKS):
        c_in = channels
        if stack > 0:
            x = main.op("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2])
            channels *= 2
        for _ in range(CELLS_PER_STACK):
            x = main.call(_cell(b, cell, c_in, channels), x)
            c_in = channels
    y = main.call(_head(b, channels), x)
    return b.build(input_shape, y, (input_shape[0], NUM_CLASSES))


def _repair(cell: NB101Cell) -> NB101Cell:
    """Make a spec valid deterministically, keeping as many of its vertices as the edge limit allows."""
    if prune(cell) is None:  # input does not reach output: give each dangling vertex the edge it lacks
        n = cell.num_vertices
        matrix = [list(row) for row in cell.matrix]
        matrix[0][n - 1] |= n == 2
        for v in range(1, n - 1):
            if not any(matrix[u][v] for u in range(v)):
                matrix[0][v] = 1
            if not any(matrix[v][w] for w in range(v + 1, n)):
                matrix[v][n - 1] = 1
        cell = NB101Cell(matrix, cell.ops)
    pruned = prune(cell)
    assert pruned is not None
    while pruned.num_edges > MAX_EDGES:
        n = pruned.num_vertices
        edges = sorted(((x, y) for x in range(n) for y in range(x + 1, n) if pruned.matrix[x][y]),
                       key=lambda e: _bit(*e), reverse=True)
        options = []
        for x, y in edges:  # one exists: a single path has at most 6 edges
            matrix = [list(row) for row in pruned.matrix]
            matrix[x][y] = 0
            smaller = prune(NB101Cell(matrix, pruned.ops))
            if smaller is not None:
                options.append(smaller)
        pruned = next((o for o in options if o.num_vertices == n), options[0])
    return pruned


def _cell_classes() -> Iterator[tuple[int, int, list[tuple[int, ...]]]]:
    """(vertices, edge mask, canonical interior labellings) of every cell class of every size, in generation
    order: :func:`_canonical_keys` for 2 to :data:`MAX_VERTICES` vertices."""
    for n in range(2, MAX_VERTICES + 1):
        for bits, interiors in _canonical_keys(n):
            yield n, bits, interiors


def _canonical_keys(n: int) -> Iterator[tuple[int, list[tuple[int, ...]]]]:
    """(edge mask, canonical interior labellings) of every n-vertex cell class, in generation order.

    Vectorised over all masks: a mask is kept if it is a full DAG with at most 9 edges and no
    relabelling gives a smaller mask; its labellings are kept if no automorphism of the mask gives a
    smaller one. This is the benchmark's first-seen-per-hash rule, since its hash has no collisions
    in this space (verified by ``generate_graphs.py``).
    """
    if n == 2:
        yield 1, [()]
        return
    slots = [(x, y) for y in range(n) for x in range(y)]  # bit order
    masks = np.arange(1 << len(slots), dtype=np.int64)
    edge_bits = (masks[:, None] >> np.arange(len(slots))) & 1
    keep = edge_bits.sum(axis=1) <= MAX_EDGES
    for v in range(n):  # every vertex but the output has an out-edge, every one but the input an in-edge
        if v < n - 1:
            keep &= edge_bits[:, [k for k, (x, _) in enumerate(slots) if x == v]].any(axis=1)
        if v > 0:
            keep &= edge_bits[:, [k for k, (_, y) in enumerate(slots) if y == v]].any(axis=1)
    masks, edge_bits = masks[keep], edge_bits[keep]
    minimal = np.ones(len(masks), dtype=bool)
    automorphisms: dict[int, list[tuple[int, ...]]] = {}
    for order in _interior_orders(n)[1:]:
        flips = [k for k, (x, y) in enumerate(slots) if order[x] > order[y]]
        upper = ~edge_bits[:, flips].any(axis=1) if flips else np.ones(len(masks), dtype=bool)
        moved = np.zeros(len(masks), dtype=np.int64)
        for k, (x, y) in enumerate(slots):
            if order[x] < order[y]:
                moved |= edge_bits[:, k] << _bit(order[x], order[y])
        minimal &= ~(upper & (moved < masks))
        for i in np.flatnonzero(upper & (moved == masks)):
            automorphisms.setdefault(int(masks[i]), []).append(order)
    labellings = list(itertools.product(range(len(OPS)), repeat=n - 2))
    for mask in masks[minimal].tolist():
        autos = automorphisms.get(mask, [])
        kept = []
        for labels in labellings:
            full = (INPUT_LABEL, *labels, OUTPUT_LABEL)
            if all(_relabel(full, order) >= labels for order in autos):
                kept.append(labels)
        yield mask, kept


def _relabel(labels: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    new = [0] * len(labels)
    for v, label in enumerate(labels):
        new[order[v]] = label
    return tuple(new[1:-1])


# --- blocks, each an ONNX local function defined once per distinct shape ---------------------
def _conv_bn_relu(b: ModelBuilder, c_in: int, c_out: int, k: int) -> str:
    """``base_ops.conv_bn_relu``: bias-free 'same' conv, BatchNorm (scale and shift), ReLU."""
    def body(f, x):
        conv = {"kernel_shape": [k, k], "pads": [k // 2] * 4} if k > 1 else {"kernel_shape": [k, k]}
        y = f.op("Conv", x, f.param(c_out, c_in, k, k), **conv)
        return f.op("Relu", f.op("BatchNormalization", y, *f.param(c_out, n=4)))
    name = f"cbr{k}_{c_in}" if c_in == c_out else f"cbr{k}_{c_in}_{c_out}"
    return b.function(name, 1, body)


def _truncate(b: ModelBuilder, c: int) -> str:
    """``model_builder.truncate``: keep the first ``c`` channels (inputs have at most one extra)."""
    def body(f, x):
        starts, ends, axes = (f.op("Constant", value_ints=[v]) for v in (0, c, 1))
        return f.op("Slice", x, starts, ends, axes)
    return b.function(f"truncate_{c}", 1, body)


def _cell(b: ModelBuilder, cell: NB101Cell, c_in: int, c_out: int) -> str:
    """``model_builder.build_module`` for one (input, output) channel pair of the stacks."""
    m, n = cell.matrix, cell.num_vertices
    channels = compute_vertex_channels(c_in, c_out, m)

    def body(f, x):
        tensors, concat = [x], []
        for t in range(1, n - 1):
            add_in = []
            for src in range(1, t):
                if m[src][t]:
                    if channels[src] < channels[t]:
                        raise ValueError(f"vertex {src} has fewer channels than its successor {t}")
                    extra = channels[src] > channels[t]
                    add_in.append(f.call(_truncate(b, channels[t]), tensors[src]) if extra else tensors[src])
            if m[0][t]:
                add_in.append(f.call(_conv_bn_relu(b, c_in, channels[t], 1), x))
            value = add_in[0] if len(add_in) == 1 else f.op("Sum", *add_in)
            if cell.ops[t] == "maxpool3x3":
                value = f.op("MaxPool", value, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
            else:
                k = 3 if cell.ops[t] == "conv3x3-bn-relu" else 1
                value = f.call(_conv_bn_relu(b, channels[t], channels[t], k), value)
            tensors.append(value)
            if m[t][n - 1]:
                concat.append(value)
        if not concat:  # input straight to output
            return f.call(_conv_bn_relu(b, c_in, c_out, 1), x)
        out = concat[0] if len(concat) == 1 else f.op("Concat", *concat, axis=1)
        if m[0][n - 1]:
            out = f.op("Add", out, f.call(_conv_bn_relu(b, c_in, c_out, 1), x))
        return out

    name = f"cell_{c_in}" if c_in == c_out else f"cell_{c_in}_{c_out}"
    return b.function(name, 1, body)


def _head(b: ModelBuilder, c: int) -> str:
    """Global average pool and the dense layer (with bias) to the class logits."""
    def body(f, x):
        y = f.op("Flatten", f.op("GlobalAveragePool", x), axis=1)
        return f.op("Gemm", y, f.param(NUM_CLASSES, c), f.param(NUM_CLASSES), transB=1)
    return b.function("head", 1, body)
