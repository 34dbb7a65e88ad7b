"""Train the network of an architecture on image data: what a search found, as weights one can use.

:func:`fit_network` trains any ``torch.nn.Module`` (``SearchSpace.to_torch`` gives one for every
architecture of every space) with :class:`FitRecipe`, NAS-Bench-201's schedule by default: SGD with
Nesterov momentum 0.9, weight decay 5e-4, learning rate 0.1 annealed to 0 by a cosine over the epochs,
batch 256, cross-entropy, random crops of the images padded by an eighth of their size (CIFAR's 4
pixels) and horizontal flips where the data allows them. It reports each epoch's
test accuracy to a callback, which may stop the run early (an Optuna pruner does). :func:`trained_onnx`
writes the trained network back as ONNX.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import onnx
import torch
import torch.nn.functional as F
from torch import nn

from nasrlm.errors import NasrlmError
from nasrlm.images import ImageData

__all__ = ["FitRecipe", "FitResult", "default_recipe", "fit_network", "trained_onnx"]


@dataclass(frozen=True)
class FitRecipe:
    """How a network is trained; the defaults are NAS-Bench-201's (its 200 epochs cut to ``epochs``)."""

    epochs: int = 10
    batch_size: int = 256
    learning_rate: float = 0.1  # peak; a cosine takes it to 0 over the epochs
    momentum: float = 0.9  # Nesterov
    weight_decay: float = 5e-4
    augment: bool = True  # random crops of images padded by an eighth of their size; mirroring
    seed: int = 0  # batch order, augmentation

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not self.learning_rate > 0 or self.weight_decay < 0 or not 0 <= self.momentum < 1:
            raise ValueError("learning_rate must be positive, weight_decay not negative, momentum in [0, 1)")


def default_recipe(dataset: str, epochs: int = 10, seed: int = 0) -> FitRecipe:
    """NAS-Bench-201's schedule for ``epochs``; on ``digits`` (1,347 training images) batch 64 and peak
    rate 0.02, the recipe that ranked networks best there (``experiments/train_ranking.py``)."""
    if dataset == "digits":
        return FitRecipe(epochs=epochs, batch_size=64, learning_rate=0.02, seed=seed)
    return FitRecipe(epochs=epochs, seed=seed)


@dataclass
class FitResult:
    """Per-epoch test accuracy (%) and training loss, the best epoch and the time taken."""

    test_accuracy: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False

    @property
    def best_accuracy(self) -> float:
        return max(self.test_accuracy) if self.test_accuracy else math.nan

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "best_accuracy": self.best_accuracy}


def fit_network(module: nn.Module, data: ImageData, recipe: FitRecipe = FitRecipe(), *, device: str = "cpu",
                progress: bool = True, on_epoch: Callable[[int, float], bool] | None = None) -> FitResult:
    """Train ``module`` on ``data`` in place; ``on_epoch(epoch, test accuracy)`` returning True stops it.

    The module's output must have one column per class of ``data``: a mismatch is a
    :class:`~nasrlm.errors.NasrlmError` before any training.
    """
    module.to(device)
    check_fits(module, data, device)
    generator = torch.Generator().manual_seed(recipe.seed)
    optimiser = torch.optim.SGD(module.parameters(), lr=recipe.learning_rate, momentum=recipe.momentum,
                                nesterov=recipe.momentum > 0, weight_decay=recipe.weight_decay)
    n = len(data.train_y)
    starts = list(range(0, n, recipe.batch_size))
    if len(starts) > 1 and n - starts[-1] == 1:  # a batch of one image breaks batch normalisation
        starts.pop()
    bounds = list(zip(starts, [*starts[1:], n], strict=True))
    steps_per_epoch = len(bounds)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=recipe.epochs * steps_per_epoch)
    result = FitResult()
    start = time.perf_counter()
    bar = _bar(recipe.epochs * steps_per_epoch, progress)
    for epoch in range(recipe.epochs):
        module.train()
        order = torch.randperm(len(data.train_y), generator=generator)
        total, seen = 0.0, 0
        for begin, end in bounds:
            batch = order[begin:end]
            x, y = data.train_x[batch], data.train_y[batch]
            if recipe.augment:
                x = _augment(x, generator, mirror=data.mirror)
            try:
                loss = F.cross_entropy(module(x.to(device)), y.to(device))
            except torch.cuda.OutOfMemoryError:
                raise NasrlmError(f"out of memory on {device} with batches of {recipe.batch_size}: "
                                  "give a smaller --batch-size") from None
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            schedule.step()
            total, seen = total + loss.item() * len(batch), seen + len(batch)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(epoch=epoch + 1, loss=f"{total / seen:.3f}")
        result.train_loss.append(total / seen)
        result.test_accuracy.append(accuracy(module, data.test_x, data.test_y, device=device,
                                             batch_size=recipe.batch_size))
        if bar is not None:
            bar.set_postfix(epoch=epoch + 1, loss=f"{total / seen:.3f}",
                            test=f"{result.test_accuracy[-1]:.1f}%")
        if on_epoch is not None and on_epoch(epoch, result.test_accuracy[-1]):
            result.stopped_early = epoch + 1 < recipe.epochs
            break
    if bar is not None:
        bar.close()
    result.seconds = time.perf_counter() - start
    return result


@torch.no_grad()
def accuracy(module: nn.Module, x: torch.Tensor, y: torch.Tensor, *, device: str = "cpu",
             batch_size: int = 256) -> float:
    """Top-1 accuracy (%) of ``module`` in eval mode."""
    module.eval()
    correct = 0
    for k in range(0, len(y), batch_size):
        logits = module(x[k:k + batch_size].to(device))
        correct += int((logits.argmax(dim=1).cpu() == y[k:k + batch_size]).sum())
    return 100.0 * correct / len(y)


def trained_onnx(module: nn.Module, model: onnx.ModelProto | None = None,
                 input_shape: tuple[int, ...] | None = None) -> onnx.ModelProto:
    """``module``'s current weights as an ONNX model taking ``input_shape`` (batch, channels, height, width).

    Moves ``module`` to the CPU and into eval mode.

    A module from ``onnx_to_torch`` writes them back into ``model``, the ONNX model it was built
    from (same graph, trained weights, the input declared as ``input_shape`` with a free batch size:
    a network trained on 8 x 8 digits takes 8 x 8 images); any other module is exported with
    ``torch_to_onnx`` at ``input_shape``.
    """
    from onnx import numpy_helper

    from exporters import torch_to_onnx

    module = module.to("cpu").eval()
    names = getattr(module, "onnx_names", None)
    if names is None:
        if input_shape is None:
            raise ValueError("input_shape is needed to export a module that was not built from ONNX")
        return torch_to_onnx(module, input_shape)
    if model is None:
        raise ValueError("give the ONNX model the module was built from")
    trained = {names[attr]: value for attr, value in module.state_dict().items()}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for init in out.graph.initializer:
        if init.name in trained:
            init.CopyFrom(numpy_helper.from_array(trained[init.name].numpy(), init.name))
    if input_shape is not None:
        graph_input = next(i for i in out.graph.input if i.name == module.input_name)
        dims = graph_input.type.tensor_type.shape.dim
        if len(dims) != len(input_shape):
            raise ValueError(f"input_shape {input_shape} has {len(input_shape)} dimensions, the model's "
                             f"input {len(dims)}")
        for dim, size in zip(dims, input_shape, strict=True):
            dim.Clear()
            dim.dim_value = size
        dims[0].Clear()
        dims[0].dim_param = "batch"
        del out.graph.value_info[:]  # shapes inferred for the old input
        out.graph.output[0].type.tensor_type.shape.dim[0].Clear()
        out.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    return out


def check_fits(module: nn.Module, data: ImageData, device: str = "cpu") -> None:
    """Raise a one-line :class:`NasrlmError` where ``module`` cannot classify ``data``'s images."""
    module.eval()
    with torch.no_grad():
        try:
            out = module(data.train_x[:2].to(device))
        except RuntimeError as error:
            shape = "x".join(map(str, data.image_shape))
            raise NasrlmError(f"the network does not take {data.name}'s {shape} images "
                              f"({str(error).splitlines()[0]})") from None
    if out.dim() != 2 or out.shape[1] != data.num_classes:
        raise NasrlmError(f"the network gives {tuple(out.shape[1:])} outputs per image, but {data.name} has "
                          f"{data.num_classes} classes")


def _augment(x: torch.Tensor, generator: torch.Generator, *, mirror: bool) -> torch.Tensor:
    """Random crops of the zero-padded images (an eighth of their size each side) and, where ``mirror``,
    horizontal flips, per image."""
    n, _, h, w = x.shape
    pad = max(1, min(h, w) // 8)
    padded = F.pad(x, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=generator).tolist()
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=generator).tolist()
    cropped = torch.stack([padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(n)])
    if mirror:
        flip = torch.rand(n, generator=generator) < 0.5
        cropped[flip] = cropped[flip].flip(3)
    return cropped


def _bar(total: int, progress: bool) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="fit", unit="batch")
