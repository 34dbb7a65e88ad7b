"""``SubsetSpace``: a search space restricted to a fixed list of another space's architectures.

A benchmark table that covers part of a space (NAS-Bench-101's published 20,000 of 423,624 cells) can
answer only for its own rows; searching the whole space would spend almost every trial on cells it
cannot evaluate. The subset keeps the base space's ids, texts and models and draws only listed
architectures, so everything downstream (tables, stores, the regression model) sees the same ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from search_spaces._base import Arch, SearchSpace

if TYPE_CHECKING:
    import onnx
    import optuna


class SubsetSpace(SearchSpace[Arch]):
    """The architectures ``arch_ids`` of ``base``, drawn by index (``suggest`` asks for ``arch_index``)."""

    def __init__(self, base: SearchSpace[Arch], arch_ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(base.arch_id(base.parse(i)) for i in arch_ids))  # canonical, distinct
        if not ids:
            raise ValueError(f"a subset of {base.name} needs at least one architecture")
        self.base = base
        self.name = base.name
        self.input_shape = base.input_shape
        self._ids = ids
        self._members = set(ids)

    def __repr__(self) -> str:
        return f"SubsetSpace({self.base!r}, {len(self._ids):,} architectures)"

    # --- identity: the base space's ----------------------------------------------------------
    def arch_id(self, arch: Arch) -> str:
        return self.base.arch_id(arch)

    def parse(self, arch_id: str) -> Arch:
        arch = self.base.parse(arch_id)
        if self.base.arch_id(arch) not in self._members:
            raise ValueError(f"{self.name} architecture {arch_id!r} is not among this subset's "
                             f"{len(self._ids):,}")
        return arch

    # --- drawing: only listed architectures ---------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Arch:
        return self.base.parse(self._ids[int(rng.integers(len(self._ids)))])

    def suggest(self, trial: optuna.Trial) -> Arch:
        return self.base.parse(self._ids[trial.suggest_int("arch_index", 0, len(self._ids) - 1)])

    def enumerate(self) -> Iterator[Arch]:
        return (self.base.parse(i) for i in self._ids)

    @property
    def size(self) -> int:
        return len(self._ids)

    # --- models: the base space's -------------------------------------------------------------
    def input_shape_of(self, arch: Arch) -> tuple[int, ...]:
        return self.base.input_shape_of(arch)

    def build_onnx(self, arch: Arch) -> onnx.ModelProto:
        return self.base.build_onnx(arch)

    def to_onnx(self, arch: Arch, seed: int = 0) -> onnx.ModelProto:
        return self.base.to_onnx(arch, seed)

    def to_text(self, arch: Arch) -> str:
        return self.base.to_text(arch)
