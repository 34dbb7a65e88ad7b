"""Once-for-All elastic spaces (Cai et al., ICLR 2020): MobileNetV3, ProxylessNAS and ResNet50.

An architecture is the static subnet that OFA's ``get_active_subnet`` cuts out of one of the three
pretrained supernets of mit-han-lab/once-for-all (``ofa/model_zoo.py: ofa_net``), built directly in
ONNX at its input resolution: the model of resolution ``r`` takes ``(1, 3, r, r)``. The definitions
below were read from that repository's ``ofa/imagenet_classification/elastic_nn/networks/ofa_mbv3.py``,
``ofa_proxyless.py``, ``ofa_resnets.py``, ``elastic_nn/modules/dynamic_layers.py``,
``networks/{mobilenet_v3,proxyless_nets,resnets}.py`` and ``ofa/utils/{layers,pytorch_modules}.py``
(as stored at commit 80a2e26e).

Because the resolution is part of the architecture, a space's :attr:`input_shape` is its largest input,
``(1, 3, 224, 224)`` by default, and :meth:`input_shape_of` (part of the search-space interface) gives
an architecture's own; a space made with ``resolutions=(r,)`` has exactly one input shape.

Shared conventions (OFA's ``MyNetwork.CHANNEL_DIVISIBLE = 8``):

* ``make_divisible(v) = max(8, int(v + 4) // 8 * 8)``, plus 8 where that falls below 0.9·v;
* convolutions are bias-free with padding ``k // 2`` and followed by an affine BatchNorm, epsilon
  1e-5 (MobileNetV3, ResNet50) or 1e-3 (ProxylessNAS: ``OFAProxylessNASNets``' default ``bn_param``);
* h-swish ``x·ReLU6(x+3)/6`` is ONNX ``HardSwish``, h-sigmoid ``ReLU6(x+3)/6`` is ``HardSigmoid``
  with alpha 1/6 and beta 0.5, ReLU6 is ``Clip(0, 6)``; dropout is the identity at inference and left out;
* the inverted-residual block (``MBConvLayer``): 1×1 conv C_in→mid, BN, act (absent when the expand
  ratio is 1), k×k depthwise conv with the block's stride, BN, act, [SE], 1×1 conv mid→C_out, BN, and
  the input added back when stride is 1 and C_in = C_out. Elastic blocks have
  ``mid = make_divisible(round(C_in·e))``. SE: global average pool, 1×1 conv (bias)
  mid→``make_divisible(mid // 4)``, ReLU, 1×1 conv (bias) back to mid, h-sigmoid, multiply;
* 1000 ImageNet classes; resolutions 128, 132, …, 224: OFA trains with ``image_size
  128,160,192,224`` and ``continuous_size`` (every 4 px in between), and HELP's OFA table uses all 25.

``ofa_mbv3`` — ``ofa_mbv3_d234_e346_k357_w1.2`` (the network HELP measured): ``base_stage_width``
16, 16, 24, 40, 80, 112, 160, 960, 1280 × 1.2 → 24, 24, 32, 48, 96, 136, 192, 1152, 1536. Stem 3×3
conv 3→24, stride 2, BN, h-swish; a fixed first block (k3, expand 1, ReLU, 24→24, residual); five
elastic stages of 2–4 blocks (kernel 3/5/7, expand 3/4/6 per block) with widths 32, 48, 96, 136, 192,
first strides 2, 2, 2, 1, 2, activations ReLU, ReLU, h-swish ×3 and SE in stages 2, 4 and 5; head:
1×1 conv 192→1152, BN, h-swish, global average pool, 1×1 conv 1152→1536 (no bias, no BN), h-swish,
linear 1536→1000.

``ofa_proxyless`` — ``ofa_proxyless_d234_e346_k357_w1.3``: widths 32, 16, 24, 40, 80, 96, 192, 320,
1280 × 1.3 → 40, 24, 32, 56, 104, 128, 248, 416, 1664. Stem 3×3 conv 3→40, stride 2, BN, ReLU6; a fixed
first block (k3, expand 1, 40→24, no residual); six stages with widths 32, 56, 104, 128, 248, 416 and
first strides 2, 2, 2, 1, 2, 1, the first five of depth 2–4 and the last of exactly one block (OFA
samples ``d[-1] = 1``), kernel 3/5/7 and expand 3/4/6 per block, ReLU6 throughout, no SE; head: 1×1
conv 416→1664, BN, ReLU6, global average pool, linear 1664→1000.

``ofa_resnet50`` — ``OFAResNets(depth_list=[0, 1, 2], expand_ratio_list=[0.2, 0.25, 0.35],
width_mult_list=[0.65, 0.8, 1.0])``, a ResNet-50-D. Stem: 3×3 conv 3→m stride 2, BN, ReLU; a residual
3×3 conv m→m, BN, ReLU (skipped unless ``d[0]`` is 2); 3×3 conv m→c, BN, ReLU; 3×3 max pool stride 2.
``w[0]`` picks m = ``make_divisible(make_divisible(64·w) // 2)`` ∈ {24, 24, 32} and ``w[1]`` picks
c = ``make_divisible(64·w)`` ∈ {40, 48, 64}. Four stages of 2, 2, 4, 2 plus ``d`` ∈ {0, 1, 2}
bottlenecks, strides 1, 2, 2, 2, widths ``make_divisible(256/512/1024/2048 · w)`` (168/208/256,
336/408/512, 664/816/1024, 1328/1640/2048) picked per stage by ``w[2..5]``. A bottleneck: 1×1 conv
C_in→mid, BN, ReLU, 3×3 conv mid→mid with the stride, BN, ReLU, 1×1 conv mid→C_out, BN, plus the
shortcut, ReLU, with ``mid = make_divisible(round(C_out·e))`` per block. The shortcut is the identity
where stride is 1 and C_in = C_out, else average pooling (kernel = stride, ceil mode) + 1×1 conv + BN;
the stride-1 pool of the first stage (kernel 1) is the identity and left out. Head: global average
pool, linear →1000.

Ids are canonical: layers beyond a stage's depth leave no trace, so two OFA configs that differ only
there (HELP fills them with random values, OFA's accuracy predictor with zeros) give one id.

* MobileNetV3/ProxylessNAS: ``r224|k3e4-k5e6|k7e3-k3e3-k5e4|…`` — the resolution, then one group per
  stage listing its active blocks as kernel/expand. Convert with :meth:`OFAMobileArch.from_ofa` (OFA's
  ``ks``/``e``/``d``/``r``, e.g. :meth:`OFAMBv3Arch.from_help_row`) and the ``ks``/``e``/``d``/``r``
  properties.
* ResNet50: ``r224|stem-32-res-64|256:0.25-0.25-0.35|512:…|1024:…|2048:…`` — resolution, stem (``m``,
  ``res`` when the residual conv is kept, ``c``), then each stage's width and the expand ratios of its
  blocks. Channels rather than OFA's width indices, because ``w[0]`` = 0 and 1 give the same network;
  convert with :meth:`OFAResNet50Arch.from_ofa` and :meth:`OFAResNet50Arch.to_ofa`.

Evidence (``tests/search_spaces/test_ofa.py``): parameter counts and MACs of every model equal
per-layer formulas written from the OFA sources (the MAC formula is OFA's own
``count_flops_given_config``); the same block builders give the parameter counts torchvision
publishes for MobileNetV2 (3,504,872, as OFA's ProxylessNAS with MobileNetV2 widths) and
MobileNetV3-Large (5,483,032 less the 1,280 biases OFA's bias-free feature-mix conv lacks), and the
ResNet-50-D subnet has torchvision ResNet-50's 25,557,032 plus the deep stem's 19,232 = 25,576,264; all
5,000 configurations of HELP's ``ofa/latency_ms.csv`` parse.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import onnx

from exporters import ModelBuilder
from search_spaces._base import SearchSpace

if TYPE_CHECKING:
    import optuna

#: Input resolutions OFA trains and samples with (``continuous_size``: every 4 px from 128 to 224).
RESOLUTIONS: tuple[int, ...] = tuple(range(128, 225, 4))
KERNELS: tuple[int, ...] = (3, 5, 7)
EXPANDS: tuple[int, ...] = (3, 4, 6)
DEPTHS: tuple[int, ...] = (2, 3, 4)
NUM_CLASSES = 1000


def make_divisible(v: float, divisor: int = 8) -> int:
    """OFA's (and TF MobileNet's) channel rounding: nearest multiple of ``divisor``, never 10 % below."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _round_half_even(v: float) -> int:
    """``torch.round`` as OFA applies it to ``channels · expand`` (ties to even, like Python's round)."""
    return int(round(v))


# --- static networks: what ``get_active_subnet`` returns, one spec per layer ---------------------------
@dataclass(frozen=True)
class MBConv:
    """One inverted-residual block of a static MobileNet (OFA's ``MBConvLayer`` + its shortcut)."""

    c_in: int
    mid: int
    c_out: int
    kernel: int
    stride: int
    act: str  # "relu", "relu6" or "h_swish"
    se: bool
    expand_conv: bool = True  # False where the expand ratio is 1 (no 1×1 expansion)

    @property
    def residual(self) -> bool:
        return self.stride == 1 and self.c_in == self.c_out


@dataclass(frozen=True)
class MobileNetSpec:
    """A static MobileNetV3 (``head="mbv3"``) or ProxylessNAS/MobileNetV2 (``head="proxyless"``)."""

    stem: int  # output channels of the 3×3 stride-2 stem conv
    stem_act: str
    blocks: tuple[MBConv, ...]
    final_expand: int | None  # MobileNetV3's 1×1 conv before pooling; None for ProxylessNAS
    feature_mix: int
    head: str  # "mbv3" or "proxyless"
    bn_eps: float = 1e-5


@dataclass(frozen=True)
class Bottleneck:
    """One bottleneck of a static ResNet-D (OFA's ``ResNetBottleneckBlock``, ``avgpool_conv``)."""

    c_in: int
    mid: int
    c_out: int
    stride: int

    @property
    def identity(self) -> bool:
        return self.stride == 1 and self.c_in == self.c_out


@dataclass(frozen=True)
class ResNetSpec:
    """A static OFA ResNet: deep stem (``stem_mid``, optional residual conv, ``stem_out``) and blocks."""

    stem_mid: int
    stem_residual: bool
    stem_out: int
    blocks: tuple[Bottleneck, ...]


# --- MobileNetV3 / ProxylessNAS archs ----------------------------------------------------------------
_BLOCK_RE = re.compile(r"k(\d+)e(\d+)")
_RES_RE = re.compile(r"r(\d+)")


def _split_ints(values: Sequence[int] | str, what: str) -> list[int]:
    """OFA lists as ints, or HELP's space-separated ``"7 5 3 …"`` strings."""
    if isinstance(values, str):
        tokens = values.split()
        for i, token in enumerate(tokens):
            if not token.isdigit():
                raise ValueError(f"malformed OFA {what} list {values!r}: entry {i} {token!r} is not an "
                                 "integer")
        return [int(t) for t in tokens]
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"OFA {what} entry {i} is {v!r}, not an integer")
        out.append(int(v))
    return out


def _resolution(value: int | str | Sequence[int]) -> int:
    """OFA's ``r`` (an int, HELP's string, or the tutorial's one-element list)."""
    if isinstance(value, str):
        if not value.strip().isdigit():
            raise ValueError(f"OFA resolution {value!r} is not an integer")
        return int(value)
    if isinstance(value, Sequence):
        if len(value) != 1:
            raise ValueError(f"OFA resolution list {value!r} must hold one value")
        value = value[0]
    return int(value)


_M = TypeVar("_M", bound="OFAMobileArch")


@dataclass(frozen=True)
class OFAMobileArch:
    """Active blocks, as (kernel, expand) pairs per stage, and the input resolution.

    Subclasses fix the stage layout: :class:`OFAMBv3Arch` (5 stages of 2–4) and
    :class:`OFAProxylessArch` (5 stages of 2–4, then one of exactly 1).
    """

    stages: tuple[tuple[tuple[int, int], ...], ...]
    resolution: int

    #: allowed depths of each stage
    STAGE_DEPTHS: ClassVar[tuple[tuple[int, ...], ...]] = ()
    NAME: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if len(self.stages) != len(self.STAGE_DEPTHS):
            raise ValueError(f"an {self.NAME} architecture has {len(self.STAGE_DEPTHS)} stages, "
                             f"got {len(self.stages)}")
        for s, (blocks, allowed) in enumerate(zip(self.stages, self.STAGE_DEPTHS, strict=True)):
            if len(blocks) not in allowed:
                raise ValueError(f"{self.NAME} stage {s} has {len(blocks)} blocks; allowed depths "
                                 f"{', '.join(map(str, allowed))}")
            for j, (k, e) in enumerate(blocks):
                if k not in KERNELS:
                    raise ValueError(f"{self.NAME} stage {s} block {j}: kernel {k} is not one of 3, 5, 7")
                if e not in EXPANDS:
                    raise ValueError(f"{self.NAME} stage {s} block {j}: expand ratio {e} is not one of "
                                     "3, 4, 6")
        if self.resolution not in RESOLUTIONS:
            raise ValueError(f"{self.NAME} resolution {self.resolution} is not one of 128, 132, …, 224")

    @classmethod
    def max_blocks(cls) -> tuple[int, ...]:
        """Blocks per stage in the supernet (the length of each stage's slice of ``ks``/``e``)."""
        return tuple(max(d) for d in cls.STAGE_DEPTHS)

    @classmethod
    def from_ofa(cls: type[_M], ks: Sequence[int] | str, e: Sequence[int] | str, d: Sequence[int] | str,
                 r: int | str | Sequence[int]) -> _M:
        """From OFA's subnet config (``set_active_subnet``'s ``ks``, ``e``, ``d`` plus ``r``).

        Entries of blocks beyond a stage's depth are ignored, as OFA ignores them: 0 (the accuracy
        predictor's convention) or any valid value (HELP's random padding). The last ProxylessNAS
        stage has one block whatever its ``d`` (OFA clips it with ``min(1, d)``).
        """
        ks_, e_, d_ = _split_ints(ks, "ks"), _split_ints(e, "e"), _split_ints(d, "d")
        sizes = cls.max_blocks()
        n = sum(sizes)
        if len(ks_) != n or len(e_) != n:
            raise ValueError(f"an {cls.NAME} config has {n} ks and {n} e entries, got {len(ks_)} and "
                             f"{len(e_)}")
        if len(d_) != len(sizes):
            raise ValueError(f"an {cls.NAME} config has {len(sizes)} depths, got {len(d_)}")
        stages = []
        start = 0
        for s, (size, depth, allowed) in enumerate(zip(sizes, d_, cls.STAGE_DEPTHS, strict=True)):
            if allowed == (1,):
                if depth not in (1, *DEPTHS):
                    raise ValueError(f"{cls.NAME} depth {depth} of stage {s} is not one of 1, 2, 3, 4")
                depth = 1
            elif depth not in allowed:
                raise ValueError(f"{cls.NAME} depth {depth} of stage {s} is not one of "
                                 f"{', '.join(map(str, allowed))}")
            for j in range(depth, size):  # inactive: ignored, but must be 0 or a valid value
                i = start + j
                if ks_[i] not in (0, *KERNELS) or e_[i] not in (0, *EXPANDS):
                    raise ValueError(f"{cls.NAME} layer {i} (inactive) has ks {ks_[i]} e {e_[i]}; "
                                     "expected 0 or a valid value")
            stages.append(tuple((ks_[start + j], e_[start + j]) for j in range(depth)))
            start += size
        return cls(tuple(stages), _resolution(r))

    @property
    def d(self) -> tuple[int, ...]:
        """OFA's depth list."""
        return tuple(len(blocks) for blocks in self.stages)

    @property
    def ks(self) -> tuple[int, ...]:
        """OFA's kernel list over every supernet layer, 0 for inactive ones (as ``spec2feats`` has it)."""
        return self._per_layer(0)

    @property
    def e(self) -> tuple[int, ...]:
        """OFA's expand-ratio list over every supernet layer, 0 for inactive ones."""
        return self._per_layer(1)

    @property
    def r(self) -> int:
        return self.resolution

    def _per_layer(self, which: int) -> tuple[int, ...]:
        out: list[int] = []
        for blocks, size in zip(self.stages, self.max_blocks(), strict=True):
            out += [b[which] for b in blocks] + [0] * (size - len(blocks))
        return tuple(out)


@dataclass(frozen=True)
class OFAMBv3Arch(OFAMobileArch):
    """An ``ofa_mbv3_d234_e346_k357_w1.2`` subnet: 5 stages of 2–4 (kernel, expand) blocks."""

    STAGE_DEPTHS: ClassVar[tuple[tuple[int, ...], ...]] = (DEPTHS,) * 5
    NAME: ClassVar[str] = "OFA-MBv3"

    @classmethod
    def from_help_row(cls, row: Mapping[str, str]) -> OFAMBv3Arch:
        """From a row of HELP's ``ofa/latency_ms.csv`` (columns ``ks``, ``e``, ``d``, ``r``)."""
        missing = [c for c in ("ks", "e", "d", "r") if c not in row]
        if missing:
            raise ValueError(f"HELP OFA row lacks column(s) {', '.join(missing)}")
        return cls.from_ofa(row["ks"], row["e"], row["d"], row["r"])


@dataclass(frozen=True)
class OFAProxylessArch(OFAMobileArch):
    """An ``ofa_proxyless_d234_e346_k357_w1.3`` subnet: 5 stages of 2–4 blocks, then one block."""

    STAGE_DEPTHS: ClassVar[tuple[tuple[int, ...], ...]] = (DEPTHS,) * 5 + ((1,),)
    NAME: ClassVar[str] = "OFA-ProxylessNAS"


# --- the two MobileNet spaces ------------------------------------------------------------------------
class _OFAMobileSpace(SearchSpace[OFAMobileArch]):
    """Shared by OFA-MBv3 and OFA-ProxylessNAS: ids, sampling and ONNX of elastic MobileNets."""

    arch_type: ClassVar[type[OFAMobileArch]]
    domain: ClassVar[str]

    def __init__(self, resolutions: Sequence[int] = RESOLUTIONS) -> None:
        self.resolutions = _check_resolutions(resolutions)
        r = max(self.resolutions)
        #: The largest input; the model of an architecture declares ``(1, 3, r, r)`` for its own ``r``.
        self.input_shape = (1, 3, r, r)

    def input_shape_of(self, arch: OFAMobileArch) -> tuple[int, int, int, int]:
        """The input the model of ``arch`` declares."""
        return (1, 3, arch.resolution, arch.resolution)

    # --- identity -------------------------------------------------------------------------
    def arch_id(self, arch: OFAMobileArch) -> str:
        stages = ("-".join(f"k{k}e{e}" for k, e in blocks) for blocks in arch.stages)
        return "|".join([f"r{arch.resolution}", *stages])

    def parse(self, arch_id: str) -> OFAMobileArch:
        name = self.arch_type.NAME
        n_stages = len(self.arch_type.STAGE_DEPTHS)
        form = f"'r<res>|' then {n_stages} '|'-separated stages of '-'-joined k<kernel>e<expand> blocks"
        if not isinstance(arch_id, str) or not arch_id:
            raise ValueError(f"malformed {name} id {arch_id!r}: expected {form}")
        parts = arch_id.split("|")
        if len(parts) != n_stages + 1:
            raise ValueError(f"malformed {name} id {arch_id!r}: expected {form}, found {len(parts)} parts")
        resolution = self._parse_resolution(arch_id, parts[0], name)
        stages = []
        for s, part in enumerate(parts[1:]):
            blocks = []
            for j, token in enumerate(part.split("-")):
                m = _BLOCK_RE.fullmatch(token)
                if not m or str(int(m[1])) != m[1] or str(int(m[2])) != m[2]:
                    raise ValueError(f"malformed {name} id {arch_id!r}: block {token!r} (stage {s}, "
                                     f"block {j}) is not k<kernel>e<expand>, e.g. k5e4")
                blocks.append((int(m[1]), int(m[2])))
            stages.append(tuple(blocks))
        try:
            arch = self.arch_type(tuple(stages), resolution)
        except ValueError as err:
            raise ValueError(f"malformed {name} id {arch_id!r}: {err}") from None
        return arch

    def _parse_resolution(self, arch_id: str, part: str, name: str) -> int:
        m = _RES_RE.fullmatch(part)
        if not m or str(int(m[1])) != m[1]:
            raise ValueError(f"malformed {name} id {arch_id!r}: first part {part!r} is not r<resolution>")
        r = int(m[1])
        if r not in self.resolutions:
            raise ValueError(f"malformed {name} id {arch_id!r}: resolution {r} is not one this space offers "
                             f"({_describe(self.resolutions)})")
        return r

    # --- drawing ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> OFAMobileArch:
        """OFA's ``sample_active_subnet``: a depth per stage, a kernel and expand per block, uniformly."""
        stages = []
        for allowed in self.arch_type.STAGE_DEPTHS:
            depth = int(rng.choice(allowed))
            stages.append(tuple((int(rng.choice(KERNELS)), int(rng.choice(EXPANDS))) for _ in range(depth)))
        return self.arch_type(tuple(stages), int(rng.choice(self.resolutions)))

    def suggest(self, trial: optuna.Trial) -> OFAMobileArch:
        stages = []
        for s, allowed in enumerate(self.arch_type.STAGE_DEPTHS):
            depth = allowed[0] if len(allowed) == 1 else trial.suggest_categorical(f"d{s}", allowed)
            stages.append(tuple((trial.suggest_categorical(f"k{s}_{j}", KERNELS),
                                 trial.suggest_categorical(f"e{s}_{j}", EXPANDS)) for j in range(depth)))
        return self.arch_type(tuple(stages), trial.suggest_categorical("r", self.resolutions))

    def params_of(self, arch: OFAMobileArch) -> dict[str, Any]:
        params: dict[str, Any] = {}
        for s, (blocks, allowed) in enumerate(zip(arch.stages, self.arch_type.STAGE_DEPTHS, strict=True)):
            if len(allowed) > 1:
                params[f"d{s}"] = len(blocks)
            for j, (kernel, expand) in enumerate(blocks):
                params[f"k{s}_{j}"], params[f"e{s}_{j}"] = kernel, expand
        return {**params, "r": arch.resolution}

    @property
    def size(self) -> int:
        per_stage = [sum((len(KERNELS) * len(EXPANDS)) ** d for d in allowed)
                     for allowed in self.arch_type.STAGE_DEPTHS]
        return len(self.resolutions) * math.prod(per_stage)

    # --- ONNX ------------------------------------------------------------------------------
    def spec(self, arch: OFAMobileArch) -> MobileNetSpec:
        """The static subnet of ``arch``, layer by layer."""
        raise NotImplementedError

    def build_onnx(self, arch: OFAMobileArch) -> onnx.ModelProto:
        if not isinstance(arch, self.arch_type):
            raise ValueError(f"{self.name} builds {self.arch_type.__name__}, got {type(arch).__name__}")
        if arch.resolution not in self.resolutions:
            raise ValueError(f"resolution {arch.resolution} is not one this space offers "
                             f"({_describe(self.resolutions)})")
        return build_mobilenet(self.spec(arch), self.input_shape_of(arch), self.domain)


def _elastic_blocks(arch: OFAMobileArch, c_in: int, widths: Sequence[int], strides: Sequence[int],
                    acts: Sequence[str], ses: Sequence[bool]) -> tuple[list[MBConv], int]:
    blocks = []
    for stage, c_out, stride, act, se in zip(arch.stages, widths, strides, acts, ses, strict=True):
        for j, (k, e) in enumerate(stage):
            blocks.append(MBConv(c_in, make_divisible(_round_half_even(c_in * e)), c_out, k,
                                 stride if j == 0 else 1, act, se))
            c_in = c_out
    return blocks, c_in


class OFAMobileNetV3(_OFAMobileSpace):
    """OFA-MobileNetV3 (w1.2, ImageNet): 5 stages of 2–4 blocks, kernel 3/5/7, expand 3/4/6, r 128–224."""

    name = "ofa_mbv3"
    arch_type = OFAMBv3Arch
    domain = "ofa_mbv3"
    WIDTH_MULT = 1.2
    #: OFAMobileNetV3's ``base_stage_width`` (stem, first block, five stages, final expand, feature mix)
    BASE_WIDTHS = (16, 16, 24, 40, 80, 112, 160, 960, 1280)
    STRIDES = (2, 2, 2, 1, 2)
    ACTS = ("relu", "relu", "h_swish", "h_swish", "h_swish")
    SE = (False, True, False, True, True)

    def widths(self) -> tuple[int, ...]:
        """The nine widths after the multiplier: 24, 24, 32, 48, 96, 136, 192, 1152, 1536."""
        return tuple(make_divisible(w * self.WIDTH_MULT) for w in self.BASE_WIDTHS)

    def spec(self, arch: OFAMobileArch) -> MobileNetSpec:
        w = self.widths()
        first = MBConv(w[0], w[0], w[1], 3, 1, "relu", False, expand_conv=False)
        blocks, _ = _elastic_blocks(arch, w[1], w[2:7], self.STRIDES, self.ACTS, self.SE)
        return MobileNetSpec(w[0], "h_swish", (first, *blocks), w[7], w[8], "mbv3")


class OFAProxylessNAS(_OFAMobileSpace):
    """OFA-ProxylessNAS (w1.3, ImageNet): 5 stages of 2–4 blocks + 1, kernel 3/5/7, expand 3/4/6."""

    name = "ofa_proxyless"
    arch_type = OFAProxylessArch
    domain = "ofa_proxyless"
    WIDTH_MULT = 1.3
    #: OFAProxylessNASNets' ProxylessNAS ``base_stage_width`` (stem, first block, six stages, head)
    BASE_WIDTHS = (32, 16, 24, 40, 80, 96, 192, 320, 1280)
    STRIDES = (2, 2, 2, 1, 2, 1)
    BN_EPS = 1e-3

    def widths(self) -> tuple[int, ...]:
        """The nine widths after the multiplier: 40, 24, 32, 56, 104, 128, 248, 416, 1664."""
        return tuple(make_divisible(w * self.WIDTH_MULT) for w in self.BASE_WIDTHS)

    def spec(self, arch: OFAMobileArch) -> MobileNetSpec:
        w = self.widths()
        first = MBConv(w[0], w[0], w[1], 3, 1, "relu6", False, expand_conv=False)
        blocks, _ = _elastic_blocks(arch, w[1], w[2:8], self.STRIDES, ("relu6",) * 6, (False,) * 6)
        return MobileNetSpec(w[0], "relu6", (first, *blocks), None, w[8], "proxyless", self.BN_EPS)


# --- ResNet50 ----------------------------------------------------------------------------------------
RESNET_BASE_DEPTHS = (2, 2, 4, 2)
RESNET_DEPTHS = (0, 1, 2)
RESNET_EXPANDS = (0.2, 0.25, 0.35)
RESNET_WIDTH_MULTS = (0.65, 0.8, 1.0)
RESNET_STRIDES = (1, 2, 2, 2)
RESNET_BASE_WIDTHS = (256, 512, 1024, 2048)
#: Stem widths per width multiplier: ``make_divisible(64·w)`` and half of it, rounded again.
RESNET_STEM_OUT = tuple(make_divisible(64 * w) for w in RESNET_WIDTH_MULTS)  # 40, 48, 64
RESNET_STEM_MID = tuple(make_divisible(c // 2) for c in RESNET_STEM_OUT)  # 24, 24, 32
RESNET_STAGE_WIDTHS = tuple(tuple(make_divisible(b * w) for w in RESNET_WIDTH_MULTS)
                            for b in RESNET_BASE_WIDTHS)
_EXPAND_TEXT = {0.2: "0.2", 0.25: "0.25", 0.35: "0.35"}


def resnet_mid(c_out: int, e: float) -> int:
    """Bottleneck width: ``make_divisible(round(C_out·e))`` (``DynamicResNetBottleneckBlock``)."""
    return make_divisible(_round_half_even(c_out * e))


@dataclass(frozen=True)
class OFAResNet50Arch:
    """An ``ofa_resnet50`` subnet in channels: stem, (width, expand ratios of its blocks) per stage."""

    stem_mid: int
    stem_residual: bool
    stem_out: int
    stages: tuple[tuple[int, tuple[float, ...]], ...]
    resolution: int

    def __post_init__(self) -> None:
        if self.stem_mid not in RESNET_STEM_MID:
            raise ValueError(f"OFA-ResNet50 stem width {self.stem_mid} is not one of 24, 32")
        if self.stem_out not in RESNET_STEM_OUT:
            raise ValueError(f"OFA-ResNet50 stem output {self.stem_out} is not one of 40, 48, 64")
        if len(self.stages) != len(RESNET_BASE_DEPTHS):
            raise ValueError(f"an OFA-ResNet50 architecture has 4 stages, got {len(self.stages)}")
        for s, ((width, expands), base) in enumerate(zip(self.stages, RESNET_BASE_DEPTHS, strict=True)):
            if width not in RESNET_STAGE_WIDTHS[s]:
                raise ValueError(f"OFA-ResNet50 stage {s} width {width} is not one of "
                                 f"{', '.join(map(str, RESNET_STAGE_WIDTHS[s]))}")
            if len(expands) - base not in RESNET_DEPTHS:
                raise ValueError(f"OFA-ResNet50 stage {s} has {len(expands)} blocks; allowed "
                                 f"{base}, {base + 1}, {base + 2}")
            for j, e in enumerate(expands):
                if e not in RESNET_EXPANDS:
                    raise ValueError(f"OFA-ResNet50 stage {s} block {j}: expand ratio {e} is not one of "
                                     "0.2, 0.25, 0.35")
        if self.resolution not in RESOLUTIONS:
            raise ValueError(f"OFA-ResNet50 resolution {self.resolution} is not one of 128, 132, …, 224")

    @classmethod
    def from_ofa(cls, d: Sequence[int], e: Sequence[float], w: Sequence[int],
                 r: int | str | Sequence[int]) -> OFAResNet50Arch:
        """From OFA's ``set_active_subnet(d, e, w)`` config plus ``r``.

        ``d``: 5 depths (``d[0]`` = 2 keeps the stem's residual conv, 0 or 1 skips it; then each
        stage's extra blocks 0–2); ``e``: 18 expand ratios, one per supernet block (those beyond a
        stage's depth are ignored); ``w``: 6 width indices into (0.65, 0.8, 1.0) — stem conv, stem
        output, four stages.
        """
        d, w = list(d), list(w)
        e = [float(x) for x in e]
        n_blocks = sum(RESNET_BASE_DEPTHS) + len(RESNET_BASE_DEPTHS) * max(RESNET_DEPTHS)
        if len(d) != 5 or len(e) != n_blocks or len(w) != 6:
            raise ValueError(f"an OFA-ResNet50 config has 5 d, {n_blocks} e and 6 w entries; got "
                             f"{len(d)}, {len(e)} and {len(w)}")
        for i, wi in enumerate(w):
            if wi not in range(len(RESNET_WIDTH_MULTS)):
                raise ValueError(f"OFA-ResNet50 width index w[{i}] = {wi} is not 0, 1 or 2")
        if d[0] not in RESNET_DEPTHS:
            raise ValueError(f"OFA-ResNet50 stem depth d[0] = {d[0]} is not 0, 1 or 2")
        stages = []
        start = 0
        for s, base in enumerate(RESNET_BASE_DEPTHS):
            if d[s + 1] not in RESNET_DEPTHS:
                raise ValueError(f"OFA-ResNet50 depth d[{s + 1}] = {d[s + 1]} is not 0, 1 or 2")
            n_active = base + d[s + 1]
            stages.append((RESNET_STAGE_WIDTHS[s][w[s + 2]], tuple(e[start:start + n_active])))
            start += base + max(RESNET_DEPTHS)
        return cls(RESNET_STEM_MID[w[0]], d[0] == max(RESNET_DEPTHS), RESNET_STEM_OUT[w[1]], tuple(stages),
                   _resolution(r))

    def to_ofa(self) -> dict[str, list]:
        """OFA's ``d``/``e``/``w``/``r`` (stem width 24 as ``w[0] = 0``; inactive blocks get e = 0.25)."""
        e: list[float] = []
        for (_, expands), base in zip(self.stages, RESNET_BASE_DEPTHS, strict=True):
            e += list(expands) + [0.25] * (base + max(RESNET_DEPTHS) - len(expands))
        return {
            "d": [2 if self.stem_residual else 0] + [len(x) - b for (_, x), b in
                                                     zip(self.stages, RESNET_BASE_DEPTHS, strict=True)],
            "e": e,
            "w": [RESNET_STEM_MID.index(self.stem_mid), RESNET_STEM_OUT.index(self.stem_out)]
            + [RESNET_STAGE_WIDTHS[s].index(width) for s, (width, _) in enumerate(self.stages)],
            "r": [self.resolution],
        }


_RESNET_STEM_RE = re.compile(r"stem-(\d+)(-res)?-(\d+)")
_RESNET_STAGE_RE = re.compile(r"(\d+):([0-9.]+(?:-[0-9.]+)*)")


class OFAResNet50(SearchSpace[OFAResNet50Arch]):
    """OFA-ResNet50 (ResNet-50-D, ImageNet): depth 0/1/2, expand 0.2/0.25/0.35, width 0.65/0.8/1.0."""

    name = "ofa_resnet50"
    domain = "ofa_resnet50"

    def __init__(self, resolutions: Sequence[int] = RESOLUTIONS) -> None:
        self.resolutions = _check_resolutions(resolutions)
        r = max(self.resolutions)
        #: The largest input; the model of an architecture declares ``(1, 3, r, r)`` for its own ``r``.
        self.input_shape = (1, 3, r, r)

    def input_shape_of(self, arch: OFAResNet50Arch) -> tuple[int, int, int, int]:
        """The input the model of ``arch`` declares."""
        return (1, 3, arch.resolution, arch.resolution)

    # --- identity -------------------------------------------------------------------------
    def arch_id(self, arch: OFAResNet50Arch) -> str:
        stem = f"stem-{arch.stem_mid}{'-res' if arch.stem_residual else ''}-{arch.stem_out}"
        stages = (f"{width}:" + "-".join(_EXPAND_TEXT[e] for e in expands) for width, expands in arch.stages)
        return "|".join([f"r{arch.resolution}", stem, *stages])

    def parse(self, arch_id: str) -> OFAResNet50Arch:
        form = ("'r<res>|stem-<m>[-res]-<c>|' then 4 stages '<width>:<e>-<e>-…' "
                "(e.g. r224|stem-32-res-64|256:0.25-0.25-0.35|…)")
        if not isinstance(arch_id, str) or not arch_id:
            raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: expected {form}")
        parts = arch_id.split("|")
        if len(parts) != 2 + len(RESNET_BASE_DEPTHS):
            raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: expected {form}, found {len(parts)} "
                             "parts")
        m = _RES_RE.fullmatch(parts[0])
        if not m or str(int(m[1])) != m[1]:
            raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: first part {parts[0]!r} is not "
                             "r<resolution>")
        resolution = int(m[1])
        if resolution not in self.resolutions:
            raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: resolution {resolution} is not one "
                             f"this space offers ({_describe(self.resolutions)})")
        stem = _RESNET_STEM_RE.fullmatch(parts[1])
        if not stem:
            raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: stem {parts[1]!r} is not "
                             "stem-<m>[-res]-<c>, e.g. stem-32-res-64")
        stages = []
        for s, part in enumerate(parts[2:]):
            sm = _RESNET_STAGE_RE.fullmatch(part)
            if not sm:
                raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: stage {s} {part!r} is not "
                                 "<width>:<e>-<e>-…, e.g. 256:0.25-0.2-0.35")
            expands = []
            for j, token in enumerate(sm[2].split("-")):
                if token not in _EXPAND_TEXT.values():
                    raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: expand ratio {token!r} "
                                     f"(stage {s}, block {j}) is not 0.2, 0.25 or 0.35")
                expands.append(float(token))
            stages.append((int(sm[1]), tuple(expands)))
        try:
            arch = OFAResNet50Arch(int(stem[1]), stem[2] is not None, int(stem[3]), tuple(stages), resolution)
        except ValueError as err:
            raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: {err}") from None
        if self.arch_id(arch) != arch_id:  # e.g. leading zeros in a width
            raise ValueError(f"malformed OFA-ResNet50 id {arch_id!r}: not canonical; the canonical form is "
                             f"{self.arch_id(arch)!r}")
        return arch

    # --- drawing ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> OFAResNet50Arch:
        """OFA's ``sample_active_subnet``: stem depth 0 or 2, stage depths 0–2, width index per part and
        expand ratio per block uniformly (so the stem width 24, which two indices give, comes 2 in 3)."""
        d = [int(rng.choice((0, 2)))] + [int(rng.choice(RESNET_DEPTHS)) for _ in RESNET_BASE_DEPTHS]
        n_blocks = sum(RESNET_BASE_DEPTHS) + len(RESNET_BASE_DEPTHS) * max(RESNET_DEPTHS)
        e = [float(rng.choice(RESNET_EXPANDS)) for _ in range(n_blocks)]
        w = [int(rng.integers(len(RESNET_WIDTH_MULTS))) for _ in range(6)]
        return OFAResNet50Arch.from_ofa(d, e, w, int(rng.choice(self.resolutions)))

    def suggest(self, trial: optuna.Trial) -> OFAResNet50Arch:
        stem_mid = trial.suggest_categorical("stem_mid", tuple(sorted(set(RESNET_STEM_MID))))
        stem_residual = trial.suggest_categorical("stem_residual", (False, True))
        stem_out = trial.suggest_categorical("stem_out", RESNET_STEM_OUT)
        stages = []
        for s, base in enumerate(RESNET_BASE_DEPTHS):
            width = trial.suggest_categorical(f"w{s}", RESNET_STAGE_WIDTHS[s])
            depth = base + trial.suggest_categorical(f"d{s}", RESNET_DEPTHS)
            stages.append((width, tuple(trial.suggest_categorical(f"e{s}_{j}", RESNET_EXPANDS)
                                        for j in range(depth))))
        return OFAResNet50Arch(stem_mid, stem_residual, stem_out, tuple(stages),
                               trial.suggest_categorical("r", self.resolutions))

    def params_of(self, arch: OFAResNet50Arch) -> dict[str, Any]:
        params: dict[str, Any] = {"stem_mid": arch.stem_mid, "stem_residual": arch.stem_residual,
                                  "stem_out": arch.stem_out}
        for s, ((width, expands), base) in enumerate(zip(arch.stages, RESNET_BASE_DEPTHS, strict=True)):
            params[f"w{s}"], params[f"d{s}"] = width, len(expands) - base
            params.update({f"e{s}_{j}": e for j, e in enumerate(expands)})
        return {**params, "r": arch.resolution}

    @property
    def size(self) -> int:
        """Distinct networks: the three expand ratios give three bottleneck widths at every stage width."""
        stem = len(set(RESNET_STEM_MID)) * 2 * len(RESNET_STEM_OUT)
        stages = [len(RESNET_WIDTH_MULTS) * sum(len(RESNET_EXPANDS) ** (base + d) for d in RESNET_DEPTHS)
                  for base in RESNET_BASE_DEPTHS]
        return len(self.resolutions) * stem * math.prod(stages)

    # --- ONNX ------------------------------------------------------------------------------
    def spec(self, arch: OFAResNet50Arch) -> ResNetSpec:
        """The static subnet of ``arch``, block by block."""
        blocks = []
        c_in = arch.stem_out
        for (width, expands), stride in zip(arch.stages, RESNET_STRIDES, strict=True):
            for j, e in enumerate(expands):
                blocks.append(Bottleneck(c_in, resnet_mid(width, e), width, stride if j == 0 else 1))
                c_in = width
        return ResNetSpec(arch.stem_mid, arch.stem_residual, arch.stem_out, tuple(blocks))

    def build_onnx(self, arch: OFAResNet50Arch) -> onnx.ModelProto:
        if not isinstance(arch, OFAResNet50Arch):
            raise ValueError(f"{self.name} builds OFAResNet50Arch, got {type(arch).__name__}")
        if arch.resolution not in self.resolutions:
            raise ValueError(f"resolution {arch.resolution} is not one this space offers "
                             f"({_describe(self.resolutions)})")
        return build_resnet(self.spec(arch), self.input_shape_of(arch), self.domain)


def _check_resolutions(resolutions: Sequence[int]) -> tuple[int, ...]:
    out = tuple(sorted({int(r) for r in resolutions}))
    bad = [r for r in out if r not in RESOLUTIONS]
    if not out or bad:
        raise ValueError(f"resolutions must be a non-empty subset of 128, 132, …, 224; got "
                         f"{list(resolutions)}")
    return out


def _describe(resolutions: Sequence[int]) -> str:
    return "128, 132, …, 224" if tuple(resolutions) == RESOLUTIONS else ", ".join(map(str, resolutions))


# --- ONNX: blocks as local functions, one definition per distinct configuration -----------------------
def _bn(f, x: str, c: int, eps: float) -> str:
    if eps == 1e-5:  # ONNX's default
        return f.op("BatchNormalization", x, *f.param(c, n=4))
    return f.op("BatchNormalization", x, *f.param(c, n=4), epsilon=eps)


def _act(b: ModelBuilder, f, x: str, act: str) -> str:
    if act == "relu":
        return f.op("Relu", x)
    if act == "h_swish":
        return f.op("HardSwish", x)
    if act == "relu6":
        return f.call(_relu6(b), x)
    raise ValueError(f"unknown activation {act!r}")


def _relu6(b: ModelBuilder) -> str:
    def body(f, x):
        return f.op("Clip", x, f.op("Constant", value_float=0.0), f.op("Constant", value_float=6.0))
    return b.function("relu6", 1, body)


_ACT_SUFFIX = {"relu": "", "relu6": "_r6", "h_swish": "_hs"}


def _mbconv(b: ModelBuilder, blk: MBConv, eps: float) -> str:
    """One inverted-residual block (see the module docstring); the name encodes every parameter."""
    shape = f"{blk.c_in}_{blk.mid}_{blk.c_out}" if blk.expand_conv else f"{blk.c_in}_{blk.c_out}"
    name = (f"{'mb' if blk.expand_conv else 'dw'}{blk.kernel}_{shape}"
            + (f"_s{blk.stride}" if blk.stride != 1 else "") + ("_se" if blk.se else "")
            + _ACT_SUFFIX[blk.act])
    if not blk.expand_conv and blk.mid != blk.c_in:
        raise ValueError(f"a block without expansion conv keeps its width: mid {blk.mid} != c_in {blk.c_in}")

    def body(f, x):
        y = x
        if blk.expand_conv:
            y = _act(b, f, _bn(f, f.conv(y, blk.c_in, blk.mid), blk.mid, eps), blk.act)
        y = f.conv(y, blk.mid, blk.mid, kernel=blk.kernel, stride=blk.stride, groups=blk.mid)
        y = _act(b, f, _bn(f, y, blk.mid, eps), blk.act)
        if blk.se:
            se_mid = make_divisible(blk.mid // 4)
            s = f.op("GlobalAveragePool", y)
            s = f.op("Relu", f.conv(s, blk.mid, se_mid, bias=True))
            s = f.op("HardSigmoid", f.conv(s, se_mid, blk.mid, bias=True), alpha=1.0 / 6.0, beta=0.5)
            y = f.op("Mul", y, s)
        y = _bn(f, f.conv(y, blk.mid, blk.c_out), blk.c_out, eps)
        return f.op("Add", y, x) if blk.residual else y
    return b.function(name, 1, body)


def build_mobilenet(spec: MobileNetSpec, input_shape: Sequence[int], domain: str) -> onnx.ModelProto:
    """Structural ONNX of a static OFA MobileNetV3 / ProxylessNAS (also MobileNetV2, V3-Large)."""
    b = ModelBuilder(domain, domain=domain)
    eps = spec.bn_eps

    def stem(f, x):
        return _act(b, f, _bn(f, f.conv(x, input_shape[1], spec.stem, kernel=3, stride=2), spec.stem, eps),
                    spec.stem_act)

    def head(f, x):
        c = spec.blocks[-1].c_out
        if spec.head == "mbv3":  # final expand, pool, bias-free feature-mix conv without BN, h-swish
            y = f.op("HardSwish", _bn(f, f.conv(x, c, spec.final_expand), spec.final_expand, eps))
            y = f.op("GlobalAveragePool", y)
            y = f.op("HardSwish", f.conv(y, spec.final_expand, spec.feature_mix))
        elif spec.head == "proxyless":  # feature mix (conv, BN, ReLU6), then pool
            y = _act(b, f, _bn(f, f.conv(x, c, spec.feature_mix), spec.feature_mix, eps), "relu6")
            y = f.op("GlobalAveragePool", y)
        else:
            raise ValueError(f"unknown head {spec.head!r}")
        y = f.op("Flatten", y, axis=1)
        return f.op("Gemm", y, f.param(NUM_CLASSES, spec.feature_mix), f.param(NUM_CLASSES), transB=1)

    x = b.main.call(b.function("stem", 1, stem), "x")
    for blk in spec.blocks:
        x = b.main.call(_mbconv(b, blk, eps), x)
    y = b.main.call(b.function("head", 1, head), x)
    return b.build(input_shape, y, (input_shape[0], NUM_CLASSES))


def _bottleneck(b: ModelBuilder, blk: Bottleneck) -> str:
    """One ResNet-D bottleneck (see the module docstring); identity or avg-pool + 1×1 conv shortcut."""
    name = f"bottleneck_{blk.c_in}_{blk.mid}_{blk.c_out}" + (f"_s{blk.stride}" if blk.stride != 1 else "")

    def body(f, x):
        y = f.op("Relu", _bn(f, f.conv(x, blk.c_in, blk.mid), blk.mid, 1e-5))
        y = f.op("Relu", _bn(f, f.conv(y, blk.mid, blk.mid, kernel=3, stride=blk.stride), blk.mid, 1e-5))
        y = _bn(f, f.conv(y, blk.mid, blk.c_out), blk.c_out, 1e-5)
        if blk.identity:
            shortcut = x
        else:
            pooled = x if blk.stride == 1 else f.op(
                "AveragePool", x, kernel_shape=[blk.stride] * 2, strides=[blk.stride] * 2, ceil_mode=1)
            shortcut = _bn(f, f.conv(pooled, blk.c_in, blk.c_out), blk.c_out, 1e-5)
        return f.op("Relu", f.op("Add", y, shortcut))
    return b.function(name, 1, body)


def build_resnet(spec: ResNetSpec, input_shape: Sequence[int], domain: str) -> onnx.ModelProto:
    """Structural ONNX of a static OFA ResNet-D."""
    b = ModelBuilder(domain, domain=domain)
    m, c = spec.stem_mid, spec.stem_out

    def stem(f, x):
        y = f.op("Relu", _bn(f, f.conv(x, input_shape[1], m, kernel=3, stride=2), m, 1e-5))
        if spec.stem_residual:
            y = f.op("Add", f.op("Relu", _bn(f, f.conv(y, m, m, kernel=3), m, 1e-5)), y)
        y = f.op("Relu", _bn(f, f.conv(y, m, c, kernel=3), c, 1e-5))
        return f.op("MaxPool", y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])

    def head(f, x):
        c_last = spec.blocks[-1].c_out
        y = f.op("Flatten", f.op("GlobalAveragePool", x), axis=1)
        return f.op("Gemm", y, f.param(NUM_CLASSES, c_last), f.param(NUM_CLASSES), transB=1)

    name = f"stem_{m}{'_res' if spec.stem_residual else ''}_{c}"
    x = b.main.call(b.function(name, 1, stem), "x")
    for blk in spec.blocks:
        x = b.main.call(_bottleneck(b, blk), x)
    y = b.main.call(b.function("head", 1, head), x)
    return b.build(input_shape, y, (input_shape[0], NUM_CLASSES))
