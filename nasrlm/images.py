"""Image classification data to train a search space's networks on: tensors in memory, split in two.

Three sources, none downloaded:

- ``digits``, the default: scikit-learn's 1,797 handwritten digits (8 x 8, 10 classes), shipped inside
  the scikit-learn package, so a fresh machine trains without a download. The images keep their 8 x 8
  pixels (a network that pools globally takes any size; at 32 x 32 training costs 16 times more) and
  are repeated over the space's channels; 1,347 train and 450 test images, split by a fixed
  permutation.
- ``cifar10`` / ``cifar100``: the Python versions of the CIFAR archives (``cifar-10-batches-py`` /
  ``cifar-100-python``), extracted in the directory the user names. Read with ``pickle`` from the
  archive the user downloaded themselves, as torchvision reads them; no torchvision needed.
- a directory with ``train/`` and ``test/`` subdirectories of one folder per class (ImageFolder's
  layout), read with Pillow and resized to the space's input.

Images are standardised per channel with the training split's mean and deviation.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from nasrlm.errors import NasrlmError

__all__ = ["BUILT_IN", "ImageData", "load_images"]

#: Dataset names :func:`load_images` knows (anything else is read as an image-folder directory).
BUILT_IN = ("digits", "cifar10", "cifar100")
#: folder, training files, test file and label key of each CIFAR archive's Python version
_CIFAR = {"cifar10": ("cifar-10-batches-py", [f"data_batch_{k}" for k in range(1, 6)], "test_batch",
                      b"labels"),
          "cifar100": ("cifar-100-python", ["train"], "test", b"fine_labels")}
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}


@dataclass(frozen=True)
class ImageData:
    """Standardised images (N, C, H, W) and integer labels, for training and for testing."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    #: whether a mirrored image keeps its label (photographs: yes; digits: no), for augmentation
    mirror: bool = True

    @property
    def image_shape(self) -> tuple[int, int, int]:
        c, h, w = self.train_x.shape[1:]
        return int(c), int(h), int(w)

    def validation_split(self, fraction: float = 0.2) -> ImageData:
        """Training images only, ``fraction`` of them (a fixed random choice) held out.

        What a search selects on, so that the test images stay unseen until the network found is
        trained and tested (``nasrlm fit``).
        """
        n = len(self.train_y)
        order = torch.from_numpy(np.random.default_rng(0).permutation(n))
        keep, held = order[: n - max(1, round(fraction * n))], order[n - max(1, round(fraction * n)):]
        return ImageData(f"{self.name} (validation split)", self.train_x[keep], self.train_y[keep],
                         self.train_x[held], self.train_y[held], self.num_classes, self.mirror)

    def __repr__(self) -> str:
        c, h, w = self.image_shape
        return (f"{self.name}: {len(self.train_y):,} training and {len(self.test_y):,} held-out images, "
                f"{c}x{h}x{w}, {self.num_classes} classes")


def load_images(name: str, shape: tuple[int, int, int], data_dir: str | Path | None = None, *,
                option: str = "--data-dir") -> ImageData:
    """The dataset ``name`` (see module doc) as images of ``shape`` (C, H, W).

    ``digits`` takes ``shape``'s channels at its own 8 x 8 pixels, image folders are resized to
    ``shape``, CIFAR must have it already (3 x 32 x 32): a network is never silently trained on
    stretched CIFAR images. Errors name the dataset, the directory or the file at fault, and ``option``
    as the command-line option that gives ``data_dir``.
    """
    if name == "digits":
        return _digits(shape)
    if name in _CIFAR:
        if data_dir is None:
            raise NasrlmError(f"{name} is read from the directory holding {_CIFAR[name][0]}/: "
                              f"give {option}")
        return _cifar(name, Path(data_dir), shape, option)
    folder = Path(name)
    if not folder.is_dir():
        raise NasrlmError(f"dataset {name!r} is neither one of {', '.join(BUILT_IN)} nor a directory")
    return _folder(folder, shape)


def _digits(shape: tuple[int, int, int]) -> ImageData:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.from_numpy(digits.images.astype(np.float32))[:, None] / 16.0
    y = torch.from_numpy(digits.target.astype(np.int64))
    order = torch.from_numpy(np.random.default_rng(0).permutation(len(y)))
    x, y = x[order].expand(-1, shape[0], -1, -1).contiguous(), y[order]
    return _standardised("digits", x[:1347], y[:1347], x[1347:], y[1347:], 10, mirror=False)


def _cifar(name: str, data_dir: Path, shape: tuple[int, int, int], option: str) -> ImageData:
    folder, train_files, test_file, key = _CIFAR[name]
    root = data_dir / folder
    if not root.is_dir():
        raise NasrlmError(f"{option} {data_dir}: no {folder}/ in it (extract the Python version of {name})")
    if tuple(shape) != (3, 32, 32):
        raise NasrlmError(f"{name} images are 3x32x32; this space takes {'x'.join(map(str, shape))}")

    def read(file: str) -> tuple[torch.Tensor, torch.Tensor]:
        path = root / file
        try:
            with open(path, "rb") as f:
                batch = pickle.load(f, encoding="bytes")  # the archive's own format; the user's file
            images = np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
            labels = np.asarray(batch[key], dtype=np.int64)
        except (OSError, pickle.UnpicklingError, KeyError, ValueError, EOFError) as error:
            raise NasrlmError(f"{path}: not a readable {name} batch ({error})") from None
        return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels)

    parts = [read(f) for f in train_files]
    train_x, train_y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    test_x, test_y = read(test_file)
    return _standardised(name, train_x, train_y, test_x, test_y, 10 if name == "cifar10" else 100)


def _folder(folder: Path, shape: tuple[int, int, int]) -> ImageData:
    from PIL import Image, UnidentifiedImageError

    splits = {s: folder / s for s in ("train", "test")}
    for split, path in splits.items():
        if not path.is_dir():
            raise NasrlmError(f"image folder {folder}: no {split}/ subdirectory (expected "
                              f"{folder}/train/<class>/*.png and {folder}/test/<class>/*.png)")
    classes = sorted(p.name for p in splits["train"].iterdir() if p.is_dir())
    if len(classes) < 2:
        raise NasrlmError(f"image folder {splits['train']}: {len(classes)} class folders; "
                          "at least two are needed")
    mode = {1: "L", 3: "RGB"}.get(shape[0])
    if mode is None:
        raise NasrlmError(f"image folders give 1 or 3 channels; this space takes {shape[0]}")

    def read(split: str) -> tuple[torch.Tensor, torch.Tensor]:
        images, labels = [], []
        for label, cls in enumerate(classes):
            for path in sorted((splits[split] / cls).glob("*")):
                if path.suffix.lower() not in _IMAGE_SUFFIXES:
                    continue
                try:
                    with Image.open(path) as image:
                        image = image.convert(mode).resize((shape[2], shape[1]), Image.BILINEAR)
                        images.append(np.asarray(image, dtype=np.float32).reshape(shape[1], shape[2], -1))
                except (OSError, UnidentifiedImageError) as error:
                    raise NasrlmError(f"{path}: not a readable image ({error})") from None
                labels.append(label)
        if not images:
            raise NasrlmError(f"image folder {splits[split]}: no images in its class folders")
        x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2) / 255.0
        return x, torch.tensor(labels, dtype=torch.int64)

    (train_x, train_y), (test_x, test_y) = read("train"), read("test")
    return _standardised(folder.name, train_x, train_y, test_x, test_y, len(classes))


def _standardised(name: str, train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor,
                  test_y: torch.Tensor, num_classes: int, *, mirror: bool = True) -> ImageData:
    mean = train_x.mean(dim=(0, 2, 3), keepdim=True)
    std = train_x.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    return ImageData(name, (train_x - mean) / std, train_y, (test_x - mean) / std, test_y, num_classes,
                     mirror)
