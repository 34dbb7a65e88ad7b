"""NDS cell spaces (Amoeba, DARTS, ENAS, NASNet, PNAS), NB301 and the NDS AnyNet spaces: conformance,
ids, the published record format, and parameter counts that published numbers pin down."""

from __future__ import annotations

import numpy as np
import pytest

from exporters import count_parameters, materialize
from search_spaces import get_space
from search_spaces.nds import (
    CELL_SPECS,
    NB301,
    NDSDARTS,
    NDSENAS,
    NDSPNAS,
    CellArch,
    NDSAmoeba,
    NDSNASNet,
    concat_nodes,
)
from search_spaces.testing import SearchSpaceTests

#: DARTS' own genotypes (quark0/darts genotypes.py), as (op, input) pairs.
DARTS_V2_NORMAL = [("sep_conv_3x3", 0), ("sep_conv_3x3", 1), ("sep_conv_3x3", 0), ("sep_conv_3x3", 1),
                   ("sep_conv_3x3", 1), ("skip_connect", 0), ("skip_connect", 0), ("dil_conv_3x3", 2)]
DARTS_V2_REDUCE = [("max_pool_3x3", 0), ("max_pool_3x3", 1), ("skip_connect", 2), ("max_pool_3x3", 1),
                   ("max_pool_3x3", 0), ("skip_connect", 2), ("skip_connect", 2), ("max_pool_3x3", 1)]
#: DARTS' training log reports "param size = 3.349342MB" for DARTS_V2 at C = 36, 20 cells (no aux head).
DARTS_V2_PARAMS = 3_349_342
NASNET = {  # NASNet-A and AmoebaNet-A in DARTS' genotypes.py, with their loose-end concat lists
    "normal": [["sep_conv_5x5", 1], ["sep_conv_3x3", 0], ["sep_conv_5x5", 0], ["sep_conv_3x3", 0],
               ["avg_pool_3x3", 1], ["skip_connect", 0], ["avg_pool_3x3", 0], ["avg_pool_3x3", 0],
               ["sep_conv_3x3", 1], ["skip_connect", 1]],
    "normal_concat": [2, 3, 4, 5, 6],
    "reduce": [["sep_conv_5x5", 1], ["sep_conv_7x7", 0], ["max_pool_3x3", 1], ["sep_conv_7x7", 0],
               ["avg_pool_3x3", 1], ["sep_conv_5x5", 0], ["skip_connect", 3], ["avg_pool_3x3", 2],
               ["sep_conv_3x3", 2], ["max_pool_3x3", 1]],
    "reduce_concat": [4, 5, 6],
}
AMOEBA = {
    "normal": [["avg_pool_3x3", 0], ["max_pool_3x3", 1], ["sep_conv_3x3", 0], ["sep_conv_5x5", 2],
               ["sep_conv_3x3", 0], ["avg_pool_3x3", 3], ["sep_conv_3x3", 1], ["skip_connect", 1],
               ["skip_connect", 0], ["avg_pool_3x3", 1]],
    "normal_concat": [4, 5, 6],
    "reduce": [["avg_pool_3x3", 0], ["sep_conv_3x3", 1], ["max_pool_3x3", 0], ["sep_conv_7x7", 2],
               ["sep_conv_7x7", 0], ["avg_pool_3x3", 1], ["max_pool_3x3", 0], ["max_pool_3x3", 1],
               ["conv_7x1_1x7", 0], ["sep_conv_3x3", 5]],
    "reduce_concat": [3, 4, 6],
}


class TestNB301(SearchSpaceTests):
    space = NB301()
    n_archs = 2


class TestNDSDARTS(SearchSpaceTests):
    space = NDSDARTS()
    n_archs = 2


class TestNDSAmoeba(SearchSpaceTests):
    space = NDSAmoeba()
    n_archs = 2


class TestNDSENAS(SearchSpaceTests):
    space = NDSENAS()
    n_archs = 2


class TestNDSNASNet(SearchSpaceTests):
    space = NDSNASNet()
    n_archs = 2


class TestNDSPNAS(SearchSpaceTests):
    space = NDSPNAS()
    n_archs = 2


# --- cell spaces --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["nb301", "nds_amoeba", "nds_darts", "nds_enas", "nds_nasnet", "nds_pnas"])
def test_cell_spaces_are_registered(name: str) -> None:
    space = get_space(name)
    assert space.name == name and space.spec is CELL_SPECS[name]


def test_op_sets_and_nodes() -> None:
    names = ("nds_nasnet", "nds_amoeba", "nds_pnas", "nds_enas", "nds_darts", "nb301")
    assert [len(CELL_SPECS[n].ops) for n in names] == [13, 8, 8, 5, 8, 7]
    assert [CELL_SPECS[n].nodes for n in names] == [5, 5, 5, 5, 4, 4]
    assert set(CELL_SPECS["nds_darts"].ops) == set(CELL_SPECS["nb301"].ops) | {"none"}


def test_darts_v2_has_the_published_parameter_count() -> None:
    """Pins stem, preprocessing, sep/dil convs, FactorizedReduce, reduction positions and the head."""
    arch = CellArch(DARTS_V2_NORMAL, DARTS_V2_REDUCE, 36, 20)
    assert count_parameters(materialize(NDSDARTS().build_onnx(arch), weights=False)) == DARTS_V2_PARAMS


@pytest.mark.parametrize(("space", "net"), [(NDSNASNet(), NASNET), (NDSAmoeba(), AMOEBA)])
def test_loose_ends_agree_with_the_published_genotypes(space, net) -> None:
    arch = space.from_nds_net({"genotype": net, "width": 16, "depth": 8, "aux": False, "drop_prob": 0.0})
    assert concat_nodes(arch.normal, True) == tuple(net["normal_concat"])
    assert concat_nodes(arch.reduce, True) == tuple(net["reduce_concat"])
    assert space.parse(space.arch_id(arch)) == arch


def test_nds_net_with_a_wrong_concat_is_refused() -> None:
    net = {"genotype": dict(NASNET, reduce_concat=[2, 3, 4, 5, 6]), "width": 16, "depth": 8}
    with pytest.raises(ValueError, match=r"reduce_concat \[2, 3, 4, 5, 6\].*loose ends.*\[4, 5, 6\]"):
        NDSNASNet().from_nds_net(net)
    with pytest.raises(ValueError, match="unknown NASNet operation 'none'"):
        NDSNASNet().from_nds_net({"genotype": dict(NASNET, normal=[["none", 0]] * 10), "width": 16,
                                  "depth": 8})


def test_pairs_are_stored_in_canonical_order() -> None:
    a = CellArch(DARTS_V2_NORMAL, DARTS_V2_REDUCE, 16, 8)
    swapped = [p for j in range(0, 8, 2) for p in (DARTS_V2_NORMAL[j + 1], DARTS_V2_NORMAL[j])]
    assert CellArch(swapped, DARTS_V2_REDUCE, 16, 8) == a
    space = NDSDARTS()
    assert space.to_text(CellArch(swapped, DARTS_V2_REDUCE, 16, 8)) == space.to_text(a)


DARTS_ID = NDSDARTS().arch_id(CellArch(DARTS_V2_NORMAL, DARTS_V2_REDUCE, 16, 8))


@pytest.mark.parametrize(
    ("bad", "names"),
    [
        (DARTS_ID.replace("width=16", "width=15"), "width 15 must be even"),
        (DARTS_ID.replace("width=16", "width=x"), "width 'x' is not a positive integer"),
        (DARTS_ID.replace("depth=8", "depth=0"), "depth '0' is not a positive integer"),
        (DARTS_ID.replace("width=16;", ""), "expected 4 ';'-separated parts"),
        (DARTS_ID.replace("depth=", "cells="), "part 'cells=8' should be 'depth=…'"),
        (DARTS_ID.replace("dil_conv_3x3~2", "dil_conv_7x7~2"), "unknown DARTS operation 'dil_conv_7x7'"),
        (DARTS_ID.replace("dil_conv_3x3~2", "dil_conv_3x3~5"), "normal node 3 reads state 5"),
        (DARTS_ID.replace("skip_connect~0+dil_conv_3x3~2", "dil_conv_3x3~2+skip_connect~0"), "non-canonical"),
        (DARTS_ID.replace("skip_connect~0+dil_conv_3x3~2", "skip_connect~2+dil_conv_3x3~2"), "state 2 twice"),
        (DARTS_ID.replace("|skip_connect~0+dil_conv_3x3~2", ""), "needs 4 nodes"),
        (DARTS_ID.replace("+dil_conv_3x3~2", ""), "needs two entries"),
        (DARTS_ID.replace("dil_conv_3x3~2", "dil_conv_3x3"), "'dil_conv_3x3' should be 'op~input'"),
    ],
)
def test_malformed_ids_name_the_bad_part(bad: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        NDSDARTS().parse(bad)


def test_nb301_size_and_fixed_shape() -> None:
    space = NB301()
    assert space.size == (49 * 3 * 49 * 6 * 49 * 10 * 49) ** 2  # about 1e18, as NB301 states
    arch = space.sample(np.random.default_rng(0))
    assert (arch.width, arch.depth) == (32, 8)
    assert not space.arch_id(arch).startswith("width")
    with pytest.raises(ValueError, match="fixes width and depth"):
        space.arch_id(CellArch(arch.normal, arch.reduce, 16, 8))
    with pytest.raises(ValueError, match="unknown NB301 operation 'none'"):
        space.parse(space.arch_id(arch).replace(arch.normal[0][0] + "~", "none~", 1))


def test_nb301_compact_round_trip() -> None:
    space = NB301()
    compact = ("[[(0, 0), (1, 5), (1, 1), (0, 1), (1, 3), (0, 3), (1, 3), (3, 2)], "
               "[(1, 0), (0, 2), (1, 3), (0, 3), (3, 0), (0, 1), (2, 0), (3, 6)]]")
    arch = space.from_compact(compact)
    assert arch.normal[:2] == (("max_pool_3x3", 0), ("dil_conv_3x3", 1))
    assert space.from_compact(space.to_compact(arch)) == arch
    with pytest.raises(ValueError, match="op ids 0..6"):
        space.from_compact([[(0, 7), (1, 0)] * 4, [(0, 0), (1, 0)] * 4])
    with pytest.raises(ValueError, match="malformed NB301 compact string"):
        space.from_compact("[[(0, 0)")


def test_depth_sets_the_reduction_cells() -> None:
    """Cells depth//3 and 2·depth//3 reduce: for depth 4 that is cells 1 and 2 (32 → 16 → 8 pixels)."""
    space = NDSENAS()
    arch = space.sample(np.random.default_rng(3))
    text = space.to_text(CellArch(arch.normal, arch.reduce, 16, 4))
    assert text.count("reduce_") >= 2 and "normal_" in text
