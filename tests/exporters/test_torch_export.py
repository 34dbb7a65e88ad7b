"""Exporting torch modules: weights kept, BatchNorm not folded, text independent of weights and process."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from exporters import count_parameters, from_text, materialize, to_text

torch = pytest.importorskip("torch")
nn = torch.nn

from exporters import torch_to_onnx  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHAPE = (1, 3, 16, 16)


class Residual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(x + self.bn(self.conv(x)))


def small_cnn(seed: int = 0, random_stats: bool = False) -> nn.Module:
    """Conv–BN–ReLU, a bias-free residual block, a strided 5×5 conv, pooling and a linear head."""
    torch.manual_seed(seed)
    module = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), Residual(8),
        nn.Conv2d(8, 16, 5, padding=2, stride=2), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    )
    if random_stats:  # trained-looking statistics, so BatchNorm does something in eval mode
        for bn in (m for m in module.modules() if isinstance(m, nn.BatchNorm2d)):
            bn.running_mean.uniform_(-1.0, 1.0)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.5, 0.5)
    return module


@pytest.fixture(scope="module")
def exported() -> tuple[nn.Module, onnx.ModelProto]:
    module = small_cnn(random_stats=True)
    return module, torch_to_onnx(module, SHAPE)


def test_weights_stay_initializers_and_batchnorm_is_not_folded(exported) -> None:
    module, model = exported
    assert count_parameters(model) == sum(p.numel() for p in module.parameters())
    n_bn = sum(isinstance(m, nn.BatchNorm2d) for m in module.modules())
    assert [n.op_type for n in model.graph.node].count("BatchNormalization") == n_bn == 3
    assert {i.name for i in model.graph.input} == {"x"} and [o.name for o in model.graph.output] == ["y"]


def test_runs_in_onnxruntime_like_torch(exported) -> None:
    module, model = exported
    executable = materialize(model, seed=123)  # existing initializers are left alone
    onnx.checker.check_model(executable, full_check=True)
    session = ort.InferenceSession(executable.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    (out,) = session.run(None, {"x": x})
    with torch.no_grad():
        expected = module.eval()(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, expected, atol=1e-4)


def test_text_depends_on_architecture_only(exported) -> None:
    _, model = exported
    text = to_text(model)
    assert text == to_text(torch_to_onnx(small_cnn(seed=1), SHAPE))  # fresh weights, default BN stats
    assert to_text(from_text(text)) == text
    assert "BatchNormalization" in text and "Identity" not in text
    # No exporter-generated names, scopes or doc strings reach the text.
    for leftover in ("onnx::", "/", "input.1", "weight", "bias", "running", "main_graph", "pytorch"):
        assert leftover not in text, leftover
    assert text != to_text(torch_to_onnx(small_cnn()[:3], SHAPE))


def test_text_is_identical_in_another_process(exported) -> None:
    _, model = exported
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('m', {str(Path(__file__))!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "from exporters import to_text\n"
        "sys.stdout.write(to_text(m.torch_to_onnx(m.small_cnn(seed=7), m.SHAPE)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PYTHONHASHSEED": "3", "PATH": ""})
    assert out.stdout == to_text(model)


def test_quiet_and_leaves_module_as_it_was(tmp_path, monkeypatch, capfd) -> None:
    monkeypatch.chdir(tmp_path)
    module = small_cnn()
    module[3].eval()  # a mixed state that must come back as it was
    modes = [m.training for m in module.modules()]
    rng_state = torch.get_rng_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch_to_onnx(module, SHAPE)
    assert capfd.readouterr() == ("", "")
    assert [m.training for m in module.modules()] == modes
    assert torch.equal(torch.get_rng_state(), rng_state)
    assert list(tmp_path.iterdir()) == []


def test_exporters_import_without_torch() -> None:
    code = "import sys, exporters, exporters._torch; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True,
                   env={"PYTHONPATH": str(REPO), "PATH": ""})
