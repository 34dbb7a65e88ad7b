"""TorchSearchSpace: a small space defined by a torch module factory, through the conformance suite."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from exporters import count_parameters, from_text, to_text
from search_spaces import TorchSearchSpace
from search_spaces.testing import SearchSpaceTests

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]

WIDTHS = (8, 16, 32)
KERNELS = (3, 5)
MAX_LAYERS = 3
_LAYER = re.compile(r"w(\d+)-k(\d+)")

TinyArch = tuple[tuple[int, int], ...]  # (width, kernel) per conv layer


class TinyCNN(TorchSearchSpace[TinyArch]):
    """1-3 conv–BN–ReLU layers of 8/16/32 channels and 3×3 or 5×5 kernels; ids like ``w8-k3_w16-k5``."""

    name = "tinycnn"
    input_shape = (1, 3, 16, 16)

    def arch_id(self, arch: TinyArch) -> str:
        return "_".join(f"w{w}-k{k}" for w, k in arch)

    def parse(self, arch_id: str) -> TinyArch:
        layers = []
        for part in str(arch_id).split("_"):
            match = _LAYER.fullmatch(part)
            if not match:
                raise ValueError(f"malformed tinycnn id {arch_id!r}: {part!r} is not 'w<width>-k<kernel>'")
            layers.append((int(match[1]), int(match[2])))
        arch = tuple(layers)
        if not 1 <= len(arch) <= MAX_LAYERS:
            raise ValueError(f"tinycnn id {arch_id!r} has {len(arch)} layers; 1 to {MAX_LAYERS} allowed")
        if any(w not in WIDTHS or k not in KERNELS for w, k in arch) or self.arch_id(arch) != arch_id:
            raise ValueError(f"tinycnn id {arch_id!r}: widths must be in {WIDTHS}, kernels in {KERNELS}")
        return arch

    def sample(self, rng: np.random.Generator) -> TinyArch:
        depth = int(rng.integers(1, MAX_LAYERS + 1))
        return tuple((int(rng.choice(WIDTHS)), int(rng.choice(KERNELS))) for _ in range(depth))

    def suggest(self, trial) -> TinyArch:
        depth = trial.suggest_int("depth", 1, MAX_LAYERS)
        return tuple((trial.suggest_categorical(f"w{i}", WIDTHS), trial.suggest_categorical(f"k{i}", KERNELS))
                     for i in range(depth))

    def enumerate(self) -> Iterator[TinyArch]:
        for depth in range(1, MAX_LAYERS + 1):
            yield from itertools.product(itertools.product(WIDTHS, KERNELS), repeat=depth)

    @property
    def size(self) -> int:
        return sum((len(WIDTHS) * len(KERNELS)) ** d for d in range(1, MAX_LAYERS + 1))

    def build_module(self, arch: TinyArch) -> torch.nn.Module:
        nn = torch.nn
        layers: list[nn.Module] = []
        channels = self.input_shape[1]
        for width, kernel in arch:
            layers += [nn.Conv2d(channels, width, kernel, padding=kernel // 2, bias=False),
                       nn.BatchNorm2d(width), nn.ReLU()]
            channels = width
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))


class TestTinyCNNConformance(SearchSpaceTests):
    space = TinyCNN()


@pytest.fixture(scope="module")
def space() -> TinyCNN:
    return TinyCNN()


ARCH_IDS = ["w8-k3", "w8-k3_w16-k5", "w32-k5_w8-k3_w16-k3"]


@pytest.mark.parametrize("arch_id", ARCH_IDS)
def test_parameters_match_the_module(space: TinyCNN, arch_id: str) -> None:
    arch = space.parse(arch_id)
    model = space.to_onnx(arch)
    assert count_parameters(model) == sum(p.numel() for p in space.seeded_module(arch).parameters())
    assert [n.op_type for n in model.graph.node].count("BatchNormalization") == len(arch)


def test_onnxruntime_matches_torch(space: TinyCNN) -> None:
    arch = space.parse(ARCH_IDS[-1])
    module = space.seeded_module(arch, seed=5).eval()
    for bn in (m for m in module.modules() if isinstance(m, torch.nn.BatchNorm2d)):
        bn.running_mean.uniform_(-1.0, 1.0)  # let eval-mode BatchNorm do something
        bn.running_var.uniform_(0.5, 2.0)
    model = space._export(module)
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(space.input_shape).astype(np.float32)
    (out,) = session.run(None, {session.get_inputs()[0].name: x})
    with torch.no_grad():
        np.testing.assert_allclose(out, module(torch.from_numpy(x)).numpy(), atol=1e-4)


def test_seed_sets_weights_not_text(space: TinyCNN) -> None:
    arch = space.parse(ARCH_IDS[1])
    state = torch.get_rng_state()
    seeded = [space.to_onnx(arch, seed=s) for s in (0, 0, 1)]
    assert torch.equal(torch.get_rng_state(), state), "the caller's torch RNG state must be untouched"
    blobs = [m.SerializeToString(deterministic=True) for m in seeded]
    assert blobs[0] == blobs[1] != blobs[2]
    assert blobs[0] == space.build_onnx(arch).SerializeToString(deterministic=True)
    texts = {to_text(m) for m in seeded}
    assert texts == {space.to_text(arch)}
    text = texts.pop()
    assert to_text(from_text(text)) == text
    assert text.splitlines()[1].startswith("tinycnn (float[1,3,16,16] x) => (float[1,10] y)")


def test_text_is_identical_in_another_process(space: TinyCNN) -> None:
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(Path(__file__))!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "space = m.TinyCNN()\n"
        f"sys.stdout.write('\\n\\n'.join(space.to_text(space.parse(a)) for a in {ARCH_IDS!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PYTHONHASHSEED": "5", "PATH": ""})
    assert out.stdout == "\n\n".join(space.to_text(space.parse(a)) for a in ARCH_IDS)


def test_module_imports_without_torch() -> None:
    code = "import sys, search_spaces._torch_space; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True,
                   env={"PYTHONPATH": str(REPO), "PATH": ""})
