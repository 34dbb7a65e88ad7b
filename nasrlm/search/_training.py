"""An objective measured by training: ``val_acc``, each architecture's network trained on image data.

The network of every architecture a search evaluates is built with ``SearchSpace.to_torch`` and trained
by :func:`nasrlm.networks.fit_network` on four fifths of the data's training images; its accuracy on the
other fifth (a fixed validation split) after the last epoch it ran is the objective, so the test images
stay unseen until the network found is trained and tested (``nasrlm fit``). Weak networks stop early by
a median rule like Optuna's ``MedianPruner`` (whose pruners take single-objective studies only): once
``startup`` networks have finished, a network past its ``warmup_epochs`` whose accuracy after an epoch
is below the median of every earlier network's accuracy after the same epoch (stopped ones included,
as Optuna's pruner counts pruned trials) stops, and its accuracy so far is its value. The best
network so far (by ``val_acc``) is kept as weights, trained ONNX and a report.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nasrlm.data import Objective
from nasrlm.errors import NasrlmError
from search_spaces import SearchSpace

if TYPE_CHECKING:  # nasrlm.networks imports torch, which importing nasrlm.search must not
    from nasrlm.images import ImageData
    from nasrlm.networks import FitRecipe

__all__ = ["TRAINED", "NetworkTrainer", "Training"]

#: The objective name of a network's accuracy after training in the search.
TRAINED = "val_acc"


@dataclass(frozen=True)
class Training:
    """How ``val_acc`` is measured: the data, the schedule, the early stopping and the device."""

    dataset: str = "digits"  # see nasrlm.images.load_images
    images_dir: str | None = None  # where cifar10 / cifar100 are extracted
    recipe: FitRecipe | None = None  # None: nasrlm.networks.default_recipe(dataset, epochs=5)
    startup: int = 5  # finished networks before the median rule may stop one
    warmup_epochs: int = 1  # epochs every network trains before the rule may stop it (the first is noisy)
    device: str = "cpu"

    @property
    def schedule(self) -> FitRecipe:
        from nasrlm.networks import default_recipe

        return self.recipe or default_recipe(self.dataset, epochs=5)


class NetworkTrainer:
    """Callable ``arch_id -> val_acc``, stopping weak networks early and keeping the best one in ``keep``."""

    def __init__(self, space: SearchSpace, training: Training, keep: str | Path | None = None) -> None:
        self.space = space
        self.training = training
        self.keep = Path(keep) if keep is not None else None
        self._data: dict[tuple[int, ...], ImageData] = {}  # per input shape (a searched resolution)
        self.data = self.data_for(tuple(space.input_shape[1:]))
        if self.data.image_shape != tuple(space.input_shape[1:]):  # digits keep their 8 x 8 pixels
            self._check_a_network_takes_the_images()
        self.curves: list[list[float]] = []  # accuracy per epoch of every network, stopped ones included
        self.stopped = 0  # how many of them stopped early
        self.best = -np.inf

    def data_for(self, shape: tuple[int, ...]) -> ImageData:
        """The validation split of the data at ``shape`` (channels, height, width), loaded once."""
        from nasrlm.images import load_images

        if shape not in self._data:
            data = load_images(self.training.dataset, shape, self.training.images_dir,  # type: ignore[arg-type]
                               option="--images-dir")
            self._data[shape] = data.validation_split()
        return self._data[shape]

    def _check_a_network_takes_the_images(self) -> None:
        """Before any search: a network of the space classifies the data's images (one that flattens
        its features needs the size it declares), else a one-line error naming the mismatch."""
        from nasrlm.networks import check_fits

        arch = self.space.parse(self.space.sample_ids(1, seed=0)[0])
        try:
            check_fits(self.space.to_torch(arch, seed=0), self.data)
        except NasrlmError as error:
            declared, got = ("x".join(map(str, shape)) for shape in (self.space.input_shape[1:],
                                                                    self.data.image_shape))
            raise NasrlmError(
                f"--train {self.training.dataset}: its images are {got}, and {self.space.name} networks take "
                f"the {declared} inputs they declare ({error}); train on an image folder (resized to "
                f"{declared} on reading) or a dataset of that size") from None

    @property
    def objective(self) -> Objective:
        r = self.training.schedule
        return Objective(TRAINED, "%", f"top-1 accuracy on the {self.data!r} after "
                         f"{r.epochs} epochs (SGD, batch {r.batch_size}, peak rate {r.learning_rate:g}, "
                         "cosine; weak networks stopped early)", f"trained here ({self.training.dataset})",
                         True)

    def __call__(self, arch_id: str) -> float:
        from nasrlm.networks import fit_network

        arch = self.space.parse(arch_id)
        module = self.space.to_torch(arch, seed=self.training.schedule.seed)
        data = self.data_for(tuple(self.space.input_shape_of(arch)[1:]))
        result = fit_network(module, data, self.training.schedule, device=self.training.device,
                             progress=False, on_epoch=self._stop)
        self.stopped += int(result.stopped_early)
        self.curves.append(result.test_accuracy)
        value = result.test_accuracy[-1]
        if self.keep is not None and value > self.best:
            self._keep(arch, arch_id, module, data, result.to_json())
        self.best = max(self.best, value)
        return value

    def _stop(self, epoch: int, accuracy: float) -> bool:
        """The median rule: below the median accuracy of every earlier network after the same epoch."""
        finished = len(self.curves) - self.stopped
        if (finished < self.training.startup or epoch < self.training.warmup_epochs
                or epoch + 1 >= self.training.schedule.epochs):
            return False
        return accuracy < float(np.median([curve[epoch] for curve in self.curves if len(curve) > epoch]))

    def _keep(self, arch: object, arch_id: str, module: object, data: ImageData, report: dict) -> None:
        import onnx
        from safetensors.torch import save_model

        from nasrlm.networks import trained_onnx

        assert self.keep is not None
        self.keep.mkdir(parents=True, exist_ok=True)
        model = trained_onnx(module, self.space.to_onnx(arch, seed=self.training.schedule.seed),  # type: ignore[arg-type]
                             (1, *data.image_shape))
        save_model(module, str(self.keep / "weights.safetensors"))  # type: ignore[arg-type]
        onnx.save(model, self.keep / "model.onnx")
        report = {"space": self.space.name, "arch": arch_id, "dataset": repr(data),
                  "recipe": asdict(self.training.schedule), **report}
        (self.keep / "report.json").write_text(json.dumps(report, indent=2) + "\n")
