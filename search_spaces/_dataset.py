"""The dataset a network is built for: its input, its classes and the suffix of its space's name.

NDS trained each of its spaces on CIFAR-10 and on ImageNet; the two networks differ only in what the
dataset fixes (the input size, the classes, and so the stem that brings the image to the cells' or
stages' resolution, and the head). The spaces of :mod:`search_spaces.nds` and
:mod:`search_spaces.anynet` hold one of these as a class attribute and build the rest from it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dataset:
    """What a dataset fixes of a network: ``input_shape`` (batch 1), ``num_classes``, and ``suffix``, the
    ending of the space names (and of NDS file stems) for networks built for it."""

    name: str
    input_shape: tuple[int, int, int, int]
    num_classes: int
    suffix: str


CIFAR10 = Dataset("CIFAR-10", (1, 3, 32, 32), 10, "")
IMAGENET = Dataset("ImageNet", (1, 3, 224, 224), 1000, "_in")
