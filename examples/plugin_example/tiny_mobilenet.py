"""A search space of your own: a tiny MobileNetV2-like network for 32×32 images, as a torch module factory.

This is the worked example of ``search_spaces/README.md``. The macro skeleton is fixed:

* stem: 3×3 conv 3→16, BatchNorm, ReLU6;
* three stages of 24, 40 and 80 channels, each starting with stride 2 (32 → 16 → 8 → 4 pixels);
* head: 1×1 conv to 128 channels, BatchNorm, ReLU6, global average pool, linear layer to 10 classes.

What is searched: each stage has 1 or 2 inverted-residual blocks, and each block a depthwise kernel of
3 or 5 and an expansion ratio of 1, 3 or 6 — (6 + 6²)³ = 74,088 architectures.

Ids: one stage after another, joined by ``-``; the blocks of a stage joined by ``+``; a block is
``k<kernel>e<expansion>``. E.g. ``k3e6+k5e1-k3e3-k5e6+k3e3`` has two blocks in the first and last stage.
The ids use no characters that a shell would interpret.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from search_spaces import TorchSearchSpace

if TYPE_CHECKING:
    import optuna

KERNELS = (3, 5)
EXPANSIONS = (1, 3, 6)
MAX_DEPTH = 2
STEM_CHANNELS = 16
#: (output channels, stride of the first block) of each stage.
STAGES = ((24, 2), (40, 2), (80, 2))
HEAD_CHANNELS = 128
NUM_CLASSES = 10

Block = tuple[int, int]  # (kernel, expansion)
TinyArch = tuple[tuple[Block, ...], ...]  # one tuple of blocks per stage

_BLOCK = re.compile(r"k(\d)e(\d)")


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1×1 expand (skipped at expansion 1), k×k depthwise, 1×1 project, residual."""

    def __init__(self, c_in: int, c_out: int, kernel: int, expansion: int, stride: int) -> None:
        super().__init__()
        mid = c_in * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers += [nn.Conv2d(c_in, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6()]
        layers += [nn.Conv2d(mid, mid, kernel, stride, padding=kernel // 2, groups=mid, bias=False),
                   nn.BatchNorm2d(mid), nn.ReLU6(),
                   nn.Conv2d(mid, c_out, 1, bias=False), nn.BatchNorm2d(c_out)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class TinyMobileNet(TorchSearchSpace[TinyArch]):
    """Tiny MobileNetV2-like CNN for 32x32 images: 3 stages of 1-2 blocks, kernel 3/5, expansion 1/3/6."""

    name = "tinymb"
    input_shape = (1, 3, 32, 32)

    # --- identity: one canonical string per architecture -------------------------------------
    def arch_id(self, arch: TinyArch) -> str:
        return "-".join("+".join(f"k{k}e{e}" for k, e in stage) for stage in arch)

    def parse(self, arch_id: str) -> TinyArch:
        """Inverse of :meth:`arch_id`; the error names the part that is wrong."""
        if not isinstance(arch_id, str):
            raise ValueError(f"a tinymb id is a string, got {type(arch_id).__name__}")
        stages = arch_id.split("-")
        if len(stages) != len(STAGES):
            raise ValueError(f"malformed tinymb id {arch_id!r}: expected {len(STAGES)} stages joined by '-', "
                             f"found {len(stages)}")
        arch = []
        for s, stage in enumerate(stages):
            blocks = stage.split("+")
            if not 1 <= len(blocks) <= MAX_DEPTH:
                raise ValueError(f"malformed tinymb id {arch_id!r}: stage {s} has {len(blocks)} blocks, "
                                 f"expected 1 to {MAX_DEPTH}")
            parsed = []
            for block in blocks:
                match = _BLOCK.fullmatch(block)
                if not match or int(match[1]) not in KERNELS or int(match[2]) not in EXPANSIONS:
                    raise ValueError(f"malformed tinymb id {arch_id!r}: block {block!r} in stage {s} is not "
                                     f"'k<kernel>e<expansion>' with kernel in {KERNELS} and expansion in "
                                     f"{EXPANSIONS}")
                parsed.append((int(match[1]), int(match[2])))
            arch.append(tuple(parsed))
        return tuple(arch)

    # --- drawing architectures -----------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> TinyArch:
        """Uniform over the 74,088 architectures: a depth of 2 is six times as likely as a depth of 1."""
        per_stage = [((k, e),) for k, e in itertools.product(KERNELS, EXPANSIONS)]
        per_stage += list(itertools.product(itertools.product(KERNELS, EXPANSIONS), repeat=2))
        return tuple(per_stage[int(rng.integers(len(per_stage)))] for _ in STAGES)

    def suggest(self, trial: optuna.Trial) -> TinyArch:
        """Every parameter is drawn every time (a block beyond the depth is ignored), so any set of
        parameters that one trial used builds an architecture: RLMSampler relies on that."""
        arch = []
        for s in range(len(STAGES)):
            depth = trial.suggest_int(f"s{s}_depth", 1, MAX_DEPTH)
            blocks = tuple((trial.suggest_categorical(f"s{s}_b{b}_kernel", KERNELS),
                            trial.suggest_categorical(f"s{s}_b{b}_expansion", EXPANSIONS))
                           for b in range(MAX_DEPTH))
            arch.append(blocks[:depth])
        return tuple(arch)

    def enumerate(self) -> Iterator[TinyArch]:
        choices = list(itertools.product(KERNELS, EXPANSIONS))
        per_stage = [blocks for depth in range(1, MAX_DEPTH + 1)
                     for blocks in itertools.product(choices, repeat=depth)]
        yield from itertools.product(per_stage, repeat=len(STAGES))

    @property
    def size(self) -> int:
        choices = len(KERNELS) * len(EXPANSIONS)
        return sum(choices**d for d in range(1, MAX_DEPTH + 1)) ** len(STAGES)

    # --- the network ---------------------------------------------------------------------------
    def build_module(self, arch: TinyArch) -> nn.Module:
        layers: list[nn.Module] = [nn.Conv2d(self.input_shape[1], STEM_CHANNELS, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(STEM_CHANNELS), nn.ReLU6()]
        c_in = STEM_CHANNELS
        for (c_out, stride), blocks in zip(STAGES, arch, strict=True):
            for b, (kernel, expansion) in enumerate(blocks):
                layers.append(InvertedResidual(c_in, c_out, kernel, expansion, stride if b == 0 else 1))
                c_in = c_out
        layers += [nn.Conv2d(c_in, HEAD_CHANNELS, 1, bias=False), nn.BatchNorm2d(HEAD_CHANNELS), nn.ReLU6(),
                   nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(HEAD_CHANNELS, NUM_CLASSES)]
        return nn.Sequential(*layers)
