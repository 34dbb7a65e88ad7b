"""What the sampler knows of each architecture behind Optuna parameters, computed once.

A search meets the same architectures round after round (the candidate pool, the trials), and building
one's ONNX graph is the slow part of describing it (tracing a torch space takes a good part of a
second), so the id behind each parameter dict, each id's canonical text and its free labels are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna

from nasrlm.free_labels import (
    ALL_FREE_OBJECTIVES,
    DEFAULT_CACHE,
    FREE_OBJECTIVES,
    ArchitectureBuildError,
    describe,
)
from nasrlm.label_cache import LabelCache
from nasrlm.rlm.augment import equivalence_class
from search_spaces import SearchSpace

#: Fewest architectures described at once that get a progress bar (a round's few new candidates get none).
_BAR_FROM = 100
#: Names of the free labels the decoder is given (parameters, MACs), in their column order.
FREE_NAMES: tuple[str, ...] = tuple(o.name for o in FREE_OBJECTIVES)


class SpaceMismatchError(ValueError):
    """A trial's parameters do not describe an architecture of the sampler's space."""


class ArchCache:
    """Ids, canonical texts and free labels of a space's architectures, each computed once.

    Args:
        space: the search space whose ``suggest`` builds an architecture from a parameter dict.
        graph: also compute the graph labels (:data:`~nasrlm.free_labels.GRAPH_OBJECTIVES`), after the
            free labels in each row; a prior that reads them needs them.
        progress: show a progress bar when many architectures (a hundred or more) are described at once.
        cache: the :class:`~nasrlm.label_cache.LabelCache` read before describing an architecture and
            written after (``"default"``: the default one; None: none), so that workers and resumed
            searches describe each one once.
    """

    def __init__(self, space: SearchSpace, *, graph: bool = False, progress: bool = False,
                 cache: LabelCache | str | None = DEFAULT_CACHE) -> None:
        self.space = space
        self.graph = graph
        self.progress = progress
        self.cache = cache
        self._ids: dict[tuple, str] = {}
        self._texts: dict[str, str] = {}
        self._labels: dict[str, np.ndarray] = {}
        self._classes: dict[str, str] = {}
        #: architectures the space failed to build, with the error
        self.failed: dict[str, str] = {}

    def arch_id_of(self, params: dict[str, Any]) -> str:
        """The canonical id of the architecture ``space.suggest`` builds from ``params``."""
        key = tuple(sorted(params.items()))
        if key not in self._ids:
            try:
                arch = self.space.suggest(optuna.trial.FixedTrial(params))
            except ValueError as error:
                raise SpaceMismatchError(
                    f"parameters {sorted(params)} do not build an architecture of space "
                    f"{self.space.name!r} ({error}); RLMSampler needs the objective to draw its "
                    f"architecture with space.suggest(trial)") from error
            self._ids[key] = self.space.arch_id(arch)
        return self._ids[key]

    def classes_of(self, arch_ids: Sequence[str]) -> list[str]:
        """The equivalence class of each of ``arch_ids`` (:func:`~nasrlm.rlm.augment.equivalence_class`):
        architectures of one class compute the same function, so they share an accuracy."""
        for arch_id in arch_ids:
            if arch_id not in self._classes:
                self._classes[arch_id] = equivalence_class(self.space, arch_id)
        return [self._classes[i] for i in arch_ids]

    def describe(self, arch_ids: Sequence[str]) -> None:
        """Text and labels of each new architecture, from one ONNX build each (in one batch: one bar)."""
        todo = [i for i in dict.fromkeys(arch_ids) if i not in self._labels and i not in self.failed]
        if not todo:
            return
        columns = len(self.columns)
        bar = self.progress and len(todo) >= _BAR_FROM
        for chunk in describe(self.space, todo, graph=self.graph, cache=self.cache, progress=bar,
                              on_error=self.failed.__setitem__):
            for arch_id, (text, labels) in chunk.items():
                self._texts[arch_id], self._labels[arch_id] = text, labels[:columns]

    def buildable(self, arch_ids: Sequence[str]) -> list[str]:
        """Those of ``arch_ids`` the space builds (each described; the others are in :attr:`failed`)."""
        self.describe(arch_ids)
        return [i for i in arch_ids if i not in self.failed]

    def _known(self, arch_ids: Sequence[str]) -> None:
        self.describe(arch_ids)
        failed = [i for i in arch_ids if i in self.failed]
        if failed:
            raise ArchitectureBuildError(self.failed[failed[0]])

    def texts_of(self, arch_ids: Sequence[str]) -> list[str]:
        """Canonical ONNX texts (``space.to_text``) of ``arch_ids``."""
        self._known(arch_ids)
        return [self._texts[i] for i in arch_ids]

    def labels_of(self, arch_ids: Sequence[str]) -> np.ndarray:
        """Rows of free labels, and with ``graph`` the graph labels after them (``columns`` wide)."""
        self._known(arch_ids)
        return np.array([self._labels[i] for i in arch_ids]).reshape(len(arch_ids), len(self.columns))

    def free_labels_of(self, arch_ids: Sequence[str]) -> np.ndarray:
        """Rows of the free labels alone (:data:`FREE_NAMES`)."""
        return self.labels_of(arch_ids)[:, : len(FREE_NAMES)]

    @property
    def columns(self) -> tuple[str, ...]:
        """Names of the columns of :meth:`labels_of`."""
        objectives = ALL_FREE_OBJECTIVES if self.graph else FREE_OBJECTIVES
        return tuple(o.name for o in objectives)

    def split(self, labels: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Rows of :meth:`labels_of` as two dicts by name: the free labels (what the decoder is given)
        and the graph labels (what a graph prior reads; empty without ``graph``)."""
        columns = {name: labels[:, k] for k, name in enumerate(self.columns)}
        free = {name: columns.pop(name) for name in FREE_NAMES}
        return free, columns
