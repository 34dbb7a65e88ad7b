"""FBNet as benchmarked by HW-NAS-Bench (CIFAR-100, 32×32 input), built directly in ONNX.

The network is HW-NAS-Bench's ``FBNet_Infer`` for CIFAR-100. Nothing of its source could be read
here, so every convention below was settled against the published table instead
(``fbnet/zero_cost.csv``, 5,000 architectures): with them our parameter counts equal its ``params``
column on all 5,000 rows, and the per-layer FLOP differences in its ``flops`` column fix the strides.

Macro skeleton:

* stem: 3×3 conv 3→16, stride 1, then BatchNorm and ReLU;
* 22 searchable layers in seven stages of 1, 4, 4, 4, 4, 4, 1 layers with 16, 24, 32, 64, 112,
  184, 352 output channels; the first layer of a stage has stride 1, 1, 2, 2, 1, 2, 1 (so the
  resolution goes 32, 32, 16, 8, 8, 4, 4), all later ones stride 1;
* head: 1×1 conv 352→1504, BatchNorm, ReLU, global average pool, linear 1504→100 (with bias).

Each layer is one of nine blocks (HW-NAS-Bench's index order, which ``op_idx_list`` uses): ``k3_e1,
k3_e1_g2, k3_e3, k3_e6, k5_e1, k5_e1_g2, k5_e3, k5_e6, skip``. A ``kK_eE[_gG]`` block is the
MobileNetV2 inverted residual: 1×1 conv C_in→E·C_in (G groups), BN, ReLU, a channel shuffle when
G > 1, K×K depthwise conv with the layer's stride, BN, ReLU, 1×1 conv →C_out (G groups), BN, and the
input added back when stride is 1 and C_in = C_out. The expansion is of the *input* width. ``skip``
is the identity where shapes allow it and otherwise a 1×1 conv (with the stride), BN and ReLU. No
conv has a bias; every BatchNorm is affine.

Evidence (all from the tables; see ``tests/search_spaces/test_fbnet.py``): ``params`` is exactly
additive over layers (least squares with one-hot (layer, block) features leaves residuals < 1e-8),
and the fitted per-layer differences identify the rest — e.g. in layer 1 ``k5_e1 − k3_e1`` = 256 =
16·mid gives mid = C_in = 16, ``k3_e3 − k3_e1`` gives C_out = 24, and ``k3_e1`` costs 432 more than
``skip``'s remainder, the 16·24 1×1 conv plus its BatchNorm; the intercept (780,660) is the stem,
the six shape-changing ``skip`` convs and a 1504-wide head exactly. In ``flops``, ``k5 − k3`` of the
same block equals 16·mid·H·W at the depthwise conv's output, which puts that output at 32, 32, 16,
8, 8, 4, 4 pixels a side in the seven stages. The ``flops`` differences also say that the skip conv
is followed by one more element-wise op than a block's last BatchNorm, i.e. a ReLU.

Ids are the 22 block names joined by ``-`` (``k3_e1-skip-k5_e6-…``); the benchmark's numeric form
(``op_idx_list``, e.g. ``"0 8 7 …"``) converts with :meth:`FBNetArch.from_op_indices` and
:attr:`FBNetArch.op_indices`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from exporters import ModelBuilder
from search_spaces._base import SearchSpace

if TYPE_CHECKING:
    import optuna

#: Candidate blocks in HW-NAS-Bench's order: index ``i`` here is op id ``i`` in ``op_idx_list``.
BLOCKS: tuple[str, ...] = (
    "k3_e1", "k3_e1_g2", "k3_e3", "k3_e6", "k5_e1", "k5_e1_g2", "k5_e3", "k5_e6", "skip",
)
#: (kernel, expansion, groups) of every block except ``skip``.
BLOCK_SPECS: dict[str, tuple[int, int, int]] = {
    "k3_e1": (3, 1, 1), "k3_e1_g2": (3, 1, 2), "k3_e3": (3, 3, 1), "k3_e6": (3, 6, 1),
    "k5_e1": (5, 1, 1), "k5_e1_g2": (5, 1, 2), "k5_e3": (5, 3, 1), "k5_e6": (5, 6, 1),
}
STAGE_CHANNELS = (16, 24, 32, 64, 112, 184, 352)
STAGE_DEPTHS = (1, 4, 4, 4, 4, 4, 1)
#: Stride of each stage's first layer; CIFAR's 32×32 input keeps the first two stages at full size.
STAGE_STRIDES = (1, 1, 2, 2, 1, 2, 1)
STEM_CHANNELS = 16
HEAD_CHANNELS = 1504
NUM_CLASSES = 100
NUM_LAYERS = sum(STAGE_DEPTHS)


def _layer_shapes() -> tuple[tuple[int, int, int], ...]:
    """(C_in, C_out, stride) of each of the 22 searchable layers."""
    shapes = []
    c_in = STEM_CHANNELS
    for c_out, depth, stride in zip(STAGE_CHANNELS, STAGE_DEPTHS, STAGE_STRIDES, strict=True):
        for i in range(depth):
            shapes.append((c_in, c_out, stride if i == 0 else 1))
            c_in = c_out
    return tuple(shapes)


#: (C_in, C_out, stride) of each searchable layer.
LAYERS: tuple[tuple[int, int, int], ...] = _layer_shapes()


@dataclass(frozen=True)
class FBNetArch:
    """The block chosen for each of the 22 searchable layers, by name (see :data:`BLOCKS`)."""

    blocks: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.blocks) != NUM_LAYERS:
            raise ValueError(f"an FBNet architecture has {NUM_LAYERS} layers, got {len(self.blocks)} blocks")
        for i, block in enumerate(self.blocks):
            if block not in BLOCKS:
                raise ValueError(f"unknown FBNet block {block!r} in layer {i}; "
                                 f"expected one of {', '.join(BLOCKS)}")

    @classmethod
    def from_op_indices(cls, indices: Sequence[int] | str) -> FBNetArch:
        """From the benchmark's op ids: a sequence of ints or ``op_idx_list``'s ``"7 8 1 …"`` string."""
        if isinstance(indices, str):
            tokens = indices.split()
            for i, token in enumerate(tokens):
                if not token.isdigit():
                    raise ValueError(f"malformed FBNet op_idx_list {indices!r}: layer {i} op id {token!r} "
                                     f"is not an integer")
            indices = [int(t) for t in tokens]
        if len(indices) != NUM_LAYERS:
            raise ValueError(f"an FBNet op_idx_list has {NUM_LAYERS} ids, got {len(indices)}")
        for i, k in enumerate(indices):
            if not 0 <= k < len(BLOCKS):
                raise ValueError(f"FBNet op id {k} in layer {i} is out of range 0..{len(BLOCKS) - 1}")
        return cls(tuple(BLOCKS[k] for k in indices))

    @property
    def op_indices(self) -> tuple[int, ...]:
        """The benchmark's op ids (``op_idx_list``) of the 22 layers."""
        return tuple(BLOCKS.index(b) for b in self.blocks)


class FBNet(SearchSpace[FBNetArch]):
    """FBNet space of HW-NAS-Bench: 9^22 chains of inverted-residual blocks (CIFAR-100, 32×32)."""

    name = "fbnet"
    input_shape = (1, 3, 32, 32)

    # --- identity -------------------------------------------------------------------------
    def arch_id(self, arch: FBNetArch) -> str:
        return "-".join(arch.blocks)

    def parse(self, arch_id: str) -> FBNetArch:
        if not isinstance(arch_id, str) or not arch_id:
            raise ValueError(f"malformed FBNet id {arch_id!r}: expected {NUM_LAYERS} block names "
                             "joined by '-'")
        parts = arch_id.split("-")
        if len(parts) != NUM_LAYERS:
            raise ValueError(f"malformed FBNet id {arch_id!r}: expected {NUM_LAYERS} block names joined by "
                             f"'-', found {len(parts)} parts")
        for i, part in enumerate(parts):
            if part not in BLOCKS:
                raise ValueError(f"malformed FBNet id {arch_id!r}: unknown block {part!r} in layer {i}; "
                                 f"expected one of {', '.join(BLOCKS)}")
        return FBNetArch(tuple(parts))

    # --- drawing ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> FBNetArch:
        return FBNetArch(tuple(BLOCKS[k] for k in rng.integers(len(BLOCKS), size=NUM_LAYERS)))

    def suggest(self, trial: optuna.Trial) -> FBNetArch:
        return FBNetArch(tuple(trial.suggest_categorical(f"layer_{i}", BLOCKS) for i in range(NUM_LAYERS)))

    def params_of(self, arch: FBNetArch) -> dict[str, Any]:
        return {f"layer_{i}": block for i, block in enumerate(arch.blocks)}

    @property
    def size(self) -> int:
        return len(BLOCKS) ** NUM_LAYERS

    # --- ONNX ------------------------------------------------------------------------------
    def build_onnx(self, arch: FBNetArch) -> onnx.ModelProto:
        b = ModelBuilder("fbnet", domain="fbnet")
        main = b.main
        x = main.call(_stem(b), "x")
        for block, (c_in, c_out, stride) in zip(arch.blocks, LAYERS, strict=True):
            if block != "skip":
                x = main.call(_mb_block(b, block, c_in, c_out, stride), x)
            elif c_in != c_out or stride != 1:
                x = main.call(_skip_conv(b, c_in, c_out, stride), x)
            # An identity skip leaves no trace in the graph, as in the benchmark's network.
        y = main.call(_head(b), x)
        return b.build(self.input_shape, y, (self.input_shape[0], NUM_CLASSES))


# --- blocks, each an ONNX local function defined once per distinct configuration -------------
def _conv_bn(f, x: str, c_in: int, c_out: int, k: int = 1, stride: int = 1, groups: int = 1) -> str:
    """Bias-free conv (padding k // 2) followed by an affine BatchNorm."""
    return f.op("BatchNormalization", f.conv(x, c_in, c_out, k, stride, groups=groups), *f.param(c_out, n=4))


def _suffix(c_in: int, c_out: int, stride: int) -> str:
    shape = f"{c_in}" if c_in == c_out else f"{c_in}_{c_out}"
    return shape + (f"_s{stride}" if stride != 1 else "")


def _stem(b: ModelBuilder) -> str:
    def body(f, x):
        return f.op("Relu", _conv_bn(f, x, 3, STEM_CHANNELS, k=3))
    return b.function("stem", 1, body)


def _shuffle(b: ModelBuilder, groups: int) -> str:
    """ShuffleNet's channel shuffle, written without spatial or channel sizes so one definition serves
    every layer: NCHW → NHWC, split C into (groups, C/groups), swap the two, merge, back to NCHW."""
    def body(f, x):
        y = f.op("Transpose", x, perm=[0, 2, 3, 1])
        y = f.op("Reshape", y, f.op("Constant", value_ints=[0, 0, 0, groups, -1]))
        y = f.op("Transpose", y, perm=[0, 1, 2, 4, 3])
        y = f.op("Reshape", y, f.op("Constant", value_ints=[0, 0, 0, -1]))
        return f.op("Transpose", y, perm=[0, 3, 1, 2])
    return b.function(f"shuffle{groups}", 1, body)


def _mb_block(b: ModelBuilder, block: str, c_in: int, c_out: int, stride: int) -> str:
    """Inverted residual ``block`` from ``c_in`` to ``c_out`` channels (see the module docstring)."""
    k, e, g = BLOCK_SPECS[block]
    mid = c_in * e

    def body(f, x):
        y = f.op("Relu", _conv_bn(f, x, c_in, mid, groups=g))
        if g > 1:
            y = f.call(_shuffle(b, g), y)
        y = f.op("Relu", _conv_bn(f, y, mid, mid, k=k, stride=stride, groups=mid))
        y = _conv_bn(f, y, mid, c_out, groups=g)
        return f.op("Add", y, x) if c_in == c_out and stride == 1 else y
    return b.function(f"{block}_{_suffix(c_in, c_out, stride)}", 1, body)


def _skip_conv(b: ModelBuilder, c_in: int, c_out: int, stride: int) -> str:
    """``skip`` where the shape changes: 1×1 conv, BN, ReLU (the benchmark's ``ConvNorm``)."""
    def body(f, x):
        return f.op("Relu", _conv_bn(f, x, c_in, c_out, stride=stride))
    return b.function(f"skip_{_suffix(c_in, c_out, stride)}", 1, body)


def _head(b: ModelBuilder) -> str:
    def body(f, x):
        y = f.op("Relu", _conv_bn(f, x, STAGE_CHANNELS[-1], HEAD_CHANNELS))
        y = f.op("Flatten", f.op("GlobalAveragePool", y), axis=1)
        return f.op("Gemm", y, f.param(NUM_CLASSES, HEAD_CHANNELS), f.param(NUM_CLASSES), transB=1)
    return b.function("head", 1, body)
