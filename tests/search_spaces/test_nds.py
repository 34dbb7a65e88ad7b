"""NDS cell spaces (Amoeba, DARTS, ENAS, NASNet, PNAS), NB301 and the NDS AnyNet spaces: conformance,
ids, the published record format, and parameter counts that published numbers pin down."""

from __future__ import annotations

import numpy as np
import pytest

from exporters import count_parameters, materialize
from search_spaces import get_space
from search_spaces.anynet import ANYNET_SPECS, NDSResNet, NDSResNeXtA, NDSResNeXtB, NDSVanilla
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


# --- AnyNet spaces ------------------------------------------------------------------------------------
class TestNDSResNet(SearchSpaceTests):
    space = NDSResNet()
    n_archs = 2


class TestNDSVanilla(SearchSpaceTests):
    space = NDSVanilla()
    n_archs = 2


class TestNDSResNeXtA(SearchSpaceTests):
    space = NDSResNeXtA()
    n_archs = 2


class TestNDSResNeXtB(SearchSpaceTests):
    space = NDSResNeXtB()
    n_archs = 2


#: ResNet-56 of He et al. with parameter-free shortcuts has 853,018 parameters (e.g. akamaster's CIFAR
#: ResNets); pycls' projection shortcuts add a 1×1 conv + BN at the two stage transitions.
RESNET56_PARAMS = 853_018 + (16 * 32 + 2 * 32) + (32 * 64 + 2 * 64)


@pytest.mark.parametrize("name", ["nds_resnet", "nds_resnext-a", "nds_resnext-b", "nds_vanilla"])
def test_anynet_spaces_are_registered(name: str) -> None:
    assert get_space(name).spec is ANYNET_SPECS[name]


def test_resnet56_has_the_known_parameter_count() -> None:
    """pycls' R-56 NDS config (res_basic_block, d = 9, 9, 9, w = 16, 32, 64, stem 16, strides 1, 2, 2)."""
    space = NDSResNet()
    arch = space.parse("d=9,9,9;w=16,32,64")
    assert count_parameters(materialize(space.build_onnx(arch), weights=False)) == RESNET56_PARAMS


def test_bottleneck_block_parameters() -> None:
    """One bottleneck block per stage, counted by hand: 1×1 → w_b, grouped 3×3, 1×1 → w, projections."""
    space = NDSResNeXtA()
    arch = space.parse("d=1,1,1;w=64,128,256;b=2,4,1;g=2,4,4")
    stem = 3 * 16 * 9 + 2 * 16
    blocks = 0
    for w_in, w, w_b, g in ((16, 64, 32, 2), (64, 128, 32, 4), (128, 256, 256, 4)):
        blocks += w_in * w_b + 2 * w_b + w_b * (w_b // g) * 9 + 2 * w_b + w_b * w + 2 * w  # f
        blocks += w_in * w + 2 * w  # projection (width changes in every stage here)
    head = 256 * 10 + 10
    assert count_parameters(materialize(space.build_onnx(arch), weights=False)) == stem + blocks + head


def test_vanilla_has_no_shortcut() -> None:
    text = NDSVanilla().to_text(NDSVanilla().parse("d=2,2,2;w=16,32,64"))
    assert "Add" not in text and "res_" not in text


@pytest.mark.parametrize(
    ("space", "bad", "names"),
    [
        (NDSResNet(), "d=1,2;w=16,24,32", "d needs 3 comma-separated values, found 2"),
        (NDSResNet(), "d=1,2,0;w=16,24,32", "d value '0' is not a positive integer"),
        (NDSResNet(), "d=1,2,3;w=16,24,32;b=1,1,1", "expected 2 ';'-separated parts"),
        (NDSResNet(), "w=16,24,32;d=1,2,3", "part 'w=16,24,32' should be 'd=…'"),
        (NDSResNeXtA(), "d=1,2,3;w=64,64,64", "expected 4 ';'-separated parts"),
        (NDSResNeXtB(), "d=1,1,1;w=64,64,64;b=4,1,1;g=32,1,1", "stage 1: 32 groups do not divide"),
    ],
)
def test_malformed_anynet_ids_name_the_bad_part(space, bad: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        space.parse(bad)


def test_anynet_from_nds_net() -> None:
    net = {"block_type": "res_bottleneck_block", "ds": [1, 2, 4], "ws": [64, 128, 256], "ss": [1, 2, 2],
           "bot_muls": [1.0, 0.5, 0.25], "num_gs": [1, 2, 4]}
    arch = NDSResNeXtB().from_nds_net(net)
    assert NDSResNeXtB().arch_id(arch) == "d=1,2,4;w=64,128,256;b=1,2,4;g=1,2,4"
    assert NDSVanilla().from_nds_net({"block_type": "double_plain_block", "ds": [1, 2, 3], "ws": [16, 24, 32],
                                      "bot_muls": [], "num_gs": []}).depths == (1, 2, 3)
    with pytest.raises(ValueError, match="block_type starting with res_basic"):
        NDSResNet().from_nds_net(net)
    with pytest.raises(ValueError, match=r"ss \[2, 2, 2\]"):
        NDSResNeXtB().from_nds_net(dict(net, ss=[2, 2, 2]))
    with pytest.raises(ValueError, match="multiplier 0.3 is not 1/b"):
        NDSResNeXtB().from_nds_net(dict(net, bot_muls=[0.3, 0.5, 0.25]))


def test_sampling_stays_on_the_published_grids() -> None:
    rng = np.random.default_rng(0)
    for name, spec in ANYNET_SPECS.items():
        space = get_space(name)
        for _ in range(50):
            arch = space.sample(rng)
            assert set(arch.depths) <= set(spec.depths) and set(arch.widths) <= set(spec.widths)
            assert set(arch.bot_ratios) <= set(spec.bot_ratios) and set(arch.groups) <= set(spec.groups)
    assert len(ANYNET_SPECS["nds_resnet"].depths) == 9 and len(ANYNET_SPECS["nds_resnet"].widths) == 12
    assert ANYNET_SPECS["nds_resnext-b"].groups == (1, 2, 4, 8, 16, 32, 64)
