"""The objective ``val_acc``: networks trained in the search, weak ones stopped by the median rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nasrlm.cli import main
from nasrlm.errors import NasrlmError
from nasrlm.networks import FitRecipe
from nasrlm.search import ArchEvaluator, NetworkTrainer, Training, search_job
from search_spaces import NasBench201, TorchSearchSpace

SPACE = NasBench201()
QUICK = Training(recipe=FitRecipe(epochs=1, batch_size=128))


def test_the_median_rule_stops_networks_below_the_earlier_ones_after_the_same_epoch() -> None:
    trainer = NetworkTrainer(SPACE, Training(recipe=FitRecipe(epochs=4), startup=2, warmup_epochs=1))
    assert not trainer._stop(1, 0.0)  # no finished network to compare with yet
    trainer.curves = [[50.0, 80.0, 90.0, 95.0], [30.0, 60.0, 85.0, 90.0], [20.0, 30.0]]
    trainer.stopped = 1  # the last: it counts where it ran, and not among the finished
    assert not trainer._stop(0, 0.0)  # the warm-up epoch: never a stop
    assert trainer._stop(1, 59.0) and not trainer._stop(1, 61.0)  # median of 80, 60, 30 after epoch 2
    assert trainer._stop(2, 87.0) and not trainer._stop(2, 88.0)  # of 90 and 85: the stopped one ended
    assert not trainer._stop(3, 0.0)  # the last epoch is the value itself, never a stop


def test_trained_accuracy_is_an_objective_beside_measured_ones(tmp_path: Path) -> None:
    job = search_job(SPACE, ["val_acc", "cpu-1t-b1"], budget=3, out_dir=tmp_path / "run", sampler="random",
                     training=QUICK, progress=False, log=lambda line: None)
    values = job.result.values
    assert values.shape == (3, 2) and ((values[:, 0] >= 0) & (values[:, 0] <= 100)).all()
    report = json.loads((tmp_path / "run" / "best_network" / "report.json").read_text())
    assert report["test_accuracy"][-1] == pytest.approx(values[:, 0].max())
    assert report["arch"] in job.result.arch_ids
    assert (tmp_path / "run" / "best_network" / "model.onnx").exists()


def test_val_acc_needs_a_trainer_and_a_trainer_needs_val_acc(tmp_path: Path, capsys) -> None:
    with pytest.raises(ValueError, match="measured by training networks"):
        ArchEvaluator.for_names(SPACE, ["val_acc"])
    with pytest.raises(ValueError, match="needs 'val_acc' among the objectives"):
        search_job(SPACE, ["acc"], budget=2, out_dir=tmp_path / "r", training=QUICK, progress=False)
    assert main(["search", "nb201", "--objectives", "acc", "--train", "digits", "--budget", "2",
                 "--out", str(tmp_path / "a"), "-q"]) == 2
    assert "--objectives does not name" in capsys.readouterr().err
    assert main(["search", "nb201", "--objectives", "val_acc,cpu-1t-b1", "--train", "nowhere", "--budget",
                 "2", "--out", str(tmp_path / "b"), "-q"]) == 2
    assert "'nowhere' is neither one of digits" in capsys.readouterr().err
    assert main(["search", "nb201", "--objectives", "val_acc,cpu-1t-b1", "--train", "cifar10", "--budget",
                 "2", "--out", str(tmp_path / "c"), "-q"]) == 2
    assert "give --images-dir" in capsys.readouterr().err
    assert not any((tmp_path / d).exists() for d in "abc")


class FlattenHead(TorchSearchSpace[int]):
    """Networks that flatten 16 x 16 feature maps into their classifier: they take 16 x 16 images only."""

    name = "flattenhead"
    input_shape = (1, 3, 16, 16)

    def arch_id(self, arch: int) -> str:
        return f"w{arch}"

    def parse(self, arch_id: str) -> int:
        if arch_id not in ("w4", "w8"):
            raise ValueError(f"malformed flattenhead id {arch_id!r}")
        return int(arch_id[1:])

    def sample(self, rng) -> int:
        return int(rng.choice([4, 8]))

    def suggest(self, trial) -> int:
        return trial.suggest_categorical("width", [4, 8])

    def build_module(self, arch: int):
        import torch

        nn = torch.nn
        return nn.Sequential(nn.Conv2d(3, arch, 3, padding=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(arch * 16 * 16, 10))


def test_digits_on_networks_that_need_their_declared_size_is_one_error_before_any_search() -> None:
    with pytest.raises(NasrlmError, match=r"--train digits: its images are 3x8x8, and flattenhead networks "
                                          r"take the 3x16x16 inputs they declare \(the network does not"):
        NetworkTrainer(FlattenHead(), Training("digits"))
    NetworkTrainer(NasBench201(), Training("digits"))  # pooling globally, they take 8 x 8 digits
