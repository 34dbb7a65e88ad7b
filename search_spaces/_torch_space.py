"""Search spaces whose architectures are ``torch.nn.Module`` factories.

Subclass :class:`TorchSearchSpace`, implement the identity and sampling methods as for any
:class:`~search_spaces.SearchSpace`, and :meth:`~TorchSearchSpace.build_module` instead of
``build_onnx``::

    import torch.nn as nn

    from search_spaces import TorchSearchSpace

    class Widths(TorchSearchSpace[tuple[int, ...]]):
        \"\"\"Three conv layers of 8, 16 or 32 channels; ids like ``8-32-16``.\"\"\"

        name = "widths"
        input_shape = (1, 3, 32, 32)

        def arch_id(self, arch):
            return "-".join(map(str, arch))

        def parse(self, arch_id):
            arch = tuple(int(w) for w in arch_id.split("-") if w.isdigit())
            if len(arch) != 3 or any(w not in (8, 16, 32) for w in arch) or self.arch_id(arch) != arch_id:
                raise ValueError(f"malformed widths id {arch_id!r}: expected three of 8/16/32 joined by '-'")
            return arch

        def sample(self, rng):
            return tuple(int(w) for w in rng.choice([8, 16, 32], size=3))

        def suggest(self, trial):
            return tuple(trial.suggest_categorical(f"w{i}", [8, 16, 32]) for i in range(3))

        def build_module(self, arch):
            layers, channels = [], 3
            for width in arch:
                layers += [nn.Conv2d(channels, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
                channels = width
            return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))

The module is traced to ONNX with :func:`exporters._torch.torch_to_onnx` (BatchNorm kept, weights as
initializers). Exporting costs 10-30 ms per small CNN against well under 1 ms for spaces built with
:class:`~exporters.ModelBuilder`, so prefer the builder where a space is large and fixed. The text
has no local functions: repeated blocks are printed once per repetition.

This module does not import ``torch``; :meth:`~TorchSearchSpace.seeded_module` imports it when a
module is first built, and ``build_module`` implementations import it themselves.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

import onnx

from exporters import materialize, torch_to_onnx
from search_spaces._base import Arch, SearchSpace

if TYPE_CHECKING:
    import torch

__all__ = ["TorchSearchSpace"]


class TorchSearchSpace(SearchSpace[Arch]):
    """A search space defined by a ``torch.nn.Module`` factory, :meth:`build_module`.

    ``build_onnx`` exports the module built under seed 0; ``to_onnx(arch, seed)`` exports the one
    built under ``seed`` (so, unlike builder spaces, the weights are those torch initialises, not
    ``materialize``'s). The canonical text does not depend on the seed. Build the module's weights
    from torch's global RNG only (as ``nn`` layers do): it is seeded inside
    :func:`torch.random.fork_rng`, so the caller's RNG state is left as it was.
    """

    #: ONNX opset the modules are exported with.
    opset: int = 18

    @abc.abstractmethod
    def build_module(self, arch: Arch) -> torch.nn.Module:
        """A freshly constructed module for ``arch`` taking a tensor of :attr:`input_shape`."""

    def seeded_module(self, arch: Arch, seed: int = 0) -> torch.nn.Module:
        """:meth:`build_module` with torch's RNG seeded by ``seed`` (the weights ``to_onnx`` exports)."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self.build_module(arch)

    def build_onnx(self, arch: Arch) -> onnx.ModelProto:
        """The traced model of ``arch`` with the seed-0 weights, as initializers; graph named :attr:`name`."""
        return self._export(self.seeded_module(arch, 0))

    def to_onnx(self, arch: Arch, seed: int = 0) -> onnx.ModelProto:
        """An executable model whose weights are those of ``seeded_module(arch, seed)``."""
        return materialize(self._export(self.seeded_module(arch, seed)))

    def to_torch(self, arch: Arch, seed: int = 0) -> torch.nn.Module:
        """Your own module, :meth:`seeded_module`: the single definition the ONNX was traced from."""
        return self.seeded_module(arch, seed)

    def _export(self, module: torch.nn.Module) -> onnx.ModelProto:
        model = torch_to_onnx(module, self.input_shape, opset=self.opset)
        model.graph.name = self.name
        return model
