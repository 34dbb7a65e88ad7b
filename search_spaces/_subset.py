"""``SubsetSpace``: a search space restricted to a fixed list of another space's architectures.

A benchmark table that covers part of a space (NAS-Bench-101's published 20,000 of 423,624 cells) can
answer only for its own rows; searching the whole space would spend almost every trial on cells it
cannot evaluate. The subset keeps the base space's ids, texts and models and draws only listed
architectures, so everything downstream (tables, stores, the regression model) sees the same ids.

How a sampler searches it: where the base space maps architectures back to its parameters
(``params_of``), ``suggest`` draws the base space's own parameters and returns the listed architecture
nearest to what they build, so TPE, NSGA-II or a GP model the space's structure as they would on the
whole space. Otherwise it asks for a row index, ``arch_index``, whose order means nothing to a sampler.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from search_spaces._base import Arch, SearchSpace

if TYPE_CHECKING:
    import onnx
    import optuna

#: How ``suggest`` draws: the base space's parameters snapped to the nearest listed architecture, or a
#: row index; ``auto`` snaps where the base space has ``params_of``.
DrawBy = Literal["auto", "params", "index"]


class SubsetSpace(SearchSpace[Arch]):
    """The architectures ``arch_ids`` of ``base``; ``suggest`` draws as ``draw_by`` says (module doc).

    Nearest means fewest parameters differing, a parameter one architecture has and the other lacks
    counting as one; ties go to a listed architecture chosen by a hash of the drawn one's id, so
    ``suggest`` stays a pure function of the parameters.
    """

    def __init__(self, base: SearchSpace[Arch], arch_ids: Sequence[str], *, draw_by: DrawBy = "auto") -> None:
        ids = list(dict.fromkeys(base.arch_id(base.parse(i)) for i in arch_ids))  # canonical, distinct
        if not ids:
            raise ValueError(f"a subset of {base.name} needs at least one architecture")
        if draw_by not in ("auto", "params", "index"):
            raise ValueError(f"draw_by must be 'auto', 'params' or 'index', got {draw_by!r}")
        has_params = _has_params_of(base, ids[0])
        if draw_by == "params" and not has_params:
            raise ValueError(f"draw_by='params' needs {base.name}.params_of, which it does not have")
        self.base = base
        self.name = base.name
        self.input_shape = base.input_shape
        self.draw_by: Literal["params", "index"] = "params" if draw_by != "index" and has_params else "index"
        self._ids = ids
        self._members = {arch_id: k for k, arch_id in enumerate(ids)}
        self._codes: _ParamCodes | None = None  # built on the first snap: 20,000 NB101 cells take seconds

    def __repr__(self) -> str:
        return f"SubsetSpace({self.base!r}, {len(self._ids):,} architectures, draw_by={self.draw_by!r})"

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
        if self.draw_by == "index":
            return self.base.parse(self._ids[trial.suggest_int("arch_index", 0, len(self._ids) - 1)])
        return self.nearest(self.base.suggest(trial))

    def nearest(self, arch: Arch) -> Arch:
        """``arch`` if it is listed, else the listed architecture nearest to it in the base parameters."""
        arch_id = self.base.arch_id(arch)
        if arch_id in self._members:
            return arch
        if self._codes is None:
            self._codes = _ParamCodes(self.base, self._ids)
        distance = self._codes.distances(self.base.params_of(arch))
        ties = np.flatnonzero(distance == distance.min())
        return self.base.parse(self._ids[int(ties[zlib.crc32(arch_id.encode()) % len(ties)])])

    def params_of(self, arch: Arch) -> dict[str, Any]:
        if self.draw_by == "index":
            arch_id = self.arch_id(arch)
            if arch_id not in self._members:
                raise ValueError(f"{self.name} architecture {arch_id!r} is not among this subset's "
                                 f"{len(self._ids):,}")
            return {"arch_index": self._members[arch_id]}
        return self.base.params_of(arch)

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


def _has_params_of(base: SearchSpace[Arch], arch_id: str) -> bool:
    try:
        base.params_of(base.parse(arch_id))
    except NotImplementedError:
        return False
    return True


class _ParamCodes:
    """The listed architectures' parameters as a matrix of small integer codes, for Hamming distances."""

    def __init__(self, base: SearchSpace[Arch], ids: Sequence[str]) -> None:
        rows = [base.params_of(base.parse(i)) for i in ids]
        self.names = sorted({name for row in rows for name in row})
        self.known = set(self.names)
        self.values: list[dict[Any, int]] = [{} for _ in self.names]
        self.matrix = np.full((len(rows), len(self.names)), -1, dtype=np.int32)  # -1: parameter not drawn
        for r, row in enumerate(rows):
            for c, name in enumerate(self.names):
                if name in row:
                    self.matrix[r, c] = self.values[c].setdefault(row[name], len(self.values[c]))

    def distances(self, params: dict[str, Any]) -> np.ndarray:
        """How many parameters of each listed architecture differ from ``params``."""
        query = np.array([self.values[c].get(params[name], -2) if name in params else -1
                          for c, name in enumerate(self.names)], dtype=np.int32)
        outside = sum(name not in self.known for name in params)  # drawn by no listed architecture
        return (self.matrix != query).sum(axis=1) + outside
