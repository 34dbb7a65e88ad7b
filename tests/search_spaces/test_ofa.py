"""Once-for-All spaces: conformance, canonical ids, HELP's configs, and fidelity to OFA's definitions.

The per-layer parameter and MAC formulas below are written from the OFA sources independently of
``search_spaces.ofa`` (widths and bottleneck sizes are literal numbers here); the MAC formula is OFA's own
``count_flops_given_config`` (ofa/nas/efficiency_predictor/latency_lookup_table.py).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from exporters import ModelBuilder, count_macs, count_parameters, materialize
from search_spaces import (
    OFAMBv3Arch,
    OFAMobileNetV3,
    OFAProxylessArch,
    OFAProxylessNAS,
    OFAResNet50,
    OFAResNet50Arch,
    get_space,
)
from search_spaces.ofa import RESOLUTIONS, MBConv, MobileNetSpec, _act, build_mobilenet, make_divisible
from search_spaces.testing import SearchSpaceTests


# --- conformance: the registered spaces (each architecture declares its own resolution) -------------
class TestOFAMobileNetV3(SearchSpaceTests):
    space = OFAMobileNetV3()
    n_archs = 2


class TestOFAProxylessNAS(SearchSpaceTests):
    space = OFAProxylessNAS()
    n_archs = 2


class TestOFAResNet50(SearchSpaceTests):
    space = OFAResNet50()
    n_archs = 2


class TestOFAResNet50OddResolution(SearchSpaceTests):
    space = OFAResNet50(resolutions=(132,))  # odd feature maps: 66, 33, 17, 9, 5 (ceil-mode pooling)
    n_archs = 1


def _structural_stats(model: onnx.ModelProto) -> tuple[int, int]:
    """(parameters, MACs) without drawing weights."""
    m = materialize(model, weights=False)
    return count_parameters(m), count_macs(m)


def _md(v: float) -> int:
    """make_divisible(v, 8), restated here from ofa/utils/pytorch_modules.py."""
    n = max(8, int(v + 4) // 8 * 8)
    return n + 8 if n < 0.9 * v else n


def _main_calls(text: str) -> list[str]:
    """Names of the blocks the main graph calls, in order."""
    main = text.split("<domain")[0]
    return [line.split(".")[1].split(" ")[0] for line in main.splitlines() if " = ofa_" in line]


def _conv_out(size: int, stride: int) -> int:
    return (size - 1) // stride + 1  # OFA: int((fsize - 1) / stride + 1)


# --- independent formulas -----------------------------------------------------------------------------
MBV3_WIDTHS = (32, 48, 96, 136, 192)
MBV3_SE = (False, True, False, True, True)
MBV3_STRIDES = (2, 2, 2, 1, 2)
PROXYLESS_WIDTHS = (32, 56, 104, 128, 248, 416)
PROXYLESS_STRIDES = (2, 2, 2, 1, 2, 1)


def mbv3_counts(arch: OFAMBv3Arch) -> tuple[int, int]:
    """(params, MACs) of an ofa_mbv3 w1.2 subnet: stem 24, first block 24→24, head 1152/1536/1000."""
    size = _conv_out(arch.r, 2)
    params, macs = 3 * 24 * 9 + 2 * 24, size * size * 3 * 24 * 9
    params += 24 * 9 + 2 * 24 + 24 * 24 + 2 * 24  # first block: dw 3×3 + BN, 1×1 24→24 + BN
    macs += size * size * (24 * 9 + 24 * 24)
    c = 24
    for blocks, width, se, stride in zip(arch.stages, MBV3_WIDTHS, MBV3_SE, MBV3_STRIDES, strict=True):
        for j, (k, e) in enumerate(blocks):
            mid, out = c * e, _conv_out(size, stride if j == 0 else 1)
            params += c * mid + 2 * mid + mid * k * k + 2 * mid + mid * width + 2 * width
            macs += size * size * c * mid + out * out * (mid * k * k + mid * width)
            if se:
                q = _md(mid // 4)
                params += mid * q + q + q * mid + mid
                macs += 2 * mid * q
            c, size = width, out
    params += c * 1152 + 2 * 1152 + 1152 * 1536 + 1536 * 1000 + 1000
    macs += size * size * c * 1152 + 1152 * 1536 + 1536 * 1000
    return params, macs


def proxyless_counts(arch: OFAProxylessArch) -> tuple[int, int]:
    """(params, MACs) of an ofa_proxyless w1.3 subnet: stem 40, first block 40→24, head 1664/1000."""
    size = _conv_out(arch.r, 2)
    params, macs = 3 * 40 * 9 + 2 * 40, size * size * 3 * 40 * 9
    params += 40 * 9 + 2 * 40 + 40 * 24 + 2 * 24
    macs += size * size * (40 * 9 + 40 * 24)
    c = 24
    for blocks, width, stride in zip(arch.stages, PROXYLESS_WIDTHS, PROXYLESS_STRIDES, strict=True):
        for j, (k, e) in enumerate(blocks):
            mid, out = c * e, _conv_out(size, stride if j == 0 else 1)
            params += c * mid + 2 * mid + mid * k * k + 2 * mid + mid * width + 2 * width
            macs += size * size * c * mid + out * out * (mid * k * k + mid * width)
            c, size = width, out
    params += c * 1664 + 2 * 1664 + 1664 * 1000 + 1000
    macs += size * size * c * 1664 + 1664 * 1000
    return params, macs


#: make_divisible(round(width · e)) for e = 0.2, 0.25, 0.35, worked out by hand from OFA's rounding.
RESNET_MIDS = {
    168: (32, 40, 56), 208: (40, 56, 72), 256: (48, 64, 88),
    336: (64, 88, 120), 408: (80, 104, 144), 512: (104, 128, 176),
    664: (136, 168, 232), 816: (160, 208, 288), 1024: (208, 256, 360),
    1328: (264, 336, 464), 1640: (328, 408, 576), 2048: (408, 512, 720),
}


def resnet_counts(arch: OFAResNet50Arch) -> tuple[int, int]:
    """(params, MACs) of an ofa_resnet50 subnet (``ResNet50LatencyTable.count_flops_given_config``)."""
    m, c0 = arch.stem_mid, arch.stem_out
    size = _conv_out(arch.resolution, 2)
    params, macs = 3 * m * 9 + 2 * m, size * size * 3 * m * 9
    if arch.stem_residual:
        params += m * m * 9 + 2 * m
        macs += size * size * m * m * 9
    params += m * c0 * 9 + 2 * c0
    macs += size * size * m * c0 * 9
    size = _conv_out(size, 2)  # max pool
    c = c0
    for (width, expands), stride in zip(arch.stages, (1, 2, 2, 2), strict=True):
        for j, e in enumerate(expands):
            mid = RESNET_MIDS[width][(0.2, 0.25, 0.35).index(e)]
            s = stride if j == 0 else 1
            out = _conv_out(size, s)
            params += c * mid + 2 * mid + mid * mid * 9 + 2 * mid + mid * width + 2 * width
            macs += size * size * c * mid + out * out * (mid * mid * 9 + mid * width)
            if s != 1 or c != width:
                params += c * width + 2 * width
                macs += out * out * c * width
            c, size = width, out
    return params + c * 1000 + 1000, macs + c * 1000


# --- fixtures -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mbv3() -> OFAMobileNetV3:
    return OFAMobileNetV3()


@pytest.fixture(scope="module")
def proxyless() -> OFAProxylessNAS:
    return OFAProxylessNAS()


@pytest.fixture(scope="module")
def resnet() -> OFAResNet50:
    return OFAResNet50()


@pytest.fixture(scope="module")
def help_rows(data_dir: Path) -> list[dict[str, str]]:
    path = data_dir / "ofa" / "latency_ms.csv"
    if not path.is_file():
        pytest.skip(f"benchmark data not found: {path}")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_registered_under_their_names() -> None:
    assert isinstance(get_space("ofa_mbv3"), OFAMobileNetV3)
    assert isinstance(get_space("ofa_proxyless"), OFAProxylessNAS)
    assert isinstance(get_space("ofa_resnet50"), OFAResNet50)


def test_widths_follow_ofa_rounding(mbv3: OFAMobileNetV3, proxyless: OFAProxylessNAS) -> None:
    assert mbv3.widths() == (24, 24, 32, 48, 96, 136, 192, 1152, 1536)
    assert proxyless.widths() == (40, 24, 32, 56, 104, 128, 248, 416, 1664)
    assert [make_divisible(v) for v in (19.2, 28.8, 134.4, 249.6, 41.6, 20, 166.4, 1638.4)] == [
        24, 32, 136, 248, 40, 24, 168, 1640]


def test_sizes(mbv3: OFAMobileNetV3, proxyless: OFAProxylessNAS, resnet: OFAResNet50) -> None:
    per_stage = 9**2 + 9**3 + 9**4
    assert tuple(range(128, 225, 4)) == RESOLUTIONS and len(RESOLUTIONS) == 25
    assert mbv3.size == 25 * per_stage**5
    assert proxyless.size == 25 * per_stage**5 * 9
    assert resnet.size == 25 * (2 * 2 * 3) * (3 * (9 + 27 + 81)) ** 3 * (3 * (81 + 243 + 729))


# --- counts against independent formulas and published totals ---------------------------------------
def test_mbv3_counts_match_the_formula(mbv3: OFAMobileNetV3) -> None:
    rng = np.random.default_rng(1)
    archs = [mbv3.sample(rng) for _ in range(6)]
    archs += [OFAMBv3Arch.from_ofa([7] * 20, [6] * 20, [4] * 5, 224),  # the largest subnet
              OFAMBv3Arch.from_ofa([3] * 20, [3] * 20, [2] * 5, 128)]
    for arch in archs:
        assert _structural_stats(mbv3.build_onnx(arch)) == mbv3_counts(arch), mbv3.arch_id(arch)


def test_proxyless_counts_match_the_formula(proxyless: OFAProxylessNAS) -> None:
    rng = np.random.default_rng(2)
    archs = [proxyless.sample(rng) for _ in range(6)]
    archs.append(OFAProxylessArch.from_ofa([7] * 21, [6] * 21, [4] * 5 + [1], 224))
    for arch in archs:
        counts = _structural_stats(proxyless.build_onnx(arch))
        assert counts == proxyless_counts(arch), proxyless.arch_id(arch)


def test_resnet_counts_match_the_formula(resnet: OFAResNet50) -> None:
    rng = np.random.default_rng(3)
    archs = [resnet.sample(rng) for _ in range(6)]
    archs += [OFAResNet50Arch.from_ofa([2] * 5, [0.35] * 18, [2] * 6, 224),
              OFAResNet50Arch.from_ofa([0] * 5, [0.2] * 18, [0] * 6, 132)]
    for arch in archs:
        assert _structural_stats(resnet.build_onnx(arch)) == resnet_counts(arch), resnet.arch_id(arch)


def test_resnet50d_subnet_has_the_published_count(resnet: OFAResNet50) -> None:
    """Depths 3, 4, 6, 3 (OFA's 2+d, 2+d, 4+d, 2+d with d = 1, 2, 2, 1), e 0.25, w 1.0 and the stem's
    residual conv kept: ResNet-50-D.

    torchvision's ResNet-50 has 25,557,032 parameters; the D variant's deep stem (3→32→32→64 3×3 convs
    instead of one 7×7 3→64) adds 28,768 − 9,536 = 19,232, and the average-pool shortcut adds none.
    """
    arch = OFAResNet50Arch.from_ofa([2, 1, 2, 2, 1], [0.25] * 18, [2] * 6, 224)
    assert [len(e) for _, e in arch.stages] == [3, 4, 6, 3]
    params, _ = _structural_stats(resnet.build_onnx(arch))
    assert params == 25_557_032 + 19_232 == 25_576_264


class _MobileNetV2(OFAProxylessNAS):
    """OFAProxylessNASNets(base_stage_width="google", width_mult=1.0): MobileNetV2's widths."""

    WIDTH_MULT = 1.0
    BASE_WIDTHS = (32, 16, 24, 32, 64, 96, 160, 320, 1280)


def test_proxyless_blocks_rebuild_mobilenet_v2() -> None:
    """Kernel 3, expand 6, depths 2, 3, 4, 3, 3, 1 with MobileNetV2's widths is MobileNetV2: torchvision
    publishes 3,504,872 parameters (and 300.77 M MACs) for it."""
    arch = OFAProxylessArch(tuple(((3, 6),) * d for d in (2, 3, 4, 3, 3, 1)), 224)
    assert _structural_stats(_MobileNetV2().build_onnx(arch)) == (3_504_872, 300_774_272)


def test_mbv3_blocks_rebuild_mobilenet_v3_large() -> None:
    """OFA's ``MobileNetV3Large`` config through our block builder. torchvision publishes 5,483,032
    parameters; OFA's feature-mix layer is a bias-free 1×1 conv where torchvision has a linear layer
    with 1,280 biases."""
    cfg = [(3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1), (5, 72, 40, True, "relu", 2),
           (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1), (3, 240, 80, False, "h_swish", 2),
           (3, 200, 80, False, "h_swish", 1), (3, 184, 80, False, "h_swish", 1),
           (3, 184, 80, False, "h_swish", 1), (3, 480, 112, True, "h_swish", 1),
           (3, 672, 112, True, "h_swish", 1), (5, 672, 160, True, "h_swish", 2),
           (5, 960, 160, True, "h_swish", 1), (5, 960, 160, True, "h_swish", 1)]
    blocks, c = [MBConv(16, 16, 16, 3, 1, "relu", False, expand_conv=False)], 16
    for k, mid, out, se, act, stride in cfg:
        blocks.append(MBConv(c, mid, out, k, stride, act, se))
        c = out
    spec = MobileNetSpec(16, "h_swish", tuple(blocks), 960, 1280, "mbv3")
    params, _ = _structural_stats(build_mobilenet(spec, (1, 3, 224, 224), "mbv3_large"))
    assert params == 5_483_032 - 1_280


# --- structure -----------------------------------------------------------------------------------------
def test_mbv3_block_sequence(mbv3: OFAMobileNetV3) -> None:
    """Strides, expand widths, SE (stages 2, 4, 5) and h-swish (stages 3–5) of the smallest subnet."""
    text = mbv3.to_text(mbv3.parse("r224|k3e3-k3e3|k3e3-k3e3|k3e3-k3e3|k3e3-k3e3|k3e3-k3e3"))
    calls = _main_calls(text)
    assert calls == ["stem", "dw3_24_24", "mb3_24_72_32_s2", "mb3_32_96_32", "mb3_32_96_48_s2_se",
                     "mb3_48_144_48_se", "mb3_48_144_96_s2_hs", "mb3_96_288_96_hs", "mb3_96_288_136_se_hs",
                     "mb3_136_408_136_se_hs", "mb3_136_408_192_s2_se_hs", "mb3_192_576_192_se_hs", "head"]
    assert text.count("HardSigmoid <alpha: float = 0.16666667,beta: float = 0.5>") == 6
    assert "epsilon" not in text  # 1e-5, ONNX's default


def test_proxyless_block_sequence(proxyless: OFAProxylessNAS) -> None:
    arch = proxyless.parse("r224|k5e6-k3e3|k3e4-k3e4|k7e6-k7e6|k3e3-k3e3|k3e3-k3e3|k7e6")
    text = proxyless.to_text(arch)
    calls = _main_calls(text)
    assert calls == [
        "stem", "dw3_40_24_r6", "mb5_24_144_32_s2_r6", "mb3_32_96_32_r6", "mb3_32_128_56_s2_r6",
        "mb3_56_224_56_r6", "mb7_56_336_104_s2_r6", "mb7_104_624_104_r6", "mb3_104_312_128_r6",
        "mb3_128_384_128_r6", "mb3_128_384_248_s2_r6", "mb3_248_744_248_r6", "mb7_248_1488_416_r6", "head"]
    assert "Add" not in text.split("dw3_40_24_r6 (x) =>")[1].split("}")[0]  # 40→24: no shortcut
    assert "epsilon: float = 0.001" in text and "SE" not in text and "HardSwish" not in text


def test_resnet_block_sequence(resnet: OFAResNet50) -> None:
    arch = OFAResNet50Arch.from_ofa([0, 0, 0, 0, 0], [0.25] * 18, [1, 0, 0, 1, 2, 0], 224)
    assert resnet.arch_id(arch) == ("r224|stem-24-40|168:0.25-0.25|408:0.25-0.25|1024:0.25-0.25-0.25-0.25|"
                                    "1328:0.25-0.25")
    text = resnet.to_text(arch)
    calls = _main_calls(text)
    assert calls == [
        "stem_24_40", "bottleneck_40_40_168", "bottleneck_168_40_168", "bottleneck_168_104_408_s2",
        "bottleneck_408_104_408", "bottleneck_408_256_1024_s2", *["bottleneck_1024_256_1024"] * 3,
        "bottleneck_1024_336_1328_s2", "bottleneck_1328_336_1328", "head"]
    # stride-2 shortcuts average-pool in ceil mode first; the stride-1 one has no pool at all
    assert text.count("AveragePool <ceil_mode = 1,kernel_shape = [2,2],strides = [2,2]>") == 3
    assert "Add" not in text.split("stem_24_40 (x) =>")[1].split("}")[0]  # residual stem conv skipped


def test_activations_are_ofas() -> None:
    """HardSwish = x·ReLU6(x+3)/6, HardSigmoid(1/6, 0.5) = ReLU6(x+3)/6, relu6 = min(max(x, 0), 6)."""
    b = ModelBuilder("acts", domain="t")
    hs = b.main.op("HardSwish", "x")
    sig = b.main.op("HardSigmoid", "x", alpha=1.0 / 6.0, beta=0.5)
    r6 = _act(b, b.main, "x", "relu6")
    y = b.main.op("Concat", hs, sig, r6, axis=0)
    model = materialize(b.build((1, 9), y, (3, 9)))
    x = np.linspace(-8, 8, 9, dtype=np.float32).reshape(1, 9)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"x": x})
    relu6 = np.clip(x + 3, 0, 6)
    np.testing.assert_allclose(out, np.concatenate([x * relu6 / 6, relu6 / 6, np.clip(x, 0, 6)]), atol=1e-6)


@pytest.mark.parametrize("name", ["ofa_mbv3", "ofa_proxyless", "ofa_resnet50"])
def test_every_resolution_runs_with_its_own_input(name: str) -> None:
    """The registered spaces offer r = 128…224; each model declares and runs on (1, 3, r, r)."""
    space = get_space(name)
    assert space.input_shape == (1, 3, 224, 224)
    arch = space.sample(np.random.default_rng(5))
    for r in (132, 212):
        arch_id = space.arch_id(arch).replace(f"r{arch.resolution}|", f"r{r}|", 1)
        model = space.to_onnx(space.parse(arch_id))
        declared = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
        assert declared == (1, 3, r, r) == space.input_shape_of(space.parse(arch_id))
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        (out,) = session.run(None, {"x": np.zeros(declared, dtype=np.float32)})
        assert out.shape == (1, 1000) and np.all(np.isfinite(out))


# --- ids ------------------------------------------------------------------------------------------------
def test_help_rows_all_parse(mbv3: OFAMobileNetV3, help_rows: list[dict[str, str]]) -> None:
    """All 5,000 HELP configs: valid, distinct, and HELP's padding (random values in the ks/e slots of
    blocks beyond a stage's depth, never 0) is ignored as OFA ignores it."""
    assert len(help_rows) == 5000
    ids = set()
    padded = 0
    for row in help_rows:
        arch = OFAMBv3Arch.from_help_row(row)
        ks, e = [int(v) for v in row["ks"].split()], [int(v) for v in row["e"].split()]
        assert [k if k else ks[i] for i, k in enumerate(arch.ks)] == ks  # active entries kept
        assert all(a in (0, b) for a, b in zip(arch.e, e, strict=True))
        assert arch.d == tuple(int(v) for v in row["d"].split()) and arch.r == int(row["r"])
        padded += sum(1 for a, b in zip(arch.ks, ks, strict=True) if a == 0 and b != 0)
        assert mbv3.parse(mbv3.arch_id(arch)) == arch
        ids.add(mbv3.arch_id(arch))
    assert len(ids) == 5000
    assert padded == sum(4 - int(d) for row in help_rows for d in row["d"].split())  # every inactive slot


def test_inactive_layers_do_not_change_the_id(mbv3: OFAMobileNetV3, resnet: OFAResNet50) -> None:
    d = [2, 3, 4, 2, 3]
    ks, e = [3, 5, 7, 3] * 5, [4, 6, 3, 4] * 5
    a = OFAMBv3Arch.from_ofa(ks, e, d, 176)
    ks2, e2 = list(ks), list(e)
    ks2[2], e2[3], ks2[19] = 5, 6, 7  # stage 0 blocks 2–3 and stage 4 block 3 are inactive
    b = OFAMBv3Arch.from_ofa(ks2, e2, d, [176])
    c = OFAMBv3Arch.from_ofa([k if i not in (2, 3, 19) else 0 for i, k in enumerate(ks)], e, d, "176")
    assert mbv3.arch_id(a) == mbv3.arch_id(b) == mbv3.arch_id(c)
    assert mbv3.arch_id(a) == "r176|k3e4-k5e6|k3e4-k5e6-k7e3|k3e4-k5e6-k7e3-k3e4|k3e4-k5e6|k3e4-k5e6-k7e3"
    assert a.ks[:4] == (3, 5, 0, 0) and OFAMBv3Arch.from_ofa(a.ks, a.e, a.d, a.r) == a
    # ResNet: w[0] = 0 and 1 give the same stem width; inactive blocks' e are ignored.
    e18 = [0.2, 0.25, 0.35] * 6
    r1 = OFAResNet50Arch.from_ofa([2, 0, 1, 2, 0], e18, [0, 1, 2, 0, 1, 2], 224)
    e18b = list(e18)
    e18b[2], e18b[3] = 0.2, 0.2  # blocks 3–4 of stage 0 are inactive at d = 0
    r2 = OFAResNet50Arch.from_ofa([2, 0, 1, 2, 0], e18b, [1, 1, 2, 0, 1, 2], 224)
    assert resnet.arch_id(r1) == resnet.arch_id(r2)
    assert r1.stem_residual and r1.stem_mid == 24
    assert OFAResNet50Arch.from_ofa(**r1.to_ofa()) == r1
    # d[0] = 0 and 1 both skip the stem's residual conv (OFA: skipping = d[0] != max)
    skip0 = OFAResNet50Arch.from_ofa([0, 0, 1, 2, 0], e18, [0, 1, 2, 0, 1, 2], 224)
    skip1 = OFAResNet50Arch.from_ofa([1, 0, 1, 2, 0], e18, [0, 1, 2, 0, 1, 2], 224)
    assert skip0 == skip1 and not skip0.stem_residual


@pytest.mark.parametrize(
    ("bad", "names"),
    [
        ("r224|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4", "found 5 parts"),
        ("r225|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4", "resolution 225"),
        ("224|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4", "'224' is not r<resolution>"),
        ("r224|k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4", "stage 0 has 1 blocks"),
        ("r224|k3e4-k3e4|k3e4-k9e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4", "stage 1 block 1: kernel 9"),
        ("r224|k3e4-k3e4|k3e4-k3e4|k3e4-k3e5|k3e4-k3e4|k3e4-k3e4", "stage 2 block 1: expand ratio 5"),
        ("r224|k3e4-k3e4|k3e4-k3e4|k3e4-k03e4|k3e4-k3e4|k3e4-k3e4", "block 'k03e4'"),
        ("r224|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4 ", "block 'k3e4 '"),
    ],
)
def test_malformed_mbv3_ids_name_the_bad_part(mbv3: OFAMobileNetV3, bad: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        mbv3.parse(bad)


@pytest.mark.parametrize(
    ("bad", "names"),
    [
        ("r224|stem-32-64|256:0.25-0.25|512:0.25-0.25|1024:0.25-0.25-0.25-0.25", "found 5 parts"),
        ("r224|stem-32-66|256:0.25-0.25|512:0.25-0.25|1024:0.25-0.25-0.25-0.25|2048:0.25-0.25", "output 66"),
        ("r224|stem-32-skip-64|256:0.25-0.25|512:0.25-0.25|1024:0.25-0.25-0.25-0.25|2048:0.25-0.25",
         "stem 'stem-32-skip-64'"),
        ("r224|stem-32-64|256:0.25|512:0.25-0.25|1024:0.25-0.25-0.25-0.25|2048:0.25-0.25",
         "stage 0 has 1 blocks"),
        ("r224|stem-32-64|256:0.25-0.25|512:0.25-0.3|1024:0.25-0.25-0.25-0.25|2048:0.25-0.25",
         "'0.3' \\(stage 1, block 1\\)"),
        ("r224|stem-32-64|256:0.25-0.25|500:0.25-0.25|1024:0.25-0.25-0.25-0.25|2048:0.25-0.25", "width 500"),
        ("r224|stem-32-64|256:0.25-0.25|512:0.25-0.25|1024:0.25-0.25-0.25-0.25|02048:0.25-0.25",
         "not canonical"),
    ],
)
def test_malformed_resnet_ids_name_the_bad_part(resnet: OFAResNet50, bad: str, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        resnet.parse(bad)


def test_proxyless_last_stage_has_one_block(proxyless: OFAProxylessNAS) -> None:
    with pytest.raises(ValueError, match="stage 5 has 2 blocks"):
        proxyless.parse("r224|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4")
    # OFA clips the last depth with min(1, d): any OFA depth there means one block
    a = OFAProxylessArch.from_ofa([3] * 21, [4] * 21, [2, 2, 2, 2, 2, 4], 224)
    assert a.d == (2, 2, 2, 2, 2, 1)


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (([3] * 19, [4] * 20, [2] * 5, 224), "20 ks and 20 e entries, got 19 and 20"),
        (([3] * 20, [4] * 20, [2] * 4, 224), "5 depths, got 4"),
        (([3] * 20, [4] * 20, [2, 2, 5, 2, 2], 224), "depth 5 of stage 2"),
        (([3] * 20, [4] * 20, [2] * 5, 230), "resolution 230"),
        (([3] * 19 + [6], [4] * 20, [2] * 5, 224), "layer 19 \\(inactive\\) has ks 6"),
        (([3] * 19 + [6], [4] * 20, [2] * 4 + [4], 224), "stage 4 block 3: kernel 6"),
        (("3 " * 19 + "x", "4 " * 20, "2 " * 5, "224"), "entry 19 'x'"),
    ],
)
def test_malformed_ofa_configs_name_the_bad_part(args: tuple, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        OFAMBv3Arch.from_ofa(*args)


def test_resolution_subset_is_enforced() -> None:
    space = OFAMobileNetV3(resolutions=(160, 224))
    assert space.input_shape == (1, 3, 224, 224)
    with pytest.raises(ValueError, match="resolution 192 is not one this space offers \\(160, 224\\)"):
        space.parse("r192|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4|k3e4-k3e4")
    with pytest.raises(ValueError, match="non-empty subset"):
        OFAResNet50(resolutions=(130,))
    rng = np.random.default_rng(0)
    assert {space.sample(rng).resolution for _ in range(20)} == {160, 224}


def test_sampling_follows_ofa(mbv3: OFAMobileNetV3, resnet: OFAResNet50) -> None:
    """Depth uniform per stage (not per architecture), stem width 24 two times in three (w[0] ∈ 0, 1)."""
    rng = np.random.default_rng(0)
    depths = np.array([mbv3.sample(rng).d for _ in range(600)])
    assert all(abs(np.mean(depths[:, s] == d) - 1 / 3) < 0.08 for s in range(5) for d in (2, 3, 4))
    stems = [resnet.sample(rng).stem_mid for _ in range(600)]
    assert abs(stems.count(24) / 600 - 2 / 3) < 0.08
