"""NAS-Bench-201: conformance, id parsing, and fidelity to the published benchmark."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import onnx
import pytest

from exporters import count_macs, count_parameters
from search_spaces import NasBench201, NB201Arch, get_space
from search_spaces.nasbench201 import live_ops
from search_spaces.testing import SearchSpaceTests

BEST = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


class TestNasBench201Conformance(SearchSpaceTests):
    space = NasBench201()


@pytest.fixture(scope="module")
def space() -> NasBench201:
    return NasBench201()


def test_registered_under_its_name() -> None:
    assert isinstance(get_space("nb201"), NasBench201)


def test_arch_string_edge_order(space: NasBench201) -> None:
    arch = space.parse("|nor_conv_1x1~0|+|skip_connect~0|avg_pool_3x3~1|+|none~0|nor_conv_3x3~1|none~2|")
    assert arch.ops == ("nor_conv_1x1", "skip_connect", "avg_pool_3x3", "none", "nor_conv_3x3", "none")


@pytest.mark.parametrize(
    ("bad", "names"),
    [
        ("|nor_conv_3x3~0|+|nor_conv_3x3~0|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|", "node 2"),
        ("|conv_5x5~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|none~1|none~2|", "conv_5x5"),
        ("|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|none~1|none~2|", "nor_conv_3x3~1"),
        ("nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|none~1|none~2|", "start and end"),
        ("|none~0|+|none~0|none~1|", "3 node groups"),
    ],
)
def test_malformed_ids_name_the_bad_part(space: NasBench201, bad: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        space.parse(bad)


def test_enumeration_covers_the_benchmark(space: NasBench201, data_dir: Path) -> None:
    with open(data_dir / "nb201" / "archs.csv", newline="") as f:
        published = {row["arch_str"] for row in csv.DictReader(f)}
    assert {space.arch_id(a) for a in space.enumerate()} == published


def test_parameter_counts_match_naslib_exactly(space: NasBench201, data_dir: Path) -> None:
    """NASLib's table gives params to 1e-6 M, i.e. exact counts, for 725 cells."""
    with open(data_dir / "nb201" / "zero_cost_725.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["dataset"] == "cifar10"]
    assert len(rows) == 725
    for row in rows[:300]:
        count = count_parameters(space.to_onnx(space.parse(row["arch_str"])))
        assert count == round(float(row["params"]) * 1e6), row["arch_str"]


def test_parameter_counts_match_the_200_epoch_table(space: NasBench201, data_dir: Path) -> None:
    """``params_m`` of cifar10_200ep.csv (4 decimals) on 300 random cells.

    That table disagrees with our count on 204 of the 15,625 cells; NASLib's exact table agrees
    with us on the 11 of those it contains (see experiments/README.md), so those rows are errors in
    the 200-epoch table. On a random 300 we allow the same small rate, and every row we do disagree
    on must be one where NASLib's table sides with us or that it does not contain.
    """
    with open(data_dir / "nb201" / "cifar10_200ep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(data_dir / "nb201" / "zero_cost_725.csv", newline="") as f:
        exact = {r["arch_str"]: float(r["params"]) for r in csv.DictReader(f) if r["dataset"] == "cifar10"}
    picked = np.random.default_rng(0).choice(len(rows), size=300, replace=False)
    mismatched = []
    for k in picked:
        row = rows[k]
        count = count_parameters(space.to_onnx(space.parse(row["arch_str"])))
        if round(count / 1e6, 4) != float(row["params_m"]):
            mismatched.append(row["arch_str"])
            if row["arch_str"] in exact:
                assert count == round(exact[row["arch_str"]] * 1e6)
    assert len(mismatched) <= 9, mismatched  # 204/15,625 = 1.3 %; 9/300 = 3 %


def test_known_parameter_counts(space: NasBench201) -> None:
    """Works without the data directory: two rows of cifar10_200ep.csv, copied by hand."""
    assert round(count_parameters(space.to_onnx(space.parse(BEST))) / 1e6, 4) == 1.2885
    assert round(count_parameters(space.to_onnx(NB201Arch(("none",) * 6))) / 1e6, 4) == 0.0733


def test_all_none_cell_outputs_zeros_like_the_benchmark(space: NasBench201) -> None:
    """A node whose every input edge is 'none' is a zero tensor, not a missing value."""
    model = space.to_onnx(NB201Arch(("none",) * 6))
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Mul") == 3 * 15  # nodes 1, 2 and 3 of each of the 15 cells are zeros


def test_text_repeats_no_block(space: NasBench201) -> None:
    text = space.to_text(space.parse(BEST))
    assert text.count("cell_16 (x) =>") == 1
    assert text.count("= nb201.cell_16 (") == 5
    assert "param.Tensor" in text and "Conv" in text


def test_a_cell_that_is_a_single_skip_edge_still_has_typed_shapes() -> None:
    # Regression: the cell function returned its own input, and inlining left the output untyped,
    # so strict shape inference (count_macs) failed on 125 of the 15,625 cells.
    space = NasBench201()
    arch = space.parse("|none~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    model = space.to_onnx(arch)
    onnx.checker.check_model(model, full_check=True)
    assert count_macs(model) == count_macs(space.to_onnx(space.parse(
        "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|")))


def test_equivalent_cells_differ_only_in_dead_edges(space: NasBench201) -> None:
    assert space.equivalents(space.parse(BEST)) == []  # no dead edge
    # 0->1 feeds node 1, whose result reaches nothing: only 0->3 is live
    arch = space.parse("|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    equivalents = {space.arch_id(a) for a in space.equivalents(arch)}
    assert "|avg_pool_3x3~0|+|none~0|nor_conv_1x1~1|+|skip_connect~0|none~1|none~2|" in equivalents
    assert "|none~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|" in equivalents
    assert "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|skip_connect~1|none~2|" not in equivalents
    assert space.arch_id(arch) not in equivalents


def test_equivalence_partitions_the_space(space: NasBench201) -> None:
    assert len({live_ops(arch.ops) for arch in space.enumerate()}) == 9445
    rng = np.random.default_rng(0)
    for arch in [space.sample(rng) for _ in range(200)]:
        members = {space.arch_id(arch), *map(space.arch_id, space.equivalents(arch))}
        for other in rng.choice(sorted(members), size=min(3, len(members)), replace=False):
            assert {other, *map(space.arch_id, space.equivalents(space.parse(other)))} == members
    zero = {space.arch_id(a) for a in space.equivalents(NB201Arch(("none",) * 6))}  # output all zeros
    assert "|nor_conv_3x3~0|+|skip_connect~0|none~1|+|none~0|none~1|none~2|" in zero


def test_equivalent_cells_train_to_the_same_accuracy(space: NasBench201, data_dir: Path) -> None:
    from nasrlm.data import load_nb201

    table = load_nb201(["acc"], str(data_dir))
    acc = dict(zip(table.ids, table.column("acc"), strict=True))
    spreads = []
    for arch_id in table.ids[:3000]:
        equivalents = space.equivalents(space.parse(arch_id))
        if equivalents:
            spreads.append(np.std([acc[arch_id], *(acc[space.arch_id(a)] for a in equivalents)]))
    assert len(spreads) > 1000
    assert np.mean(spreads) < 0.5 < 10 < np.std(table.column("acc"))
