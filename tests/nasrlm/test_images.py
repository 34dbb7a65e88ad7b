from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nasrlm.errors import NasrlmError
from nasrlm.images import load_images


def test_digits_ship_with_scikit_learn_and_keep_their_8x8_pixels() -> None:
    data = load_images("digits", (3, 32, 32))
    assert data.image_shape == (3, 8, 8) and data.num_classes == 10 and not data.mirror
    assert (len(data.train_y), len(data.test_y)) == (1347, 450)
    assert set(data.train_y.tolist()) == set(range(10))
    assert torch.allclose(data.train_x.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-4)  # standardised
    assert torch.equal(data.train_x[:, 0], data.train_x[:, 2])  # grey, repeated over the channels
    assert load_images("digits", (1, 8, 8)).image_shape == (1, 8, 8)
    assert torch.equal(load_images("digits", (3, 32, 32)).test_y, data.test_y)  # a fixed split


def _cifar_batch(path: Path, n: int, key: bytes, seed: int) -> None:
    rng = np.random.default_rng(seed)
    batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), key: rng.integers(0, 10, n).tolist()}
    path.write_bytes(pickle.dumps(batch))


def test_cifar_is_read_from_the_python_archive_the_user_extracted(tmp_path: Path) -> None:
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    for k in range(1, 6):
        _cifar_batch(root / f"data_batch_{k}", 4, b"labels", k)
    _cifar_batch(root / "test_batch", 3, b"labels", 9)
    data = load_images("cifar10", (3, 32, 32), tmp_path)
    assert (len(data.train_y), len(data.test_y), data.image_shape, data.mirror) == (20, 3, (3, 32, 32), True)
    with pytest.raises(NasrlmError, match="images are 3x32x32; this space takes 3x224x224"):
        load_images("cifar10", (3, 224, 224), tmp_path)
    with pytest.raises(NasrlmError, match="no cifar-100-python/ in it"):
        load_images("cifar100", (3, 32, 32), tmp_path)
    with pytest.raises(NasrlmError, match="give --data-dir"):
        load_images("cifar10", (3, 32, 32))
    (root / "test_batch").write_bytes(b"not a pickle")
    with pytest.raises(NasrlmError, match="test_batch: not a readable cifar10 batch"):
        load_images("cifar10", (3, 32, 32), tmp_path)


def image_folder(root: Path, size: int = 12) -> Path:
    """Two classes (dark and bright squares), four training and two test images each."""
    for split, count in (("train", 4), ("test", 2)):
        for label, shade in (("dark", 20), ("bright", 230)):
            (root / split / label).mkdir(parents=True)
            for k in range(count):
                image = Image.new("RGB", (size, size + k), (shade, shade, shade))
                image.save(root / split / label / f"{k}.png")
    return root


def test_an_image_folder_is_resized_to_the_space_input(tmp_path: Path) -> None:
    data = load_images(str(image_folder(tmp_path / "shades")), (3, 16, 16))
    assert data.image_shape == (3, 16, 16) and data.num_classes == 2
    assert (len(data.train_y), len(data.test_y)) == (8, 4)
    bright = data.train_y == 0  # classes in sorted order: bright, dark
    assert data.train_x[bright].mean() > data.train_x[~bright].mean()


def test_unknown_datasets_and_broken_folders_are_named(tmp_path: Path) -> None:
    with pytest.raises(NasrlmError, match="'imagenet' is neither one of digits, cifar10, cifar100 nor a"):
        load_images("imagenet", (3, 32, 32))
    (tmp_path / "half" / "train" / "a").mkdir(parents=True)
    with pytest.raises(NasrlmError, match="no test/ subdirectory"):
        load_images(str(tmp_path / "half"), (3, 32, 32))
    folder = image_folder(tmp_path / "bad")
    (folder / "train" / "dark" / "broken.png").write_bytes(b"not an image")
    with pytest.raises(NasrlmError, match="broken.png: not a readable image"):
        load_images(str(folder), (3, 16, 16))


def test_the_validation_split_holds_out_a_fixed_fifth_of_the_training_images() -> None:
    data = load_images("digits", (1, 8, 8))
    split = data.validation_split()
    assert (len(split.train_y), len(split.test_y)) == (1078, 269)
    pool = {tuple(x.flatten().tolist()) for x in data.train_x}
    held = {tuple(x.flatten().tolist()) for x in split.test_x}
    assert held <= pool and not held & {tuple(x.flatten().tolist()) for x in data.test_x}
    assert torch.equal(split.test_y, data.validation_split().test_y)
    assert len(set(split.test_y.tolist())) == 10  # drawn across the classes, not the last ones
