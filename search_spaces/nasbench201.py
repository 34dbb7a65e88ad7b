"""NAS-Bench-201: the exact benchmark network (Dong & Yang, ICLR 2020), built directly in ONNX.

Macro skeleton (``TinyNetwork`` with C=16, N=5): 3×3 stem conv + BN; three stages of five cells at
16, 32 and 64 channels, separated by residual reduction blocks (``ResNetBasicblock``, stride 2); then
BN–ReLU–global average pool–linear head. Input 1×3×32×32, 10 classes.

A cell has four nodes; node ``j`` sums one operation applied to every earlier node ``i`` (edge
``i→j``). Operations are ReLU–Conv–BN (1×1 or 3×3), 3×3 average pooling (padding not counted),
identity, or ``none`` (the edge contributes zero). Ids are the benchmark's arch strings,
``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|`` with edges (0→1), (0→2), (1→2), (0→3), (1→3), (2→3).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from exporters import ModelBuilder
from search_spaces._base import SearchSpace

if TYPE_CHECKING:
    import optuna

OPS: tuple[str, ...] = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
#: (source node, target node) of each edge, in arch-string order.
EDGES: tuple[tuple[int, int], ...] = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))
STAGE_CHANNELS = (16, 32, 64)
CELLS_PER_STAGE = 5
NUM_CLASSES = 10


@dataclass(frozen=True)
class NB201Arch:
    """The six edge operations of a cell, in arch-string edge order (see :data:`EDGES`)."""

    ops: tuple[str, str, str, str, str, str]

    def __post_init__(self) -> None:
        if len(self.ops) != len(EDGES):
            raise ValueError(f"an NB201 cell has {len(EDGES)} edges, got {len(self.ops)} ops")
        for op in self.ops:
            if op not in OPS:
                raise ValueError(f"unknown NB201 operation {op!r}; expected one of {', '.join(OPS)}")


class NasBench201(SearchSpace[NB201Arch]):
    """NAS-Bench-201 cell space: 15,625 cells in the exact benchmark network (CIFAR, 32×32)."""

    name = "nb201"
    input_shape = (1, 3, 32, 32)

    # --- identity -------------------------------------------------------------------------
    def arch_id(self, arch: NB201Arch) -> str:
        nodes = []
        for j in (1, 2, 3):
            nodes.append("|".join(f"{op}~{i}" for op, (i, t) in zip(arch.ops, EDGES, strict=True) if t == j))
        return "|" + "|+|".join(nodes) + "|"

    def parse(self, arch_id: str) -> NB201Arch:
        if not isinstance(arch_id, str) or not (arch_id.startswith("|") and arch_id.endswith("|")):
            raise ValueError(f"malformed NB201 arch string {arch_id!r}: it must start and end with '|'")
        groups = arch_id[1:-1].split("|+|")
        if len(groups) != 3:
            raise ValueError(f"malformed NB201 arch string {arch_id!r}: expected 3 node groups "
                             f"separated by '|+|', found {len(groups)}")
        ops: list[str] = []
        for j, group in enumerate(groups, start=1):
            parts = group.split("|")
            if len(parts) != j:
                raise ValueError(f"malformed NB201 arch string {arch_id!r}: node {j} needs {j} "
                                 f"inputs, got {len(parts)} in {group!r}")
            for i, part in enumerate(parts):
                op, sep, src = part.partition("~")
                if not sep or src != str(i):
                    raise ValueError(f"malformed NB201 arch string {arch_id!r}: {part!r} should be "
                                     f"'<op>~{i}' (edge {i}->{j})")
                if op not in OPS:
                    raise ValueError(f"malformed NB201 arch string {arch_id!r}: unknown operation "
                                     f"{op!r} in {part!r}; expected one of {', '.join(OPS)}")
                ops.append(op)
        # Arch-string order groups edges by target node, which is exactly EDGES' order.
        return NB201Arch(tuple(ops))  # type: ignore[arg-type]

    # --- drawing ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> NB201Arch:
        return NB201Arch(tuple(OPS[k] for k in rng.integers(len(OPS), size=len(EDGES))))  # type: ignore[arg-type]

    def suggest(self, trial: optuna.Trial) -> NB201Arch:
        return NB201Arch(tuple(trial.suggest_categorical(f"edge_{i}_{j}", OPS) for i, j in EDGES))  # type: ignore[arg-type]

    def params_of(self, arch: NB201Arch) -> dict[str, Any]:
        return {f"edge_{i}_{j}": op for (i, j), op in zip(EDGES, arch.ops, strict=True)}

    def enumerate(self) -> Iterator[NB201Arch]:
        for ops in itertools.product(OPS, repeat=len(EDGES)):
            yield NB201Arch(ops)  # type: ignore[arg-type]

    @property
    def size(self) -> int:
        return len(OPS) ** len(EDGES)

    # --- capabilities ------------------------------------------------------------------
    def equivalents(self, arch: NB201Arch) -> list[NB201Arch]:
        """Cells that differ from ``arch`` only in dead edges (see :func:`live_ops`), so they compute
        the same function up to a constant; in the order of :meth:`enumerate`.

        Over all 15,625 cells the 200-epoch CIFAR-10 accuracy varies with a mean standard deviation
        of 0.22 points inside such a class, against 12.9 across the space (9,445 classes).
        """
        return [NB201Arch(ops) for ops in _classes()[live_ops(arch.ops)] if ops != arch.ops]  # type: ignore[arg-type]

    # --- ONNX ------------------------------------------------------------------------------
    def build_onnx(self, arch: NB201Arch) -> onnx.ModelProto:
        b = ModelBuilder("nb201", domain="nb201")
        main = b.main
        x = main.call(_stem(b), "x")
        for stage, channels in enumerate(STAGE_CHANNELS):
            if stage > 0:
                x = main.call(_reduction(b, STAGE_CHANNELS[stage - 1], channels), x)
            cell = _cell(b, arch, channels)
            for _ in range(CELLS_PER_STAGE):
                x = main.call(cell, x)
        y = main.call(_head(b, STAGE_CHANNELS[-1]), x)
        return b.build(self.input_shape, y, (self.input_shape[0], NUM_CLASSES))


def live_ops(ops: tuple[str, ...]) -> tuple[str, ...]:
    """``ops`` with every dead edge set to ``none``: an edge is dead when no path of non-``none``
    edges leads to its source from the input (the source then carries zeros, so the edge adds at
    most a constant: a convolution's batch-norm shift) or from its target on to the output (its
    result is never used)."""
    reached = {0}
    for j in (1, 2, 3):
        if any(i in reached and op != "none" for op, (i, t) in zip(ops, EDGES, strict=True) if t == j):
            reached.add(j)
    used = {3}
    for i in (2, 1, 0):
        if any(t in used and op != "none" for op, (s, t) in zip(ops, EDGES, strict=True) if s == i):
            used.add(i)
    return tuple(op if i in reached and t in used else "none" for op, (i, t) in zip(ops, EDGES, strict=True))


@functools.cache
def _classes() -> dict[tuple[str, ...], list[tuple[str, ...]]]:
    """Every cell's ops, grouped by :func:`live_ops` (built once: 15,625 cells, ~0.1 s)."""
    classes: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for ops in itertools.product(OPS, repeat=len(EDGES)):
        classes.setdefault(live_ops(ops), []).append(ops)
    return classes


# --- blocks, each an ONNX local function defined once per distinct shape ---------------------
def _stem(b: ModelBuilder) -> str:
    def body(f, x):
        c = STAGE_CHANNELS[0]
        y = f.op("Conv", x, f.param(c, 3, 3, 3), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        return f.op("BatchNormalization", y, *f.param(c, n=4))
    return b.function("stem", 1, body)


def _relu_conv_bn(b: ModelBuilder, c_in: int, c_out: int, k: int, stride: int = 1) -> str:
    """The benchmark's ``ReLUConvBN``: ReLU, bias-free conv, affine BatchNorm."""
    def body(f, x):
        p = k // 2
        conv = {"kernel_shape": [k, k], "pads": [p, p, p, p]} if p else {"kernel_shape": [k, k]}
        if stride != 1:
            conv["strides"] = [stride, stride]
        y = f.op("Conv", f.op("Relu", x), f.param(c_out, c_in, k, k), **conv)
        return f.op("BatchNormalization", y, *f.param(c_out, n=4))
    suffix = f"_s{stride}" if stride != 1 else ""
    name = f"rcb{k}_{c_in}" if c_in == c_out else f"rcb{k}_{c_in}_{c_out}"
    return b.function(name + suffix, 1, body)


def _cell(b: ModelBuilder, arch: NB201Arch, c: int) -> str:
    def edge(f, op: str, x: str) -> str | None:
        if op == "none":
            return None
        if op == "skip_connect":
            return x
        if op == "avg_pool_3x3":
            return f.op("AveragePool", x, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        k = 1 if op == "nor_conv_1x1" else 3
        return f.call(_relu_conv_bn(b, c, c, k), x)

    def body(f, x):
        nodes = [x]
        for j in (1, 2, 3):
            incoming = [edge(f, op, nodes[i]) for (i, t), op in zip(EDGES, arch.ops, strict=True) if t == j]
            terms = [t for t in incoming if t is not None]
            if not terms:  # every incoming edge is 'none': the node is all zeros, as in the benchmark
                terms = [f.op("Mul", x, f.op("Constant", value_float=0.0))]
            node = terms[0]
            for t in terms[1:]:
                node = f.op("Add", node, t)
            nodes.append(node)
        # A cell that is one skip edge 0→3 would return its own input, which a function cannot
        # (inlining then leaves the cell's output untyped): give the output its own name.
        return nodes[3] if nodes[3] != x else f.op("Identity", x)
    return b.function(f"cell_{c}", 1, body)


def _reduction(b: ModelBuilder, c_in: int, c_out: int) -> str:
    """The benchmark's ``ResNetBasicblock`` with stride 2 between stages."""
    def body(f, x):
        a = f.call(_relu_conv_bn(b, c_in, c_out, 3, stride=2), x)
        a = f.call(_relu_conv_bn(b, c_out, c_out, 3), a)
        r = f.op("AveragePool", x, kernel_shape=[2, 2], strides=[2, 2])
        r = f.op("Conv", r, f.param(c_out, c_in, 1, 1), kernel_shape=[1, 1])
        return f.op("Add", r, a)
    return b.function(f"reduce_{c_in}_{c_out}", 1, body)


def _head(b: ModelBuilder, c: int) -> str:
    def body(f, x):
        y = f.op("Relu", f.op("BatchNormalization", x, *f.param(c, n=4)))
        y = f.op("Flatten", f.op("GlobalAveragePool", y), axis=1)
        return f.op("Gemm", y, f.param(NUM_CLASSES, c), f.param(NUM_CLASSES), transB=1)
    return b.function("head", 1, body)
