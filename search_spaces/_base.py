"""The search-space interface: a few required methods, optional capabilities.

Modelled on Optuna's ``BaseSampler`` (small abstract base) and archai's ``DiscreteSearchSpace``
(sample / save / load), not on a graph base class: a space owns its architecture type and turns it
into ONNX; everything else (models, search, CLI) works through this interface and the canonical id.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import onnx

from exporters import materialize, to_text

if TYPE_CHECKING:
    import optuna
    import torch

Arch = TypeVar("Arch")


class SearchSpace(abc.ABC, Generic[Arch]):
    """A family of architectures, each with one canonical string id.

    Required: :attr:`name`, :meth:`arch_id`, :meth:`parse`, :meth:`sample`, :meth:`suggest` and
    :meth:`build_onnx`. Finite spaces also override :meth:`enumerate` and :attr:`size`.

    ``build_onnx`` returns a *structural* model: it may call ONNX local functions for repeated blocks
    and stand for weights with ``param.Tensor`` placeholders (see :mod:`exporters`). From it the space
    derives both the executable model (:meth:`to_onnx`) and the canonical text (:meth:`to_text`), so the
    two can never disagree.
    """

    #: Registry key, e.g. ``"nb201"``. Lower case, no spaces.
    name: str
    #: Input the exported model declares, ``(batch, channels, height, width)`` for image models; where
    #: it varies per architecture (e.g. a searched resolution), the largest, and :meth:`input_shape_of`
    #: gives each architecture's own.
    input_shape: tuple[int, ...]

    # --- identity -------------------------------------------------------------------------
    @abc.abstractmethod
    def arch_id(self, arch: Arch) -> str:
        """The canonical, human-readable id of ``arch`` (what tables and stores are keyed by)."""

    @abc.abstractmethod
    def parse(self, arch_id: str) -> Arch:
        """Inverse of :meth:`arch_id`; raises ``ValueError`` naming the malformed part."""

    # --- drawing architectures ------------------------------------------------------------
    @abc.abstractmethod
    def sample(self, rng: np.random.Generator) -> Arch:
        """One architecture drawn at random (uniformly where the space allows it)."""

    @abc.abstractmethod
    def suggest(self, trial: optuna.Trial) -> Arch:
        """Draw an architecture through ``trial.suggest_*`` so that any Optuna sampler can search."""

    def params_of(self, arch: Arch) -> dict[str, Any]:
        """Parameters that :meth:`suggest` turns into ``arch``: its inverse. Optional.

        A space that has it lets a sampler search a table's rows through the space's own parameters
        (:class:`~search_spaces.SubsetSpace` snaps each draw to the nearest row), instead of through a
        row index whose order means nothing. Parameters ``suggest`` would not draw for ``arch`` are left
        out.
        """
        raise NotImplementedError(f"search space {self.name!r} does not map architectures back to parameters")

    def enumerate(self) -> Iterator[Arch]:
        """Every architecture, in a fixed order. Only finite spaces implement it."""
        raise NotImplementedError(f"search space {self.name!r} is not enumerable")

    @property
    def size(self) -> int | None:
        """Number of architectures, or ``None`` where unknown or infinite."""
        return None

    # --- ONNX ------------------------------------------------------------------------------
    def input_shape_of(self, arch: Arch) -> tuple[int, ...]:
        """The input the model of ``arch`` declares; :attr:`input_shape` unless the space varies it."""
        return tuple(self.input_shape)

    @abc.abstractmethod
    def build_onnx(self, arch: Arch) -> onnx.ModelProto:
        """The structural ONNX model of ``arch`` (functions and weight placeholders allowed)."""

    def to_onnx(self, arch: Arch, seed: int = 0) -> onnx.ModelProto:
        """An executable model: functions inlined, placeholders filled with seeded random weights."""
        return materialize(self.build_onnx(arch), seed=seed)

    def to_text(self, arch: Arch) -> str:
        """The canonical ONNX text of ``arch``: what the regression model reads."""
        return to_text(self.build_onnx(arch))

    def to_torch(self, arch: Arch, seed: int = 0) -> torch.nn.Module:
        """A trainable ``torch.nn.Module`` of ``arch`` with :meth:`to_onnx`'s weights for ``seed``.

        It runs the very model :meth:`to_onnx` returns (:func:`exporters.onnx_to_torch`), so the network
        trained is the one searched, parameter for parameter. Imports torch.
        """
        from exporters import onnx_to_torch

        return onnx_to_torch(self.to_onnx(arch, seed))

    # --- optional capabilities ---------------------------------------------------------
    def equivalents(self, arch: Arch) -> list[Arch]:
        """Other architectures whose networks compute what ``arch``'s does: they differ from it only
        in operations whose result never reaches the output (or never depends on the input).

        Their accuracy is ``arch``'s up to training noise, while their cost (latency, parameters)
        need not be: nasrlm can train accuracy-like objectives on them too, and reads an accuracy
        through several of them, so that equivalent architectures get one prediction (see
        :mod:`nasrlm.rlm.augment`). The relation must be symmetric and transitive (a partition into
        classes). Default: none known.
        """
        return []

    # --- convenience ---------------------------------------------------------------------
    def sample_ids(self, n: int, seed: int = 0) -> list[str]:
        """``n`` distinct random ids (fewer if the space is smaller), reproducible from ``seed``."""
        rng = np.random.default_rng(seed)
        ids: dict[str, None] = {}
        limit = self.size if self.size is not None else n
        attempts = 0
        while len(ids) < min(n, limit) and attempts < 100 * n + 100:
            ids.setdefault(self.arch_id(self.sample(rng)))
            attempts += 1
        return list(ids)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def describe(self) -> dict[str, Any]:
        """One-line facts for ``nasrlm spaces``."""
        return {"name": self.name, "size": self.size, "input_shape": list(self.input_shape),
                "doc": (type(self).__doc__ or "").strip().splitlines()[0]}
