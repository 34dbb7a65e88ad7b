from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from nasrlm.cli import main
from nasrlm.errors import NasrlmError
from nasrlm.images import ImageData, load_images
from nasrlm.networks import FitRecipe, fit_network, trained_onnx
from search_spaces import NasBench201

ARCH = "|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|+|skip_connect~0|avg_pool_3x3~1|nor_conv_3x3~2|"


def _stripes(n: int = 64) -> ImageData:
    """Vertical against horizontal stripes with noise: any small CNN can tell them apart."""
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (2 * n,), generator=g)
    line = (torch.arange(8) % 2).float()
    x = torch.where(y[:, None, None, None] == 0, line[None, None, :, None].expand(-1, 1, 8, 8),
                    line[None, None, None, :].expand(-1, 1, 8, 8))
    x = x + 0.3 * torch.randn(2 * n, 1, 8, 8, generator=g)
    return ImageData("stripes", x[:n], y[:n], x[n:], y[n:], 2, mirror=False)


def _small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                         nn.Flatten(), nn.Linear(32, 2))


def test_training_learns_and_reports_every_epoch() -> None:
    seen: list[tuple[int, float]] = []

    def on_epoch(epoch: int, accuracy: float) -> bool:
        seen.append((epoch, accuracy))
        return False  # go on

    result = fit_network(_small_cnn(), _stripes(), FitRecipe(epochs=4, batch_size=16, learning_rate=0.05),
                         progress=False, on_epoch=on_epoch)
    assert [e for e, _ in seen] == [0, 1, 2, 3] and result.test_accuracy == [a for _, a in seen]
    assert result.best_accuracy >= 90 and len(result.train_loss) == 4 and not result.stopped_early


def test_the_epoch_callback_stops_training_early() -> None:
    result = fit_network(_small_cnn(), _stripes(), FitRecipe(epochs=5, batch_size=16), progress=False,
                         on_epoch=lambda epoch, accuracy: epoch == 1)
    assert len(result.test_accuracy) == 2 and result.stopped_early


def test_a_network_that_does_not_fit_the_data_is_refused_before_training() -> None:
    three_classes = nn.Sequential(nn.Flatten(), nn.Linear(64, 3))
    with pytest.raises(NasrlmError, match="gives \\(3,\\) outputs per image, but stripes has 2 classes"):
        fit_network(three_classes, _stripes(), progress=False)
    with pytest.raises(NasrlmError, match="does not take stripes's 1x8x8 images"):
        fit_network(nn.Sequential(nn.Flatten(), nn.Linear(3, 2)), _stripes(), progress=False)
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        FitRecipe(epochs=0)


def test_the_trained_onnx_model_computes_what_the_trained_module_does() -> None:
    space = NasBench201()
    arch = space.parse(ARCH)
    module = space.to_torch(arch)
    data = load_images("digits", (3, 32, 32))
    fit_network(module, data, FitRecipe(epochs=1, batch_size=128), progress=False)
    model = trained_onnx(module, space.to_onnx(arch), (1, 3, 8, 8))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = data.test_x[:16]
    with torch.no_grad():
        expected = module.eval()(x).numpy()
    np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0], expected,
                               rtol=1e-4, atol=1e-4)
    other = _small_cnn()
    exported = trained_onnx(other, input_shape=(1, 1, 8, 8))
    assert exported.graph.input[0].type.tensor_type.shape.dim[1].dim_value == 1


def test_cli_fit_writes_weights_a_trained_onnx_model_and_a_report(tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit"
    assert main(["fit", "nb201", "--arch", ARCH, "--epochs", "1", "--batch-size", "256", "-o", str(out),
                 "-q", "--device", "cpu"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["arch"] == ARCH and report["recipe"]["epochs"] == 1 and len(report["test_accuracy"]) == 1
    weights = load_file(out / "weights.safetensors")
    module = NasBench201().to_torch(NasBench201().parse(ARCH))
    assert set(weights) == set(module.state_dict())
    assert "test accuracy" in capsys.readouterr().out
    assert main(["fit", "nb201", "--arch", ARCH, "--epochs", "1", "-o", str(out), "-q"]) == 2  # not empty
    assert "not empty" in capsys.readouterr().err
    assert main(["fit", "nb201", "--arch", "nope", "-o", str(tmp_path / "x"), "-q"]) == 2
    assert main(["fit", "nb201", "--arch", ARCH, "--dataset", "mnist", "-o", str(tmp_path / "y"), "-q"]) == 2
    assert "'mnist' is neither one of digits" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
