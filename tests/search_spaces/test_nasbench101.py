"""NAS-Bench-101: conformance, ids and isomorphism, module hash, and fidelity to the published benchmark."""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
from pathlib import Path

import numpy as np
import onnx
import onnx.inliner
import optuna
import pytest

from exporters import PARAM_DOMAIN, count_parameters, materialize
from search_spaces import NasBench101, NB101Cell, get_space
from search_spaces.nasbench101 import (
    EDGE_SLOTS,
    MAX_EDGES,
    OPS,
    canonical_id,
    compute_vertex_channels,
    hash_labels,
    hash_module,
    module_hashes,
)
from search_spaces.testing import SearchSpaceTests

C3, C1, MP = OPS
# The benchmark README's Inception-like query: the spec it passes, and the record it gets back (the
# stored relabelling of that cell) with 2,694,282 trainable parameters.
INCEPTION = NB101Cell(
    [[0, 1, 1, 1, 0, 1, 0], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 0, 0],
     [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0]],
    ["input", C1, C3, C3, C3, MP, "output"],
)
INCEPTION_STORED = NB101Cell(
    [[0, 1, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1],
     [0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0]],
    ["input", C3, C1, MP, C3, C3, "output"],
)
#: Three vertices feed the output, vertex 1 also feeds vertex 3: channel splits are uneven.
UNEVEN = "01010.00101.00001.00001.00000|input,conv3x3-bn-relu,conv1x1-bn-relu,maxpool3x3,output"
#: NASLib's integer op codes in zero_cost_500.json.
NASLIB_OPS = ("input", "output", MP, C1, C3)


class TestNasBench101(SearchSpaceTests):
    space = NasBench101()


@pytest.fixture(scope="module")
def space() -> NasBench101:
    return NasBench101()


def structural_parameters(model: onnx.ModelProto) -> int:
    """``count_parameters`` without drawing weights: placeholder shapes, BatchNorm statistics left out.

    Materialising draws millions of random weights per model; this reads the same shapes in a few ms.
    ``test_official_records`` checks that both counts agree.
    """
    model = onnx.inliner.inline_local_functions(model)
    stats = {n.input[i] for n in model.graph.node if n.op_type == "BatchNormalization" for i in (3, 4)}
    total = 0
    for node in model.graph.node:
        if node.domain == PARAM_DOMAIN:
            shape = next(a.ints for a in node.attribute if a.name == "shape")
            total += math.prod(shape) * sum(out not in stats for out in node.output)
    return total


def relabel(cell: NB101Cell, order: tuple[int, ...]) -> NB101Cell:
    """Vertex v of ``cell`` becomes vertex ``order[v]``."""
    n = cell.num_vertices
    matrix = [[0] * n for _ in range(n)]
    ops = [""] * n
    for x in range(n):
        ops[order[x]] = cell.ops[x]
        for y in range(n):
            matrix[order[x]][order[y]] = cell.matrix[x][y]
    return NB101Cell(matrix, ops)


# --- identity ---------------------------------------------------------------------------------
def test_registered_under_its_name() -> None:
    assert isinstance(get_space("nb101"), NasBench101)


def test_id_format(space: NasBench101) -> None:
    cell = NB101Cell([[0, 1, 0], [0, 0, 1], [0, 0, 0]], ["input", C3, "output"])
    assert space.arch_id(cell) == "010.001.000|input,conv3x3-bn-relu,output"
    assert space.parse("01.00|input,output") == NB101Cell([[0, 1], [0, 0]], ["input", "output"])


def test_readme_query_returns_the_stored_relabelling(space: NasBench101) -> None:
    assert space.canonical(INCEPTION) == INCEPTION_STORED
    assert space.arch_id(INCEPTION) == space.arch_id(INCEPTION_STORED)
    assert count_parameters(space.to_onnx(INCEPTION)) == 2_694_282


def test_ids_and_hashes_are_isomorphism_invariant(space: NasBench101) -> None:
    rng = np.random.default_rng(1)
    for _ in range(30):
        cell = space.sample(rng)
        n = cell.num_vertices
        edges = [(x, y) for x in range(n) for y in range(n) if cell.matrix[x][y]]
        orders = [(0, *p, n - 1) for p in itertools.permutations(range(1, n - 1))]
        orders = [o for o in orders if all(o[x] < o[y] for x, y in edges)]
        for order in orders[:: max(1, len(orders) // 5)]:
            other = relabel(cell, order)
            assert space.arch_id(other) == space.arch_id(cell)
            assert space.module_hash(other) == space.module_hash(cell)


def test_distinct_cells_get_distinct_ids_and_hashes(space: NasBench101) -> None:
    a = NB101Cell([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]], ["input", C3, C1, "output"])
    b = NB101Cell(a.matrix, ["input", C1, C3, "output"])  # same graph, ops swapped along the chain
    assert space.arch_id(a) != space.arch_id(b)
    assert space.module_hash(a) != space.module_hash(b)


def test_pruning_drops_vertices_off_every_path(space: NasBench101) -> None:
    # vertex 2 is fed by the input but feeds nothing; vertex 3 feeds the output but is fed by nothing
    cell = NB101Cell([[0, 1, 1, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]],
                     ["input", C3, MP, C1, "output"])
    assert space.arch_id(cell) == "010.001.000|input,conv3x3-bn-relu,output"
    assert space.module_hash(cell) == space.module_hash(space.parse(space.arch_id(cell)))


@pytest.mark.parametrize(
    ("matrix", "reason"),
    [
        ([[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0]], "not connected"),
        ([[0] * 7 for _ in range(7)], "not connected"),
        # every edge of the 7-vertex DAG but (0, 6): 20 edges, all on input->output paths
        ([[int(x < y and (x, y) != (0, 6)) for y in range(7)] for x in range(7)], "20 edges"),
    ],
)
def test_invalid_cells_are_rejected(space: NasBench101, matrix: list[list[int]], reason: str) -> None:
    n = len(matrix)
    cell = NB101Cell(matrix, ["input", *[C3] * (n - 2), "output"])
    assert not space.is_valid(cell)
    for method in (space.arch_id, space.module_hash, space.build_onnx):
        with pytest.raises(ValueError, match=reason):
            method(cell)


def test_nine_edges_are_allowed_ten_are_not(space: NasBench101) -> None:
    chain = [(x, x + 1) for x in range(6)]
    nine = chain + [(0, 2), (1, 3), (2, 4)]
    for edges, valid in ((nine, True), ([*nine, (3, 5)], False)):
        matrix = [[int((x, y) in edges) for y in range(7)] for x in range(7)]
        assert space.is_valid(NB101Cell(matrix, ["input", *[C1] * 5, "output"])) is valid
    assert MAX_EDGES == 9


@pytest.mark.parametrize(
    ("bad", "names"),
    [
        ("010.001|input,conv3x3-bn-relu,output", "row '010'"),
        ("010.001.000|input,conv5x5,output", "conv5x5"),
        ("010.001.000|input,conv3x3-bn-relu", "3 rows but 2 ops"),
        ("010.001.000", "exactly one '|'"),
        ("011.001.000|output,conv3x3-bn-relu,input", "first op"),
        ("010.101.000|input,conv3x3-bn-relu,output", "upper-triangular"),
        ("010.000.000|input,conv3x3-bn-relu,output", "not connected"),
        ("01000000.00100000.00010000.00001000.00000100.00000010.00000001.00000000|"
         "input,maxpool3x3,maxpool3x3,maxpool3x3,maxpool3x3,maxpool3x3,maxpool3x3,output", "8 rows"),
        ("012.001.000|input,conv3x3-bn-relu,output", "row '012'"),
    ],
)
def test_malformed_ids_name_the_bad_part(space: NasBench101, bad: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        space.parse(bad)


def test_parse_accepts_any_valid_spec_and_canonicalises(space: NasBench101) -> None:
    # input -> conv1x1 -> conv3x3 -> output, plus input -> maxpool -> output, written in a
    # non-canonical vertex order and with a dangling vertex
    spec = ("011100.000001.000010.000000.000001.000000|"
            "input,maxpool3x3,conv1x1-bn-relu,conv3x3-bn-relu,conv3x3-bn-relu,output")
    cell = space.parse(spec)
    assert space.canonical(cell) == cell
    assert space.arch_id(cell) != spec and space.parse(space.arch_id(cell)) == cell
    assert cell.num_vertices == 5


# --- module hash --------------------------------------------------------------------------------
def test_module_hash_of_a_published_record(space: NasBench101) -> None:
    """The first record of official_format_30.json, copied by hand (works without the data)."""
    cell = NB101Cell(
        [[0, 1, 0, 1, 0, 0, 0], [0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 1],
         [0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0]],
        ["input", C3, C1, C1, C3, C1, "output"],
    )
    assert space.module_hash(cell) == "ff92c322c5d9d3d587d9c146a63d0807"
    assert hash_labels(cell) == [-1, 0, 1, 1, 0, 1, -2]
    assert count_parameters(space.to_onnx(cell)) == 6_315_018


def test_enumeration_of_small_cells_matches_brute_force_hashing(space: NasBench101) -> None:
    """Up to 5 vertices, ``enumerate`` yields one cell per distinct hash of all full DAGs, as
    ``generate_graphs.py`` does by brute force, and each is its own canonical form."""
    small = list(itertools.takewhile(lambda c: c.num_vertices <= 5, space.enumerate()))
    expected = set()
    for n in range(2, 6):
        slots = [(x, y) for x in range(n) for y in range(x + 1, n)]
        for bits in itertools.product((0, 1), repeat=len(slots)):
            matrix = [[0] * n for _ in range(n)]
            for (x, y), bit in zip(slots, bits, strict=True):
                matrix[x][y] = bit
            full = (all(any(row) for row in matrix[:-1])
                    and all(any(matrix[u][v] for u in range(n)) for v in range(1, n)))
            if not full or sum(bits) > MAX_EDGES:
                continue
            for labels in itertools.product(range(len(OPS)), repeat=n - 2):
                expected.add(hash_module(matrix, [-1, *labels, -2]))
    hashes = [space.module_hash(c) for c in small]
    assert len(hashes) == len(set(hashes)) == len(expected) == 2532
    assert set(hashes) == expected
    assert all(space.canonical(c) == c for c in small)
    assert space.size == 423_624
    later = list(itertools.islice(space.enumerate(), 100_000, 101_000))  # 7 vertices
    assert all(canonical_id(c) == space.arch_id(c) for c in [*small, *later])


def _reference_hash(matrix: list[list[int]], labeling: list[int]) -> str:
    """``graph_util.hash_module`` as the benchmark writes it, on Python ints."""
    def md5(text: str) -> str:
        return hashlib.md5(text.encode("utf-8")).hexdigest()

    n = len(matrix)
    in_edges = [sum(matrix[w][v] for w in range(n)) for v in range(n)]
    out_edges = [sum(matrix[v]) for v in range(n)]
    hashes = [md5(str(h)) for h in zip(out_edges, in_edges, labeling, strict=True)]
    for _ in range(n):
        hashes = [md5("".join(sorted(hashes[w] for w in range(n) if matrix[w][v])) + "|"
                      + "".join(sorted(hashes[w] for w in range(n) if matrix[v][w])) + "|" + hashes[v])
                  for v in range(n)]
    return md5(str(sorted(hashes)))


def test_the_module_hash_is_the_benchmarks_on_any_01_matrix() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 8))
        matrix = rng.integers(2, size=(n, n))  # not upper-triangular, self-loops too: the formula still holds
        labels = [-1, *rng.integers(3, size=n - 2).tolist(), -2]
        expected = _reference_hash(matrix.tolist(), labels)
        assert hash_module(matrix.tolist(), labels) == expected
        assert hash_module(matrix, np.array(labels)) == expected  # numpy in, Python ints hashed
    with pytest.raises(ValueError, match="one label per vertex"):
        hash_module([[0, 1, 0], [0, 0, 1], [0, 0, 0]], [-1, -2])
    with pytest.raises(ValueError, match="0/1"):
        hash_module([[0, 2], [0, 0]], [-1, -2])


def test_module_hashes_share_the_cells_among_parts_in_generation_order(space: NasBench101) -> None:
    """Every cell once over the parts, its hash its cell's, in the order of ``enumerate`` within a part."""
    def small(part: int, parts: int) -> list:
        return list(itertools.takewhile(lambda item: item[1][0] <= 5, module_hashes(part, parts)))

    whole = small(0, 1)
    cells = list(itertools.takewhile(lambda c: c.num_vertices <= 5, space.enumerate()))
    assert [space.cell_of(key) for _, key in whole] == cells
    assert [h for h, _ in whole] == [space.module_hash(c) for c in cells]
    parts = [small(k, 3) for k in range(3)]
    assert all(parts) and sorted(item for part in parts for item in part) == sorted(whole)
    assert all(part == [item for item in whole if item in part] for part in parts)
    with pytest.raises(ValueError, match="part 3 of 3"):
        next(module_hashes(3, 3))


# --- drawing --------------------------------------------------------------------------------------
def test_samples_are_valid_canonical_cells(space: NasBench101) -> None:
    rng = np.random.default_rng(3)
    cells = [space.sample(rng) for _ in range(300)]
    assert all(space.is_valid(c) and space.canonical(c) == c for c in cells)
    assert all(c.num_vertices <= 7 and c.num_edges <= MAX_EDGES for c in cells)
    assert {c.num_vertices for c in cells} >= {3, 4, 5, 6}


def _params(edges: set[tuple[int, int]], op: str) -> dict[str, object]:
    params: dict[str, object] = {f"edge_{x}_{y}": int((x, y) in edges) for x, y in EDGE_SLOTS}
    params.update({f"op_{v}": op for v in range(1, 6)})
    return params


def test_suggest_uses_a_valid_spec_as_it_is(space: NasBench101) -> None:
    edges = {(0, 1), (1, 2), (2, 6), (0, 3), (3, 6), (4, 5)}  # 4 -> 5 dangles: pruned, not repaired
    cell = space.suggest(optuna.trial.FixedTrial(_params(edges, C3)))
    spec = NB101Cell([[int((x, y) in edges) for y in range(7)] for x in range(7)],
                     ["input", *[C3] * 5, "output"])
    assert cell == space.canonical(spec)
    # the benchmark's relabelling puts the single-vertex branch first (smaller edge bit mask)
    assert space.arch_id(cell) == "01100.00001.00010.00001.00000|input," + ",".join([C3] * 3) + ",output"


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        # all 21 edges: the highest-bit edges that keep every vertex go first, leaving a chain
        # with shortcuts from the input
        (set(EDGE_SLOTS), "0111000.0011000.0001000.0000100.0000010.0000001.0000000"),
        # no edge at all: every interior vertex is joined to the input and the output
        (set(), "011110.000001.000001.000001.000001.000000"),
    ],
)
def test_suggest_repairs_invalid_specs(space: NasBench101, edges: set[tuple[int, int]],
                                       expected: str) -> None:
    params = _params(edges, MP)
    cell = NB101Cell([[int((x, y) in edges) for y in range(7)] for x in range(7)],
                     ["input", *[MP] * 5, "output"])
    assert not space.is_valid(cell)
    first = space.arch_id(space.suggest(optuna.trial.FixedTrial(params)))
    assert first == space.arch_id(space.suggest(optuna.trial.FixedTrial(params)))
    assert first.split("|")[0] == expected


def test_suggest_never_fails(space: NasBench101) -> None:
    rng = np.random.default_rng(0)
    ids = set()
    for _ in range(300):
        params = {f"edge_{x}_{y}": int(rng.integers(2)) for x, y in EDGE_SLOTS}
        params.update({f"op_{v}": OPS[rng.integers(len(OPS))] for v in range(1, 6)})
        cell = space.suggest(optuna.trial.FixedTrial(params))
        assert space.is_valid(cell) and space.canonical(cell) == cell
        ids.add(space.arch_id(cell))
    assert len(ids) > 150


# --- network ----------------------------------------------------------------------------------
def test_vertex_channels_follow_the_benchmark() -> None:
    # three vertices feed the output: 128 = 43 + 43 + 42, lowest-numbered first; vertex 1 also
    # feeds vertex 3 (42 channels), which then reads it truncated
    matrix = [[0, 1, 1, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]]
    assert compute_vertex_channels(64, 128, matrix) == [64, 43, 43, 42, 128]
    # vertex 2 alone feeds the output (the input's edge is a projection, not a share); vertex 1
    # feeds only vertex 2 and takes its channels
    chain = [[0, 1, 0, 1], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]
    assert compute_vertex_channels(128, 256, chain) == [128, 256, 256, 256]
    assert compute_vertex_channels(128, 256, [[0, 1], [0, 0]]) == [128, 256]


def test_truncation_concat_and_projection_appear_in_the_text(space: NasBench101) -> None:
    matrix = [[0, 1, 1, 0, 0, 1], [0, 0, 0, 1, 0, 1], [0, 0, 0, 0, 1, 1],
              [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0]]
    cell = NB101Cell(matrix, ["input", C3, C3, C1, MP, "output"])
    text = space.to_text(cell)
    # 256 = 64 * 4: even; 512 / 4 = 128; 128 / 4 = 32 -> no truncation for this split
    assert "truncate" not in text and "Concat <axis = 1>" in text and "Add (" in text
    uneven = space.to_text(space.parse(UNEVEN))
    assert "truncate_85 (x) =>" in uneven  # 256 = 86 + 85 + 85; vertex 1 (86) feeds vertex 3 (85)
    assert "Slice (x," in uneven


def test_operations_become_the_benchmark_layers(space: NasBench101) -> None:
    """The stored Inception-like cell: 4 input projections, ops conv3x3, conv1x1, maxpool, conv3x3,
    conv3x3; the output concatenates 4 vertices. Nine cells plus stem, two downsamplings and head."""
    model = onnx.inliner.inline_local_functions(space.build_onnx(INCEPTION))
    counts: dict[str, int] = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    kernels = sorted(next(a.ints for a in n.attribute if a.name == "kernel_shape")[0]
                     for n in model.graph.node if n.op_type in ("Conv", "MaxPool"))
    assert counts["Conv"] == counts["BatchNormalization"] == counts["Relu"] == 1 + 9 * 8
    assert kernels.count(3) == 1 + 9 * (3 + 1)  # stem; three 3x3 convs and one 3x3 max pool per cell
    assert kernels.count(2) == 2  # 2x2 max pools between stacks
    assert counts["MaxPool"] == 9 + 2 and counts["Concat"] == 9 and counts["Gemm"] == 1
    assert "AveragePool" not in counts and "Add" not in counts and "Sum" not in counts


def test_text_repeats_no_block(space: NasBench101) -> None:
    text = space.to_text(INCEPTION)
    for name, calls in (("cell_128", 3), ("cell_128_256", 1), ("cell_256", 2), ("cell_256_512", 1),
                        ("cell_512", 2)):
        assert text.count(f"\n{name} (x) =>") == 1
        assert text.count(f"= nb101.{name} (") == calls
    assert text.count("MaxPool <kernel_shape = [2,2],strides = [2,2]>") == 2
    assert len(text) < 8000


def test_model_runs_with_the_expected_shapes(space: NasBench101) -> None:
    model = space.to_onnx(INCEPTION)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {tuple(d.dim_value for d in v.type.tensor_type.shape.dim) for v in inferred.graph.value_info}
    assert {(1, 128, 32, 32), (1, 256, 16, 16), (1, 512, 8, 8), (1, 512)} <= shapes


# --- fidelity to the published data -----------------------------------------------------------
@pytest.fixture(scope="module")
def first_20k(data_dir: Path) -> dict[str, int]:
    """Module hash -> published trainable parameters for the first 20,001 cells by hash."""
    with open(data_dir / "nb101" / "first_20k_by_hash.json") as f:
        table = json.load(f)
    return dict(zip(table["key"], table["trainable_parameters"], strict=True))


def test_official_records(space: NasBench101, data_dir: Path) -> None:
    """All 30 records: hash, stored relabelling and trainable parameters (materialised model)."""
    with open(data_dir / "nb101" / "official_format_30.json") as f:
        records = json.load(f)
    assert len(records) == 30
    for module_hash, (fixed, _) in records.items():
        cell = NB101Cell(fixed["module_adjacency"], fixed["module_operations"])
        assert space.module_hash(cell) == module_hash
        assert space.canonical(cell) == cell  # the benchmark stores exactly our representative
        model = space.to_onnx(cell)
        assert count_parameters(model) == fixed["trainable_parameters"], module_hash
        assert structural_parameters(space.build_onnx(cell)) == count_parameters(model)


def test_naslib_zero_cost_cells(space: NasBench101, data_dir: Path, first_20k: dict[str, int]) -> None:
    """NASLib's 500 cells: its ``params`` are those of each spec built in its own vertex order.

    For 28 of them another relabelling (the benchmark's) splits channels differently. Where such a
    cell is in the official first-20k table, the official count is ours, not NASLib's.
    """
    with open(data_dir / "nb101" / "zero_cost_500.json") as f:
        records = json.load(f)["nasbench101"]["cifar10"]
    assert len(records) == 500
    differ, joined = [], 0
    for key, record in records.items():
        code = ast.literal_eval(key)
        cell = NB101Cell([code[7 * i: 7 * i + 7] for i in range(7)], [NASLIB_OPS[c] for c in code[49:]])
        published = round(record["params"] * 1e6)
        assert structural_parameters(space.build_spec_onnx(cell)) == published, key
        ours = structural_parameters(space.build_onnx(cell))
        if ours != published:
            differ.append(key)
        official = first_20k.get(space.module_hash(cell))
        if official is not None:
            joined += 1
            assert ours == official, key
    assert len(differ) == 28
    assert joined == 94


def test_first_20k_table_joins_by_hash(space: NasBench101, first_20k: dict[str, int]) -> None:
    """Hashes of sampled cells find their rows (the table holds the 20,001 smallest hashes, so
    about 4.7 % of cells), and every joined row's parameter count is ours."""
    largest = max(first_20k)
    rng = np.random.default_rng(0)
    seen, joined = set(), 0
    while joined < 60:
        cell = space.sample(rng)
        module_hash = space.module_hash(cell)
        if module_hash in seen:
            continue
        seen.add(module_hash)
        if module_hash <= largest:
            assert module_hash in first_20k  # every hash below the cut-off is in the table
            assert structural_parameters(space.build_onnx(cell)) == first_20k[module_hash], module_hash
            joined += 1
    assert len(seen) < 4000


def test_structural_count_matches_materialised_count(space: NasBench101) -> None:
    model = space.build_onnx(space.parse(UNEVEN))
    assert structural_parameters(model) == count_parameters(materialize(model))
