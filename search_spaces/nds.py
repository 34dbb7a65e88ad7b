"""NDS' NASNet-style cell spaces (Amoeba, DARTS, ENAS, NASNet, PNAS; CIFAR-10, ImageNet) and NB301, in ONNX.

On CIFAR-10 all six share one network, pycls' ``NetworkCIFAR`` (ported from DARTS; Radosavovic et al., "On
Network Design Spaces for Visual Recognition", 2019), read from pycls ``models/nas/nas.py`` and
``models/nas/operations.py`` and cross-checked against NNI's NDS port
(``nni/retiarii/hub/pytorch/nasnet.py``):

* input 1×3×32×32 (CIFAR-10), 10 classes;
* stem: 3×3 conv 3→3·C (padding 1, no bias), BatchNorm — no ReLU;
* ``depth`` cells; cells ``depth // 3`` and ``2 * depth // 3`` are reduction cells, which double C;
* a cell takes the outputs of the two previous cells (both the stem at first) and preprocesses them to C
  channels: the older one by FactorizedReduce when the previous cell reduced, else ReLU–1×1 conv–BN; the
  newer one always by ReLU–1×1 conv–BN;
* each of the cell's nodes sums two operations, each applied to an earlier state (0, 1 = the two cell
  inputs, 2… = earlier nodes); in a reduction cell the operations on states 0 and 1 have stride 2;
* the cell's output concatenates its nodes: all of them (DARTS, PNAS) or only the "loose ends" that no
  node of the cell reads (NASNet, Amoeba, ENAS), so its width is C times that count;
* head: global average pool, linear (with bias). Evaluation graph: no auxiliary head, no drop path.

Operations (pycls' ``OPS`` with ``affine=True``; every conv is bias-free, every BatchNorm affine):
``sep_conv_k`` is ReLU, k×k depthwise (stride s), 1×1, BN, then again ReLU, k×k depthwise (stride 1), 1×1,
BN — the separable conv applied twice; ``dil_conv_k`` is ReLU, k×k depthwise with dilation 2 (padding
k - 1), 1×1, BN, once; ``dil_sep_conv_3x3`` is ``sep_conv_3x3`` with both depthwise convs dilated by 2;
``conv_kxk`` is ReLU–conv–BN; ``conv_1xk_kx1`` is ReLU, 1×k then k×1 conv, one BN; ``max_pool_k`` and
``avg_pool_3x3`` pad k // 2, average pooling not counting the padding; pools carry no BatchNorm (the
BN-after-pool of DARTS' *search* network is absent from its evaluation network); ``skip_connect`` is the
identity, or FactorizedReduce(C, C) at stride 2 (ReLU, two 1×1 stride-2 convs to C/2 channels, the
second on the input shifted by one pixel, concatenated, BN); ``none`` is zero (subsampled at stride 2).

Spaces (op lists and node counts as in NNI's NDS port and the NDS op tables):

====== ===== ======================================================================== ==========
space  nodes operations                                                               output
====== ===== ======================================================================== ==========
NASNet 5     skip, conv 3x1_1x3 / 7x1_1x7, dil_conv_3x3, avg 3, max 3/5/7, conv 1/3,   loose ends
             sep_conv 3/5/7
Amoeba 5     skip, sep_conv 3/5/7, avg 3, max 3, dil_sep_conv_3x3, conv_7x1_1x7         loose ends
PNAS   5     sep_conv 3/5/7, conv_7x1_1x7, skip, avg 3, max 3, dil_conv_3x3             all nodes
ENAS   5     skip, sep_conv 3/5, avg 3, max 3                                          loose ends
DARTS  4     none, max 3, avg 3, skip, sep_conv 3/5, dil_conv 3/5                       all nodes
====== ===== ======================================================================== ==========

:meth:`sample` draws width C from {16, 24, 32} and depth from {4, 8, 12, 16, 20} cells, the choices
NNI's NDS port gives these spaces (the NDS paper itself could not be read where this was written), and
operations and inputs uniformly; two inputs of a node may coincide except in DARTS and NB301, whose
nodes keep two distinct predecessors (NDS did not publish its sampler: this is our reading). Ids accept
any even width and any depth ≥ 1, so that every record of a published NDS file can be named.

ImageNet (``nds_amoeba_in``, ``nds_darts_in``, ``nds_enas_in``, ``nds_nasnet_in``, ``nds_pnas_in``): the same
cells, networks as DARTS' ``NetworkImageNet`` (quark0/darts ``model.py``; NNI's port with
``dataset='imagenet'``) — input 1×3×224×224, 1000 classes; ``stem0`` = 3×3 conv 3→C/2 (stride 2), BN,
ReLU, 3×3 conv C/2→C (stride 2), BN, and ``stem1`` = ReLU, 3×3 conv C→C (stride 2), BN on it; the first
cell reads stem0 (56×56) as its older and stem1 (28×28) as its newer input, C channels each, and so
reduces the older one by FactorizedReduce; the head pools the last 7×7 map. Every record of NDS'
ImageNet files (``DARTS_in``, ``DARTS_fix-w-d_in``, ``ENAS_in``, ``NASNet_in``: 859 records, widths
32-96, depths 6-22, ``aux`` off) exports with exactly its recorded ``params``; see
``tests/search_spaces/test_nds_imagenet.py``. Those records draw a DARTS node's two inputs
independently (119 of 121 records of ``DARTS_in`` read one state twice somewhere), so ``nds_darts_in``
allows it; ``nds_darts`` keeps the rule above. :meth:`sample` draws the widths {32, 48, 64, 80, 96} and
depths {6, 10, 14, 18, 22} those records take. The blocks are in :mod:`search_spaces._cell_ops`.

NAS-Bench-301 (``nb301``) is the DARTS space without ``none`` at NB301's fixed size, C = 32 and 8 cells
(NB301 trained with DARTS' evaluation pipeline at that size). Its parameter counts were checked against
NASLib's ``zc_nasbench301.json`` (``nb301/zero_cost_725.json``): NASLib builds the cell operations with
non-affine BatchNorm, so its ``params`` equal ours minus two per channel of every BatchNorm inside a cell
operation, on all 725 architectures (no auxiliary head in either count); see
``tests/nasrlm/data/test_nb301.py``.

Ids: ``width=16;depth=8;normal=<cell>;reduce=<cell>`` (``nb301``: ``normal=<cell>;reduce=<cell>``) where a
cell is its nodes joined by ``|`` and a node is ``op~i+op~j`` (``i`` = state index), the two entries sorted
by (state, op) because their sum does not depend on the order. The concatenated nodes follow from the
space's output rule and are not written. :meth:`NDSCellSpace.from_nds_net` reads a record's ``net`` config
of the published NDS json files; :meth:`NB301.from_compact` reads NASLib's compact form.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import onnx

from exporters import ModelBuilder
from search_spaces._base import SearchSpace
from search_spaces._cell_ops import (
    apply_op,
    cifar_stem,
    factorized_reduce,
    head,
    imagenet_stems,
    relu_conv_bn,
)
from search_spaces._dataset import CIFAR10, IMAGENET, Dataset

if TYPE_CHECKING:
    import optuna

STEM_MULTIPLIER = 3  # the CIFAR stem's width, in multiples of C

Pair = tuple[str, int]  # (operation, input state)


@dataclass(frozen=True)
class CellSpec:
    """What distinguishes one cell space: its operations, node count and output rule."""

    label: str  # the NDS file stem, e.g. "DARTS"
    ops: tuple[str, ...]
    nodes: int
    loose_ends: bool  # concatenate only nodes no other node reads (else all nodes)
    distinct_inputs: bool  # a node's two inputs differ


CELL_SPECS: dict[str, CellSpec] = {
    "nds_nasnet": CellSpec("NASNet", (
        "skip_connect", "conv_3x1_1x3", "conv_7x1_1x7", "dil_conv_3x3", "avg_pool_3x3", "max_pool_3x3",
        "max_pool_5x5", "max_pool_7x7", "conv_1x1", "conv_3x3", "sep_conv_3x3", "sep_conv_5x5",
        "sep_conv_7x7"), 5, True, False),
    "nds_amoeba": CellSpec("Amoeba", (
        "skip_connect", "sep_conv_3x3", "sep_conv_5x5", "sep_conv_7x7", "avg_pool_3x3", "max_pool_3x3",
        "dil_sep_conv_3x3", "conv_7x1_1x7"), 5, True, False),
    "nds_pnas": CellSpec("PNAS", (
        "sep_conv_3x3", "sep_conv_5x5", "sep_conv_7x7", "conv_7x1_1x7", "skip_connect", "avg_pool_3x3",
        "max_pool_3x3", "dil_conv_3x3"), 5, False, False),
    "nds_enas": CellSpec("ENAS", (
        "skip_connect", "sep_conv_3x3", "sep_conv_5x5", "avg_pool_3x3", "max_pool_3x3"), 5, True, False),
    "nds_darts": CellSpec("DARTS", (
        "none", "max_pool_3x3", "avg_pool_3x3", "skip_connect", "sep_conv_3x3", "sep_conv_5x5",
        "dil_conv_3x3", "dil_conv_5x5"), 4, False, True),
    #: NASLib's compact op order: compact op id ``i`` is ``ops[i]``.
    "nb301": CellSpec("NB301", (
        "max_pool_3x3", "avg_pool_3x3", "skip_connect", "sep_conv_3x3", "sep_conv_5x5", "dil_conv_3x3",
        "dil_conv_5x5"), 4, False, True),
}
#: The ImageNet spaces (``<name>_in``): the same cells, except that NDS' ImageNet DARTS records draw a
#: node's two inputs independently (119 of the 121 records of ``DARTS_in.json`` have a node reading one
#: state twice), where ``nds_darts`` reads DARTS' rule of two distinct inputs.
CELL_SPECS.update({
    name + IMAGENET.suffix: replace(spec, distinct_inputs=False) if name == "nds_darts" else spec
    for name, spec in list(CELL_SPECS.items()) if name != "nb301"
})
#: NDS' sampling grid for cell spaces on CIFAR-10 (NNI's NDS port).
NDS_WIDTHS = (16, 24, 32)
NDS_DEPTHS = (4, 8, 12, 16, 20)
#: (widths, depths) drawn per dataset; ImageNet's are the values NDS' ImageNet records take.
NDS_GRIDS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    CIFAR10.name: (NDS_WIDTHS, NDS_DEPTHS),
    IMAGENET.name: ((32, 48, 64, 80, 96), (6, 10, 14, 18, 22)),
}
NB301_WIDTH, NB301_DEPTH = 32, 8


@dataclass(frozen=True)
class CellArch:
    """Normal and reduction cells (``(op, input)`` pairs, two per node) plus width C and depth in cells.

    The two pairs of every node are stored sorted by (input, op), the order ids are written in.
    """

    normal: tuple[Pair, ...]
    reduce: tuple[Pair, ...]
    width: int
    depth: int

    def __post_init__(self) -> None:
        for kind in ("normal", "reduce"):
            pairs = tuple((str(op), int(i)) for op, i in getattr(self, kind))
            if len(pairs) % 2:
                raise ValueError(f"{kind} cell has {len(pairs)} (op, input) pairs; two per node expected")
            nodes = [tuple(sorted(pairs[j:j + 2], key=_pair_key)) for j in range(0, len(pairs), 2)]
            object.__setattr__(self, kind, tuple(p for node in nodes for p in node))

    def cell(self, reduction: bool) -> tuple[Pair, ...]:
        return self.reduce if reduction else self.normal


def _pair_key(pair: Pair) -> tuple[int, str]:
    return pair[1], pair[0]


def concat_nodes(cell: Sequence[Pair], loose_ends: bool) -> tuple[int, ...]:
    """States concatenated into the cell output: every node, or the nodes no other node reads."""
    nodes = range(2, 2 + len(cell) // 2)
    if not loose_ends:
        return tuple(nodes)
    used = {i for _, i in cell}
    return tuple(n for n in nodes if n not in used)


class NDSCellSpace(SearchSpace[CellArch]):
    """Base of the NASNet-style cell spaces; subclasses set :attr:`name` (a key of :data:`CELL_SPECS`)
    and, for ImageNet, :attr:`dataset`."""

    #: the dataset the network is built for: its input, classes, stem and head.
    dataset: ClassVar[Dataset] = CIFAR10
    #: (width, depth) when the space fixes them (NB301); then ids leave them out.
    fixed: ClassVar[tuple[int, int] | None] = None

    @property
    def input_shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.dataset.input_shape

    @property
    def spec(self) -> CellSpec:
        return CELL_SPECS[self.name]

    @property
    def _label(self) -> str:
        return self.spec.label

    # --- identity -------------------------------------------------------------------------
    def arch_id(self, arch: CellArch) -> str:
        self.validate(arch)
        parts = [] if self.fixed else [f"width={arch.width}", f"depth={arch.depth}"]
        for kind in ("normal", "reduce"):
            cell = getattr(arch, kind)
            nodes = ["+".join(f"{op}~{i}" for op, i in cell[j:j + 2]) for j in range(0, len(cell), 2)]
            parts.append(f"{kind}=" + "|".join(nodes))
        return ";".join(parts)

    def parse(self, arch_id: str) -> CellArch:
        keys = ["normal", "reduce"] if self.fixed else ["width", "depth", "normal", "reduce"]
        form = ";".join(f"{k}=…" for k in keys)
        if not isinstance(arch_id, str) or not arch_id:
            raise ValueError(f"malformed {self._label} id {arch_id!r}: expected {form}")
        parts = arch_id.split(";")
        if len(parts) != len(keys):
            raise ValueError(f"malformed {self._label} id {arch_id!r}: expected {len(keys)} ';'-separated "
                             f"parts ({form}), found {len(parts)}")
        values: dict[str, str] = {}
        for part, key in zip(parts, keys, strict=True):
            name, sep, value = part.partition("=")
            if not sep or name != key:
                raise ValueError(f"malformed {self._label} id {arch_id!r}: part {part!r} should be "
                                 f"'{key}=…'")
            values[key] = value
        width, depth = self.fixed or (_positive(values["width"], "width", arch_id, self._label),
                                      _positive(values["depth"], "depth", arch_id, self._label))
        cells = {k: self._parse_cell(values[k], k, arch_id) for k in ("normal", "reduce")}
        arch = CellArch(cells["normal"], cells["reduce"], width, depth)
        self.validate(arch)
        if self.arch_id(arch) != arch_id:
            raise ValueError(f"non-canonical {self._label} id {arch_id!r}: write each node's two entries "
                             f"sorted by (input, op), i.e. {self.arch_id(arch)!r}")
        return arch

    def _parse_cell(self, text: str, kind: str, arch_id: str) -> tuple[Pair, ...]:
        nodes = text.split("|")
        if len(nodes) != self.spec.nodes:
            raise ValueError(f"malformed {self._label} id {arch_id!r}: the {kind} cell needs "
                             f"{self.spec.nodes} nodes separated by '|', found {len(nodes)}")
        pairs: list[Pair] = []
        for n, node in enumerate(nodes):
            entries = node.split("+")
            if len(entries) != 2:
                raise ValueError(f"malformed {self._label} id {arch_id!r}: {kind} node {n} {node!r} needs "
                                 "two entries 'op~input' joined by '+'")
            for entry in entries:
                op, sep, src = entry.partition("~")
                if not sep or not src.isdigit() or str(int(src)) != src:
                    raise ValueError(f"malformed {self._label} id {arch_id!r}: {kind} node {n} entry "
                                     f"{entry!r} should be 'op~input'")
                pairs.append((op, int(src)))
        return tuple(pairs)

    def validate(self, arch: CellArch) -> None:
        """Raise ``ValueError`` naming what does not belong to this space."""
        if not isinstance(arch, CellArch):
            raise ValueError(f"expected a CellArch, got {type(arch).__name__}")
        if self.fixed and (arch.width, arch.depth) != self.fixed:
            raise ValueError(f"{self._label} fixes width and depth to {self.fixed}, got "
                             f"({arch.width}, {arch.depth})")
        if arch.width < 2 or arch.width % 2:
            raise ValueError(f"{self._label} width {arch.width} must be even and ≥ 2 (FactorizedReduce "
                             "halves it)")
        if arch.depth < 1:
            raise ValueError(f"{self._label} depth {arch.depth} must be ≥ 1 cell")
        for kind in ("normal", "reduce"):
            cell = getattr(arch, kind)
            if len(cell) != 2 * self.spec.nodes:
                raise ValueError(f"{self._label} {kind} cell needs {self.spec.nodes} nodes "
                                 f"({2 * self.spec.nodes} pairs), got {len(cell)} pairs")
            for j, (op, i) in enumerate(cell):
                n = j // 2
                if op not in self.spec.ops:
                    raise ValueError(f"unknown {self._label} operation {op!r} in {kind} node {n}; expected "
                                     f"one of {', '.join(self.spec.ops)}")
                if not 0 <= i < n + 2:
                    raise ValueError(f"{self._label} {kind} node {n} reads state {i}, but only states "
                                     f"0..{n + 1} exist before it")
            if self.spec.distinct_inputs:
                for n in range(self.spec.nodes):
                    if cell[2 * n][1] == cell[2 * n + 1][1]:
                        raise ValueError(f"{self._label} {kind} node {n} reads state {cell[2 * n][1]} twice; "
                                         "its two inputs must differ")

    # --- published formats --------------------------------------------------------------------
    def from_nds_net(self, net: Mapping[str, Any]) -> CellArch:
        """The architecture of one NDS json record's ``net`` config (``genotype``, ``width``, ``depth``).

        The genotype's ``*_concat`` lists must be what this space's output rule gives; ``aux`` and
        ``drop_prob`` are training settings and do not change the evaluated network.
        """
        try:
            genotype, width, depth = net["genotype"], net["width"], net["depth"]
            cells = {k: tuple((str(op), int(i)) for op, i in genotype[k]) for k in ("normal", "reduce")}
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not an NDS {self._label} net config (needs genotype normal/reduce as "
                             f"[op, input] pairs, width, depth): {err!r}") from None
        arch = CellArch(cells["normal"], cells["reduce"], int(width), int(depth))
        self.validate(arch)
        for kind in ("normal", "reduce"):
            given = genotype.get(f"{kind}_concat")
            expected = concat_nodes(getattr(arch, kind), self.spec.loose_ends)
            if given is not None and sorted(int(c) for c in given) != list(expected):
                rule = "loose ends" if self.spec.loose_ends else "all nodes"
                raise ValueError(f"NDS {self._label} genotype has {kind}_concat {list(given)}, but the "
                                 f"space's output rule ({rule}) gives {list(expected)}")
        return arch

    # --- drawing ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> CellArch:
        widths, depths = NDS_GRIDS[self.dataset.name]
        width, depth = self.fixed or (int(rng.choice(widths)), int(rng.choice(depths)))
        cells = []
        for _ in range(2):
            pairs: list[Pair] = []
            for n in range(self.spec.nodes):
                inputs = rng.choice(n + 2, size=2, replace=not self.spec.distinct_inputs)
                ops = rng.integers(len(self.spec.ops), size=2)
                pairs += [(self.spec.ops[o], int(i)) for o, i in zip(ops, inputs, strict=True)]
            cells.append(tuple(pairs))
        return CellArch(cells[0], cells[1], width, depth)

    def suggest(self, trial: optuna.Trial) -> CellArch:
        if self.fixed:
            width, depth = self.fixed
        else:
            widths, depths = NDS_GRIDS[self.dataset.name]
            width = trial.suggest_categorical("width", widths)
            depth = trial.suggest_categorical("depth", depths)
        cells = []
        for kind in ("normal", "reduce"):
            pairs: list[Pair] = []
            for n in range(self.spec.nodes):
                a = trial.suggest_int(f"{kind}_{n}_input_x", 0, n + 1)
                if self.spec.distinct_inputs:  # second input drawn among the n + 1 others
                    b = trial.suggest_int(f"{kind}_{n}_input_y", 0, n)
                    b += b >= a
                else:
                    b = trial.suggest_int(f"{kind}_{n}_input_y", 0, n + 1)
                pairs += [(trial.suggest_categorical(f"{kind}_{n}_op_{xy}", self.spec.ops), i)
                          for xy, i in (("x", a), ("y", b))]
            cells.append(tuple(pairs))
        return CellArch(cells[0], cells[1], width, depth)

    # --- ONNX ------------------------------------------------------------------------------
    def build_onnx(self, arch: CellArch) -> onnx.ModelProto:
        self.validate(arch)
        b = ModelBuilder(self.name, domain=self.name.replace("_", "."))
        main = b.main
        c = arch.width
        s0, s1, c_stem, reduction_prev = self._stem(b, c)
        c_pp, c_p = c_stem, c_stem
        reductions = {arch.depth // 3, 2 * arch.depth // 3}
        for i in range(arch.depth):
            reduction = i in reductions
            if reduction:
                c *= 2
            cell = arch.cell(reduction)
            s0, s1 = s1, main.call(self._cell(b, cell, c_pp, c_p, c, reduction, reduction_prev), s0, s1)
            c_pp, c_p = c_p, c * len(concat_nodes(cell, self.spec.loose_ends))
            reduction_prev = reduction
        y = main.call(head(b, c_p, self.dataset.num_classes), s1)
        return b.build(self.input_shape, y, (self.input_shape[0], self.dataset.num_classes))

    def _stem(self, b: ModelBuilder, c: int) -> tuple[str, str, int, bool]:
        """The first cell's two inputs, their width, and whether the older one has twice the resolution.

        CIFAR-10: one stem of 3·C channels feeds both. ImageNet: ``stem0`` (224 → 56 pixels) and
        ``stem1`` on it (→ 28), C channels each, so the first cell reduces its older input as after a
        reduction cell (DARTS' ``NetworkImageNet``: ``reduction_prev = True``).
        """
        if self.dataset == IMAGENET:
            stem0, stem1 = imagenet_stems(b, c)
            s0 = b.main.call(stem0, "x")
            return s0, b.main.call(stem1, s0), c, True
        s = b.main.call(cifar_stem(b, STEM_MULTIPLIER * c), "x")
        return s, s, STEM_MULTIPLIER * c, False

    def _cell(self, b: ModelBuilder, cell: tuple[Pair, ...], c_pp: int, c_p: int, c: int, reduction: bool,
              reduction_prev: bool) -> str:
        concat = concat_nodes(cell, self.spec.loose_ends)

        def body(f, x0, x1):
            pre0 = factorized_reduce(b, c_pp, c) if reduction_prev else relu_conv_bn(b, c_pp, c)
            states = [f.call(pre0, x0), f.call(relu_conv_bn(b, c_p, c), x1)]
            for j in range(0, len(cell), 2):
                terms = [apply_op(b, f, states[i], op, c, 2 if reduction and i < 2 else 1)
                         for op, i in cell[j:j + 2]]
                states.append(f.op("Add", *terms))
            return f.op("Concat", *(states[n] for n in concat), axis=1)

        kind = "reduce" if reduction else "normal"
        return b.function(f"{kind}_{c_pp}_{c_p}_{c}" + ("_fr" if reduction_prev else ""), 2, body)


def _positive(text: str, what: str, arch_id: str, label: str) -> int:
    if not text.isdigit() or str(int(text)) != text or int(text) == 0:
        raise ValueError(f"malformed {label} id {arch_id!r}: {what} {text!r} is not a positive integer")
    return int(text)


# --- the spaces ---------------------------------------------------------------------------------------
class NDSNASNet(NDSCellSpace):
    """NDS NASNet cell space: 13 ops, 5 nodes, loose-end output (CIFAR-10, 32×32)."""

    name = "nds_nasnet"


class NDSAmoeba(NDSCellSpace):
    """NDS Amoeba cell space: 8 ops, 5 nodes, loose-end output (CIFAR-10, 32×32)."""

    name = "nds_amoeba"


class NDSPNAS(NDSCellSpace):
    """NDS PNAS cell space: 8 ops, 5 nodes, all nodes concatenated (CIFAR-10, 32×32)."""

    name = "nds_pnas"


class NDSENAS(NDSCellSpace):
    """NDS ENAS cell space: 5 ops, 5 nodes, loose-end output (CIFAR-10, 32×32)."""

    name = "nds_enas"


class NDSDARTS(NDSCellSpace):
    """NDS DARTS cell space: 8 ops (with none), 4 nodes, all nodes concatenated (CIFAR-10, 32×32)."""

    name = "nds_darts"


class NB301(NDSCellSpace):
    """NAS-Bench-301 DARTS space: 7 ops, 4 nodes, C = 32, 8 cells (CIFAR-10, 32×32)."""

    name = "nb301"
    fixed = (NB301_WIDTH, NB301_DEPTH)

    @property
    def size(self) -> int:
        """Distinct cells: node n picks 2 of n + 2 states and an op for each; squared for two cells."""
        ops = len(self.spec.ops)
        per_cell = math.prod(math.comb(n + 2, 2) * ops**2 for n in range(self.spec.nodes))
        return per_cell**2

    def from_compact(self, compact: str | Sequence[Sequence[Sequence[int]]]) -> CellArch:
        """From NASLib's compact form ``[[(input, op id), ...8], [...8]]`` (normal, reduce), or its string."""
        if isinstance(compact, str):
            try:
                compact = ast.literal_eval(compact)
            except (ValueError, SyntaxError) as err:
                raise ValueError(f"malformed NB301 compact string {compact!r}: {err}") from None
        try:
            cells = [tuple((self.spec.ops[int(op)], int(i)) for i, op in cell) for cell in compact]
            if any(int(op) < 0 for cell in compact for _, op in cell):
                raise IndexError("negative op id")
        except (TypeError, ValueError, IndexError) as err:
            raise ValueError(f"malformed NB301 compact form {compact!r}: expected two lists of "
                             f"(input, op id) with op ids 0..{len(self.spec.ops) - 1} ({err})") from None
        if len(cells) != 2:
            raise ValueError(f"NB301 compact form needs 2 cells (normal, reduce), got {len(cells)}")
        arch = CellArch(cells[0], cells[1], NB301_WIDTH, NB301_DEPTH)
        self.validate(arch)
        return arch

    def to_compact(self, arch: CellArch) -> tuple[tuple[tuple[int, int], ...], ...]:
        """NASLib's compact form of ``arch`` (pairs in canonical order)."""
        return tuple(tuple((i, self.spec.ops.index(op)) for op, i in arch.cell(r)) for r in (False, True))


# --- the same spaces for ImageNet: DARTS' ImageNet stems, 224×224 input, 1000 classes ---------------------
class NDSNASNetImageNet(NDSNASNet):
    """NDS NASNet cell space for ImageNet (224×224, 1000 classes, DARTS' two ImageNet stems)."""

    name = "nds_nasnet_in"
    dataset = IMAGENET


class NDSAmoebaImageNet(NDSAmoeba):
    """NDS Amoeba cell space for ImageNet (224×224, 1000 classes, DARTS' two ImageNet stems)."""

    name = "nds_amoeba_in"
    dataset = IMAGENET


class NDSPNASImageNet(NDSPNAS):
    """NDS PNAS cell space for ImageNet (224×224, 1000 classes, DARTS' two ImageNet stems)."""

    name = "nds_pnas_in"
    dataset = IMAGENET


class NDSENASImageNet(NDSENAS):
    """NDS ENAS cell space for ImageNet (224×224, 1000 classes, DARTS' two ImageNet stems)."""

    name = "nds_enas_in"
    dataset = IMAGENET


class NDSDARTSImageNet(NDSDARTS):
    """NDS DARTS cell space for ImageNet (224×224, 1000 classes, DARTS' two ImageNet stems)."""

    name = "nds_darts_in"
    dataset = IMAGENET


NDS_CELL_SPACES: dict[str, type[NDSCellSpace]] = {
    cls.name: cls for cls in (NDSAmoeba, NDSDARTS, NDSENAS, NDSNASNet, NDSPNAS, NDSAmoebaImageNet,
                              NDSDARTSImageNet, NDSENASImageNet, NDSNASNetImageNet, NDSPNASImageNet)
}
