"""The NDS AnyNet-style spaces (Vanilla, ResNet, ResNeXt-A, ResNeXt-B) for CIFAR-10 and ImageNet, in ONNX.

Network: pycls' ``AnyNet`` as NDS trained it on CIFAR-10 (pycls ``models/anynet.py`` of 2019 and its
``configs/archive/cifar/anynet/*_nds_1gpu.yaml``: ``STEM_TYPE: res_stem_cifar``, ``STEM_W: 16``,
``STRIDES: [1, 2, 2]``):

* input 1×3×32×32, 10 classes;
* stem: 3×3 conv 3→16 (stride 1, padding 1), BN, ReLU;
* three stages of d_i blocks of output width w_i; the first block of stage i has stride 1, 2, 2 and
  takes the previous width, later blocks stride 1;
* head: global average pool, linear w_3→10 with bias. Every conv is bias-free, every BatchNorm affine.

Blocks (pycls names; NDS json ``block_type``):

* ``vanilla_block`` (``double_plain_block``), space ``nds_vanilla``: [3×3 conv (stride), BN, ReLU] then
  [3×3 conv, BN, ReLU]; no shortcut;
* ``res_basic_block``, space ``nds_resnet``: ReLU(shortcut + f), f = 3×3 conv (stride), BN, ReLU, 3×3 conv,
  BN; the shortcut is the identity, or a 1×1 conv with the stride plus BN where width or stride changes;
* ``res_bottleneck_block``, spaces ``nds_resnext-a`` / ``-b``: f = 1×1 conv w_in→w_b, BN, ReLU, 3×3 conv
  with g groups (stride), BN, ReLU, 1×1 conv w_b→w_out, BN; shortcut and final ReLU as above; the
  bottleneck width is w_b = round(w / b) (pycls: ``round(w * bot_mul)`` with ``bot_mul = 1 / b``) and
  the 3×3 conv has g groups (pycls' ``num_gs``), so g must divide w_b.

Sampling (NDS, Table 1: "a, b, n" = n values spaced about evenly in log space from a to b, drawn
independently per stage). As we read the table: Vanilla and ResNet d_i ∈ (1, 24, 9), w_i ∈ (16, 256, 12);
ResNeXt-A d_i ∈ (1, 16, 5), w_i ∈ (64, 1024, 5), b_i ∈ (1, 4, 3), g_i ∈ (1, 4, 3); ResNeXt-B the same
but g_i ∈ (1, 64, 7). The integer grids used are below (:data:`ANYNET_SPECS`); the paper was not readable
where this was written, so the exact grid points of the 9- and 12-value ranges are our choice. A
bottleneck stage whose g does not divide w_b is redrawn. Ids accept any positive values, so every
record of a published NDS file can be named.

ImageNet (``nds_vanilla_in``, ``nds_resnet_in``, ``nds_resnext-a_in``, ``nds_resnext-b_in``): input
1×3×224×224, 1000 classes, the same three stages (strides 1, 2, 2) and head after a stem that subsamples
by 8: three 3×3 stride-2 convs 3→32→64→64, each with BN and ReLU. NDS' ImageNet records write that stem
as the first entry of every per-stage list (``ds`` [1, …], ``ws`` [64, …], ``ss`` [8, 1, 2, 2],
``bot_muls`` [1.0, …], ``num_gs`` [1, …]), and no public pycls builds it: it is read off the 294
records of ``ResNeXt-A_in`` and ``ResNeXt-B_in``, whose ``params`` all exceed the three stages' and the
head's by exactly its 56,480 and whose ``flops`` all equal, exactly, the multiply-accumulates of the
stages, the head and these convs at 112, 56 and 28 pixels plus 5 per BatchNorm output and the head's
biases (``tests/search_spaces/test_nds_imagenet.py``). Where its ReLUs sit the counts cannot tell. The
ImageNet ResNeXt grids are the values those records take: ResNeXt-A w_i ∈ {16, …, 256}, ResNeXt-B
g_i ∈ {1, …, 16} (else as for CIFAR-10); Vanilla and ResNet, without ImageNet records here, keep the
CIFAR-10 grids.

Ids: ``d=2,5,3;w=16,48,128`` (Vanilla, ResNet) and ``d=…;w=…;b=1,2,4;g=1,4,2`` (ResNeXt), one value per
stage. :meth:`AnyNetSpace.from_nds_net` reads a record's ``net`` config (``ds``, ``ws``, ``ss``,
``bot_muls``, ``num_gs``, ``block_type``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import onnx

from exporters import ModelBuilder
from search_spaces._base import SearchSpace
from search_spaces._dataset import CIFAR10, IMAGENET, Dataset

if TYPE_CHECKING:
    import optuna

STEM_WIDTH = 16  # CIFAR-10
IMAGENET_STEM_WIDTH = 64
STRIDES = (1, 2, 2)
NUM_STAGES = len(STRIDES)
#: The first entry of every ImageNet record's ``ds``, ``ws``, ``ss``, ``bot_muls``, ``num_gs``: the stem
#: (one "block" of width 64 that subsamples by 8), not a stage.
IMAGENET_STEM_ENTRY = (1, IMAGENET_STEM_WIDTH, 8, 1.0, 1)

#: the 9 depths and 12 widths "about evenly spaced in log space" of NDS' (1, 24, 9) and (16, 256, 12).
_DEPTHS_24 = (1, 2, 3, 4, 6, 8, 12, 16, 24)
_WIDTHS_256 = (16, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256)
_POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class AnyNetSpec:
    """One NDS AnyNet space: block type and per-stage sampling grids (empty b/g grids: no bottleneck)."""

    label: str  # NDS file stem
    block: str  # vanilla | res_basic | res_bottleneck
    block_types: tuple[str, ...]  # NDS json block_type prefixes that name this block
    depths: tuple[int, ...]
    widths: tuple[int, ...]
    bot_ratios: tuple[int, ...] = ()
    groups: tuple[int, ...] = ()

    @property
    def bottleneck(self) -> bool:
        return self.block == "res_bottleneck"


ANYNET_SPECS: dict[str, AnyNetSpec] = {
    "nds_vanilla": AnyNetSpec("Vanilla", "vanilla", ("double_plain", "vanilla"), _DEPTHS_24, _WIDTHS_256),
    "nds_resnet": AnyNetSpec("ResNet", "res_basic", ("res_basic",), _DEPTHS_24, _WIDTHS_256),
    "nds_resnext-a": AnyNetSpec("ResNeXt-A", "res_bottleneck", ("res_bottleneck",), _POW2[:5], _POW2[6:],
                                _POW2[:3], _POW2[:3]),
    "nds_resnext-b": AnyNetSpec("ResNeXt-B", "res_bottleneck", ("res_bottleneck",), _POW2[:5], _POW2[6:],
                                _POW2[:3], _POW2[:7]),
}
#: The ImageNet spaces (``<name>_in``): ResNeXt-A/B on the values their NDS ImageNet records take
#: (A: w 16-256, B: g 1-16); Vanilla and ResNet, which have no ImageNet records here, on their CIFAR grids.
ANYNET_SPECS.update({
    "nds_vanilla_in": ANYNET_SPECS["nds_vanilla"],
    "nds_resnet_in": ANYNET_SPECS["nds_resnet"],
    "nds_resnext-a_in": replace(ANYNET_SPECS["nds_resnext-a"], widths=_POW2[4:9]),
    "nds_resnext-b_in": replace(ANYNET_SPECS["nds_resnext-b"], groups=_POW2[:5]),
})


@dataclass(frozen=True)
class AnyNetArch:
    """Per-stage depths d, widths w and, for bottleneck blocks, bottleneck ratios b and groups g."""

    depths: tuple[int, ...]
    widths: tuple[int, ...]
    bot_ratios: tuple[int, ...] = ()
    groups: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for field in ("depths", "widths", "bot_ratios", "groups"):
            object.__setattr__(self, field, tuple(int(v) for v in getattr(self, field)))

    def bottleneck_width(self, stage: int) -> int:
        return round(self.widths[stage] / self.bot_ratios[stage])


class AnyNetSpace(SearchSpace[AnyNetArch]):
    """Base of the NDS AnyNet spaces; subclasses set :attr:`name` (a key of :data:`ANYNET_SPECS`) and, for
    ImageNet, :attr:`dataset`."""

    #: the dataset the network is built for: its input, classes and stem.
    dataset: ClassVar[Dataset] = CIFAR10

    @property
    def input_shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.dataset.input_shape

    @property
    def spec(self) -> AnyNetSpec:
        return ANYNET_SPECS[self.name]

    @property
    def _keys(self) -> tuple[str, ...]:
        return ("d", "w", "b", "g") if self.spec.bottleneck else ("d", "w")

    # --- identity -------------------------------------------------------------------------
    def arch_id(self, arch: AnyNetArch) -> str:
        self.validate(arch)
        values = (arch.depths, arch.widths, arch.bot_ratios, arch.groups)
        return ";".join(f"{k}=" + ",".join(map(str, v)) for k, v in zip(self._keys, values, strict=False))

    def parse(self, arch_id: str) -> AnyNetArch:
        label, keys = self.spec.label, self._keys
        form = ";".join(f"{k}=v1,v2,v3" for k in keys)
        if not isinstance(arch_id, str) or not arch_id:
            raise ValueError(f"malformed {label} id {arch_id!r}: expected {form}")
        parts = arch_id.split(";")
        if len(parts) != len(keys):
            raise ValueError(f"malformed {label} id {arch_id!r}: expected {len(keys)} ';'-separated parts "
                             f"({form}), found {len(parts)}")
        values = []
        for part, key in zip(parts, keys, strict=True):
            name, sep, text = part.partition("=")
            if not sep or name != key:
                raise ValueError(f"malformed {label} id {arch_id!r}: part {part!r} should be '{key}=…'")
            items = text.split(",")
            if len(items) != NUM_STAGES:
                raise ValueError(f"malformed {label} id {arch_id!r}: {key} needs {NUM_STAGES} "
                                 f"comma-separated values, found {len(items)} in {text!r}")
            for item in items:
                if not item.isdigit() or str(int(item)) != item or int(item) == 0:
                    raise ValueError(f"malformed {label} id {arch_id!r}: {key} value {item!r} is not a "
                                     "positive integer")
            values.append(tuple(int(v) for v in items))
        arch = AnyNetArch(*values)
        self.validate(arch)
        return arch

    def validate(self, arch: AnyNetArch) -> None:
        """Raise ``ValueError`` naming what does not belong to this space."""
        label = self.spec.label
        if not isinstance(arch, AnyNetArch):
            raise ValueError(f"expected an AnyNetArch, got {type(arch).__name__}")
        fields = {"depths": arch.depths, "widths": arch.widths, "bot_ratios": arch.bot_ratios,
                  "groups": arch.groups}
        for name, values in fields.items():
            wanted = NUM_STAGES if name in ("depths", "widths") or self.spec.bottleneck else 0
            if len(values) != wanted:
                raise ValueError(f"{label} needs {wanted} {name} (one per stage), got {list(values)}")
            if any(v < 1 for v in values):
                raise ValueError(f"{label} {name} must be positive, got {list(values)}")
        for stage in range(NUM_STAGES if self.spec.bottleneck else 0):
            w_b, g = arch.bottleneck_width(stage), arch.groups[stage]
            if w_b < 1 or w_b % g:
                raise ValueError(f"{label} stage {stage + 1}: {g} groups do not divide the bottleneck width "
                                 f"{w_b} (= round({arch.widths[stage]} / {arch.bot_ratios[stage]}))")

    # --- published format ---------------------------------------------------------------------
    def from_nds_net(self, net: Mapping[str, Any]) -> AnyNetArch:
        """The architecture of one NDS json record's ``net`` config.

        Strides, stem width and stem type, where the record states them, must be the setting this space
        builds (CIFAR-10: ``ss`` [1, 2, 2], ``stem_w`` 16, a CIFAR stem; ImageNet: the stem as the lists'
        first entry, :data:`IMAGENET_STEM_ENTRY`, then ``ss`` [1, 2, 2]); otherwise the record describes
        another network and is refused rather than silently rebuilt differently.
        """
        label = self.spec.label
        block = str(net.get("block_type", ""))
        if not block.startswith(self.spec.block_types):
            raise ValueError(f"NDS {label} records have block_type starting with "
                             f"{' or '.join(self.spec.block_types)}, got {block!r}")
        imagenet = self.dataset == IMAGENET
        if imagenet:
            net = _without_stem_entry(net, label)
        stem_w = _STEMS[self.dataset.name][1]
        for key, expected in (("ss", list(STRIDES)), ("stem_w", stem_w)):
            if net.get(key) is not None and net[key] != expected:
                raise ValueError(f"NDS {label} net config has {key} {net[key]!r}; this space builds the "
                                 f"{self.dataset.name} network with {key} {expected!r}")
        if net.get("stem_type") is not None and ("cifar" in str(net["stem_type"])) == imagenet:
            raise ValueError(f"NDS {label} net config has stem_type {net['stem_type']!r}; this space builds "
                             f"the {self.dataset.name} stem")
        try:
            depths, widths = list(net["ds"]), list(net["ws"])
        except (KeyError, TypeError) as err:
            raise ValueError(f"not an NDS {label} net config (needs ds and ws): {err!r}") from None
        bot_ratios: list[int] = []
        groups: list[int] = []
        if self.spec.bottleneck:
            muls = net.get("bot_muls", net.get("bms"))
            groups = list(net.get("num_gs", net.get("gs")) or [])
            if not muls or not groups:
                raise ValueError(f"NDS {label} net config needs bot_muls and num_gs for bottleneck blocks")
            for m in muls:
                ratio = 1 / float(m) if float(m) > 0 else 0.0
                if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
                    raise ValueError(f"NDS {label} bottleneck multiplier {m!r} is not 1/b for an integer b")
                bot_ratios.append(round(ratio))
        arch = AnyNetArch(tuple(depths), tuple(widths), tuple(bot_ratios), tuple(groups))
        self.validate(arch)
        return arch

    # --- drawing ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> AnyNetArch:
        stages = []
        for _ in range(NUM_STAGES):
            while True:
                d, w = int(rng.choice(self.spec.depths)), int(rng.choice(self.spec.widths))
                if not self.spec.bottleneck:
                    stages.append((d, w))
                    break
                b, g = int(rng.choice(self.spec.bot_ratios)), int(rng.choice(self.spec.groups))
                if round(w / b) % g == 0:
                    stages.append((d, w, b, g))
                    break
        return AnyNetArch(*zip(*stages, strict=True))

    def suggest(self, trial: optuna.Trial) -> AnyNetArch:
        """Per-stage categorical choices; a group count that does not divide the bottleneck width becomes
        the largest grid value that does (a pure function of the suggested values)."""
        stages = []
        for i in range(1, NUM_STAGES + 1):
            d = trial.suggest_categorical(f"d{i}", self.spec.depths)
            w = trial.suggest_categorical(f"w{i}", self.spec.widths)
            if not self.spec.bottleneck:
                stages.append((d, w))
                continue
            b = trial.suggest_categorical(f"b{i}", self.spec.bot_ratios)
            g = trial.suggest_categorical(f"g{i}", self.spec.groups)
            g = max(v for v in self.spec.groups if v <= g and round(w / b) % v == 0)
            stages.append((d, w, b, g))
        return AnyNetArch(*zip(*stages, strict=True))

    # --- ONNX ------------------------------------------------------------------------------
    def build_onnx(self, arch: AnyNetArch) -> onnx.ModelProto:
        self.validate(arch)
        b = ModelBuilder(self.name, domain=self.name.replace("_", ".").replace("-", "_"))
        main = b.main
        stem, w_in = _STEMS[self.dataset.name]
        x = main.call(stem(b), "x")
        for stage, (d, w, stride) in enumerate(zip(arch.depths, arch.widths, STRIDES, strict=True)):
            for i in range(d):
                block = _BLOCKS[self.spec.block]
                extra = (arch.bottleneck_width(stage), arch.groups[stage]) if self.spec.bottleneck else ()
                x = main.call(block(b, w_in if i == 0 else w, w, stride if i == 0 else 1, *extra), x)
            w_in = w
        y = main.call(_head(b, w_in, self.dataset.num_classes), x)
        return b.build(self.input_shape, y, (self.input_shape[0], self.dataset.num_classes))


def _without_stem_entry(net: Mapping[str, Any], label: str) -> dict[str, Any]:
    """An ImageNet record's ``net`` with the stem's entry (the first of each per-stage list) checked and
    removed, so that what remains describes the three stages as a CIFAR record does."""
    out = dict(net)
    for key, expected in zip(("ds", "ws", "ss", "bot_muls", "num_gs"), IMAGENET_STEM_ENTRY, strict=True):
        values = net.get(key)
        if not values:  # bot_muls and num_gs may be empty for blocks without a bottleneck
            continue
        if not isinstance(values, list) or values[0] != expected:
            raise ValueError(f"NDS {label} ImageNet net config has {key} {values!r}; its first entry "
                             f"describes the stem, which this space builds with {key}[0] = {expected!r}")
        out[key] = values[1:]
    return out


# --- blocks, each an ONNX local function defined once per distinct shape ------------------------------
def _conv_bn(f, x: str, c_in: int, c_out: int, k: int, stride: int = 1, groups: int = 1) -> str:
    return f.op("BatchNormalization", f.conv(x, c_in, c_out, k, stride, groups=groups), *f.param(c_out, n=4))


def _suffix(w_in: int, w_out: int, stride: int) -> str:
    return (f"{w_in}" if w_in == w_out else f"{w_in}_{w_out}") + (f"_s{stride}" if stride != 1 else "")


def _stem(b: ModelBuilder) -> str:
    """CIFAR-10: 3×3 conv 3→16, BN, ReLU (pycls' ``res_stem_cifar``)."""
    def body(f, x):
        return f.op("Relu", _conv_bn(f, x, 3, STEM_WIDTH, 3))
    return b.function("stem", 1, body)


def _imagenet_stem(b: ModelBuilder) -> str:
    """ImageNet: three 3×3 stride-2 convs 3→32→64→64, each with BN and ReLU (224 → 28 pixels).

    Not in any public pycls: read off the records, whose parameters exceed the three stages' and the
    head's by 56,480 in all 294 ImageNet records (= these convs and BNs exactly), and whose FLOPs equal
    the stages', the head's and these convs' at 112, 56 and 28 pixels, each multiply-accumulate one FLOP
    plus 5 per BatchNorm output. The channels follow DARTS' ImageNet stem (C/2, C, C); where ReLUs sit
    neither count can tell: here after every BN, as in pycls' stems.
    """
    half = IMAGENET_STEM_WIDTH // 2

    def body(f, x):
        y = f.op("Relu", _conv_bn(f, x, 3, half, 3, 2))
        y = f.op("Relu", _conv_bn(f, y, half, IMAGENET_STEM_WIDTH, 3, 2))
        return f.op("Relu", _conv_bn(f, y, IMAGENET_STEM_WIDTH, IMAGENET_STEM_WIDTH, 3, 2))
    return b.function("stem_in", 1, body)


#: dataset name -> (stem, its output width).
_STEMS = {CIFAR10.name: (_stem, STEM_WIDTH), IMAGENET.name: (_imagenet_stem, IMAGENET_STEM_WIDTH)}


def _shortcut(f, x: str, w_in: int, w_out: int, stride: int) -> str:
    """Identity, or 1×1 conv (with the stride) and BN where the shape changes."""
    return x if w_in == w_out and stride == 1 else _conv_bn(f, x, w_in, w_out, 1, stride)


def _vanilla(b: ModelBuilder, w_in: int, w_out: int, stride: int) -> str:
    def body(f, x):
        y = f.op("Relu", _conv_bn(f, x, w_in, w_out, 3, stride))
        return f.op("Relu", _conv_bn(f, y, w_out, w_out, 3))
    return b.function(f"vanilla_{_suffix(w_in, w_out, stride)}", 1, body)


def _res_basic(b: ModelBuilder, w_in: int, w_out: int, stride: int) -> str:
    def body(f, x):
        y = f.op("Relu", _conv_bn(f, x, w_in, w_out, 3, stride))
        y = _conv_bn(f, y, w_out, w_out, 3)
        return f.op("Relu", f.op("Add", _shortcut(f, x, w_in, w_out, stride), y))
    return b.function(f"res_basic_{_suffix(w_in, w_out, stride)}", 1, body)


def _res_bottleneck(b: ModelBuilder, w_in: int, w_out: int, stride: int, w_b: int, groups: int) -> str:
    def body(f, x):
        y = f.op("Relu", _conv_bn(f, x, w_in, w_b, 1))
        y = f.op("Relu", _conv_bn(f, y, w_b, w_b, 3, stride, groups))
        y = _conv_bn(f, y, w_b, w_out, 1)
        return f.op("Relu", f.op("Add", _shortcut(f, x, w_in, w_out, stride), y))
    return b.function(f"res_bottleneck_{_suffix(w_in, w_out, stride)}_b{w_b}_g{groups}", 1, body)


_BLOCKS = {"vanilla": _vanilla, "res_basic": _res_basic, "res_bottleneck": _res_bottleneck}


def _head(b: ModelBuilder, w: int, num_classes: int) -> str:
    def body(f, x):
        y = f.op("Flatten", f.op("GlobalAveragePool", x), axis=1)
        return f.op("Gemm", y, f.param(num_classes, w), f.param(num_classes), transB=1)
    return b.function(f"head_{w}", 1, body)


# --- the spaces ---------------------------------------------------------------------------------------
class NDSVanilla(AnyNetSpace):
    """NDS Vanilla space: 3 stages of plain double-3×3 blocks, per-stage depth and width (CIFAR-10)."""

    name = "nds_vanilla"


class NDSResNet(AnyNetSpace):
    """NDS ResNet space: 3 stages of residual basic blocks, per-stage depth and width (CIFAR-10)."""

    name = "nds_resnet"


class NDSResNeXtA(AnyNetSpace):
    """NDS ResNeXt-A space: 3 stages of grouped bottleneck blocks, per-stage d, w, b, g ≤ 4 (CIFAR-10)."""

    name = "nds_resnext-a"


class NDSResNeXtB(AnyNetSpace):
    """NDS ResNeXt-B space: 3 stages of grouped bottleneck blocks, per-stage d, w, b, g ≤ 64 (CIFAR-10)."""

    name = "nds_resnext-b"


# --- the same spaces for ImageNet: the ImageNet stem, 224×224 input, 1000 classes -------------------------
class NDSVanillaImageNet(NDSVanilla):
    """NDS Vanilla space for ImageNet (224×224, 1000 classes, the stride-8 ImageNet stem)."""

    name = "nds_vanilla_in"
    dataset = IMAGENET


class NDSResNetImageNet(NDSResNet):
    """NDS ResNet space for ImageNet (224×224, 1000 classes, the stride-8 ImageNet stem)."""

    name = "nds_resnet_in"
    dataset = IMAGENET


class NDSResNeXtAImageNet(NDSResNeXtA):
    """NDS ResNeXt-A space for ImageNet: w 16-256, g ≤ 4 (224×224, 1000 classes, stride-8 ImageNet stem)."""

    name = "nds_resnext-a_in"
    dataset = IMAGENET


class NDSResNeXtBImageNet(NDSResNeXtB):
    """NDS ResNeXt-B space for ImageNet: w 64-1024, g ≤ 16 (224×224, 1000 classes, stride-8 ImageNet stem)."""

    name = "nds_resnext-b_in"
    dataset = IMAGENET


ANYNET_SPACES: dict[str, type[AnyNetSpace]] = {
    cls.name: cls for cls in (NDSResNet, NDSResNeXtA, NDSResNeXtB, NDSVanilla, NDSResNetImageNet,
                              NDSResNeXtAImageNet, NDSResNeXtBImageNet, NDSVanillaImageNet)
}

